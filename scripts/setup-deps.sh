#!/usr/bin/env bash
# Installs the Debian packages evald builds and tests with, only those missing.
# Idempotent: a second run installs nothing and makes no network call.
set -euo pipefail

pkgs=(
  build-essential cmake ninja-build pkg-config git
  libcurl4-openssl-dev libcjson-dev libarchive-dev libpcre2-dev libsqlite3-dev
  libssl-dev libmicrohttpd-dev libseccomp-dev libutf8proc-dev libcmocka-dev libzstd-dev libopenblas-dev libsleef-dev
  libpng-dev libjpeg62-turbo-dev libwebp-dev libgif-dev libxml2-dev chromium
  sqlite3 zstd python3 python3-pip unzip zip
  slurm-wlm munge
)

missing=()
for p in "${pkgs[@]}"; do
  st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$st" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "setup-deps: all ${#pkgs[@]} packages present"
  exit 0
fi

echo "setup-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
