"""Reference check: the evaluation clients people use, against `evald serve`.

lm-evaluation-harness (local-completions: token-id prompts, echo and logprobs
for multiple choice, generate_until for generation) and Inspect (its openai
provider, over the Responses API and over chat completions) each evaluate a
small local task against `evald serve --model CKPT` on a random checkpoint.
Their figures must equal evald's own:

- lm-eval's acc and acc_norm, and every choice's log-likelihood, equal
  `evald run` scoring the same questions with the loglikelihood checker
  (acc, then `evald rescore --metric acc_norm`);
- lm-eval's generations equal the server's own answers to the same prompts;
- Inspect's outputs equal the server's chat answers to the same messages.

usage: clients_reference.py EVALD TMPDIR        (exit 77: lm-eval or Inspect absent)
"""
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import urllib.request

try:
    import lm_eval
    from lm_eval.tasks import TaskManager
    import inspect_ai
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate
except ImportError as e:  # the reference environment predates them
    print(f"SKIP: {e} (bash scripts/reference-env.sh)")
    sys.exit(77)

EVALD, TMP = sys.argv[1], pathlib.Path(sys.argv[2])

MC = [
    {"id": "1", "question": "The capital of France is", "choices": ["Paris", "Berlin", "Madrid"], "answer": 0},
    {"id": "2", "question": "Two plus two equals", "choices": ["three", "four", "five"], "answer": 1},
    {"id": "3", "question": "Water freezes at", "choices": ["zero degrees", "a hundred degrees"], "answer": 0},
    {"id": "4", "question": "The opposite of hot is", "choices": ["cold", "warm", "tepid", "boiling"], "answer": 0},
    {"id": "5", "question": "Une boisson chaude:", "choices": ["café", "thé glacé", "eau"], "answer": 0},
    {"id": "6", "question": "The sky on a clear day is", "choices": ["blue", "green"], "answer": 0},
]
GEN = [
    {"question": "Once upon a time", "answer": "there"},
    {"question": "The quick brown fox", "answer": "jumps"},
    {"question": "In the beginning", "answer": "God"},
]


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)


def run(*args):
    p = subprocess.run([EVALD, *args], capture_output=True, text=True)
    if p.returncode not in (0, 1):
        sys.exit(f"evald {' '.join(args)}: exit {p.returncode}\n{p.stderr}")
    return p


def close(a, b, tol=1e-6):
    return abs(a - b) <= tol * (1 + abs(b))


def main():
    shutil.rmtree(TMP, ignore_errors=True)
    TMP.mkdir(parents=True)
    ckpt = TMP / "ckpt"
    run("engine", "mkmodel", "--arch", "qwen2", "--out", str(ckpt), "--vocab", "600", "--seed", "3")
    srv = subprocess.Popen([EVALD, "--db", str(TMP / "serve.db"), "serve", "--model", str(ckpt), "--port", "0",
                            "--print-port"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    failures = []
    try:
        port = int(srv.stdout.readline())
        base = f"http://127.0.0.1:{port}/v1"
        os.environ["OPENAI_API_KEY"] = "evald-local"
        failures += check_lm_eval(port, base, ckpt)
        failures += check_inspect(port, base)
    finally:
        srv.terminate()
        srv.wait()
    for f in failures:
        print("FAIL:", f)
    print(f"clients reference: lm-eval {lm_eval.__version__}, inspect-ai {inspect_ai.__version__}: "
          f"{'ok' if not failures else str(len(failures)) + ' failures'}")
    return 1 if failures else 0


def check_lm_eval(port, base, ckpt):
    failures = []
    tasks = TMP / "tasks"
    tasks.mkdir()
    (tasks / "mc.jsonl").write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in MC))
    (tasks / "gen.jsonl").write_text("".join(json.dumps(d) + "\n" for d in GEN))
    (tasks / "evald_mc.yaml").write_text(f"""task: evald_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {tasks / 'mc.jsonl'}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: acc
  - metric: acc_norm
""")
    (tasks / "evald_gen.yaml").write_text(f"""task: evald_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: {tasks / 'gen.jsonl'}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 8
  do_sample: false
  temperature: 0
metric_list:
  - metric: exact_match
""")
    out = lm_eval.simple_evaluate(
        model="local-completions",
        model_args={"model": "ckpt", "base_url": f"{base}/completions", "tokenizer_backend": "huggingface",
                    "tokenizer": str(ckpt), "num_concurrent": 1, "max_retries": 1},
        tasks=["evald_mc", "evald_gen"], task_manager=TaskManager(include_path=str(tasks)), log_samples=True)
    res = out["results"]["evald_mc"]
    lm_acc, lm_norm = res["acc,none"], res["acc_norm,none"]

    # evald itself on the same questions, through the same server
    suite = TMP / "mc-suite"
    suite.mkdir()
    (suite / "suite.json").write_text(json.dumps({"name": "mc", "checker": {"type": "loglikelihood"}}))
    (suite / "samples.jsonl").write_text("".join(
        json.dumps({"id": d["id"], "input": d["question"], "choices": d["choices"], "target": d["answer"]},
                   ensure_ascii=False) + "\n" for d in MC))
    db = str(TMP / "evald.db")
    p = run("--db", db, "run", "--model", base, "--model-name", "ckpt", "--suite", str(suite), "--json")
    ev_acc = json.loads(p.stdout)["suites"][0]["score"]
    p = run("--db", db, "rescore", "1", "--metric", "acc_norm", "--json")
    ev_norm = json.loads(p.stdout)["suites"][0]["score"]
    print(f"lm-eval multiple choice: acc {lm_acc:.4f} acc_norm {lm_norm:.4f}; evald: acc {ev_acc:.4f} "
          f"acc_norm {ev_norm:.4f}")
    if not close(lm_acc, ev_acc, 1e-12) or not close(lm_norm, ev_norm, 1e-12):
        failures.append(f"acc/acc_norm: lm-eval {lm_acc}/{lm_norm}, evald {ev_acc}/{ev_norm}")
    # every choice's log-likelihood
    rows = {}
    for line in run("--db", db, "export", "1").stdout.splitlines():
        r = json.loads(line)
        rows[r["sample_id"]] = json.loads(r["response"])["logprobs"]
    n = 0
    for s in out["samples"]["evald_mc"]:
        doc = s["doc"]
        lls = [r[0][0] if isinstance(r[0], (list, tuple)) else r[0] for r in s["resps"]]
        mine = rows[str(doc["id"])]
        for k, (a, b) in enumerate(zip(lls, mine)):
            n += 1
            if not close(a, b):
                failures.append(f"sample {doc['id']} choice {k}: lm-eval {a}, evald {b}")
    print(f"lm-eval log-likelihoods compared: {n}")

    # generations: lm-eval's equal the server's own greedy answers
    for s in out["samples"]["evald_gen"]:
        got = s["resps"][0][0]
        want = post(port, "/v1/completions", {"prompt": s["arguments"][0][0] if isinstance(s["arguments"][0], (list, tuple)) else s["doc"]["question"],
                                               "max_tokens": 8, "temperature": 0, "stop": ["\n"]})["choices"][0]["text"]
        if got != want:
            failures.append(f"generation for {s['doc']['question']!r}: lm-eval {got!r}, server {want!r}")
    print(f"lm-eval generations compared: {len(out['samples']['evald_gen'])}")
    return failures


def check_inspect(port, base):
    failures = []
    questions = ["Say something about rivers.", "Name a colour.", "What is two plus two?"]
    for responses_api in (True, False):
        task = Task(dataset=[Sample(input=q, target="x") for q in questions], solver=generate(), scorer=includes())
        logs = inspect_eval(task, model="openai/ckpt", model_base_url=base,
                            model_args={"responses_api": responses_api}, log_dir=str(TMP / "inspect"),
                            display="none", max_tokens=8, temperature=0)
        log = logs[0]
        api = "responses" if responses_api else "chat"
        if log.status != "success":
            failures.append(f"inspect over {api}: status {log.status}: {log.error}")
            continue
        for s in log.samples:
            want = post(port, "/v1/chat/completions", {"messages": [{"role": "user", "content": s.input}],
                                                        "max_tokens": 8, "temperature": 0})
            text = want["choices"][0]["message"]["content"]
            if s.output.completion != text:
                failures.append(f"inspect over {api}, {s.input!r}: {s.output.completion!r}, server {text!r}")
        print(f"inspect over {api}: {len(log.samples)} samples, status {log.status}")
    return failures


if __name__ == "__main__":
    sys.exit(main())
