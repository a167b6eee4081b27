#!/usr/bin/env python3
"""evald's BFCL verdicts against BFCL's own ast_checker (the bfcl-eval package).

    bfcl_reference.py EVALD SCRATCH_DIR SHARED_DIR [PER_CATEGORY]

For BFCL's simple, multiple, parallel and parallel_multiple questions (from
../shared/data/bfcl) it makes a perturbation set of answers: the right call,
prompted as Python text and through the function-calling channel; a dotted
name written with '_' in text and with '.' in the channel; a required
parameter left out; a wrong value; an int for a float; an int inside a list
of floats; an unknown parameter; a string of another case and spacing; a
number given as a string. BFCL scores each (default_decode_ast_prompting and
a prompting model for text, a function-calling model for the channel);
evald scores the same answers as BFCL result files through `evald score`.
Prints the agreement per category and the disagreements; exit 1 on any.
Exit 77 (skip) without bfcl-eval or the data.
"""
import copy
import json
import os
import subprocess
import sys

try:
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.constants.model_config import MODEL_CONFIG_MAPPING
    from bfcl_eval.eval_checker.ast_eval import ast_checker as bfcl
    from bfcl_eval.model_handler.utils import default_decode_ast_prompting
except Exception as e:  # not installed, or a dependency missing
    print("SKIP: bfcl-eval is not usable here (%s)" % e)
    sys.exit(77)

CATEGORIES = ["simple", "multiple", "parallel", "parallel_multiple"]


def pick_models():
    prompt = fc = None
    for name, cfg in MODEL_CONFIG_MAPPING.items():
        if "/" in name:
            continue
        if cfg.underscore_to_dot and fc is None:
            fc = name
        if not cfg.underscore_to_dot and not cfg.is_fc_model and prompt is None:
            prompt = name
    return prompt, fc


def py(v):
    """A value as Python source."""
    if isinstance(v, bool):
        return "True" if v else "False"
    if v is None:
        return "None"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(py(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join("%s: %s" % (py(k), py(x)) for k, x in v.items()) + "}"
    return repr(v)


def first_values(gt_args):
    out = {}
    for p, vals in gt_args.items():
        chosen = next((v for v in vals if v != ""), None)
        if chosen is None:
            continue
        if isinstance(chosen, dict):  # nested acceptable values: one of each
            chosen = {k: (vs[0] if isinstance(vs, list) and vs else vs) for k, vs in chosen.items()}
        out[p] = chosen
    return out


def text_of(calls):
    return "[" + ", ".join("%s(%s)" % (n, ", ".join("%s=%s" % (k, py(v)) for k, v in a.items())) for n, a in calls) + "]"


def perturbations(functions, gt):
    """(label, channel, [(name, args)]) answers for one question."""
    calls = []
    for entry in gt:
        (name, args), = entry.items()
        calls.append((name, first_values(args)))
    props = {f["name"]: f.get("parameters", {}).get("properties", {}) for f in functions}
    req = {f["name"]: f.get("parameters", {}).get("required", []) for f in functions}
    out = [("right", "text", calls), ("right", "fc", [(n.replace(".", "_"), a) for n, a in calls])]
    name0, args0 = calls[0]
    rest = calls[1:]
    if "." in name0:
        out.append(("underscore name in text", "text", [(name0.replace(".", "_"), args0)] + rest))
        out.append(("dotted name in the channel", "fc", [(name0, args0)] + [(n.replace(".", "_"), a) for n, a in rest]))
    r = [p for p in req.get(name0, []) if p in args0]
    if r:
        a = dict(args0)
        del a[r[0]]
        out.append(("missing required", "text", [(name0, a)] + rest))
    for p, v in args0.items():
        ptype = props.get(name0, {}).get(p, {}).get("type")
        if isinstance(v, bool):
            continue
        if isinstance(v, int) and ptype == "integer":
            out.append(("wrong int", "text", [(name0, dict(args0, **{p: v + 7}))] + rest))
            out.append(("int as string", "text", [(name0, dict(args0, **{p: str(v)}))] + rest))
            break
    for p, v in args0.items():
        ptype = props.get(name0, {}).get(p, {}).get("type")
        if isinstance(v, float) and ptype == "float" and v == int(v):
            out.append(("int for float", "text", [(name0, dict(args0, **{p: int(v)}))] + rest))
            break
    for p, v in args0.items():
        items = props.get(name0, {}).get(p, {}).get("items", {}).get("type")
        if isinstance(v, list) and v and items == "float" and all(isinstance(x, float) and x == int(x) for x in v):
            out.append(("ints in a float list", "text", [(name0, dict(args0, **{p: [int(x) for x in v]}))] + rest))
            break
    for p, v in args0.items():
        if isinstance(v, str) and len(v) > 2:
            out.append(("string case and spacing", "text", [(name0, dict(args0, **{p: v.upper() + " "}))] + rest))
            out.append(("wrong string", "text", [(name0, dict(args0, **{p: v + "zq"}))] + rest))
            break
    out.append(("unknown parameter", "text", [(name0, dict(args0, zz_extra=1))] + rest))
    return out


def bfcl_verdict(functions, gt, category, channel, calls, models):
    prompt_model, fc_model = models
    try:
        if channel == "text":
            decoded = default_decode_ast_prompting(text_of(calls))
            model = prompt_model
        else:
            decoded = [{n: copy.deepcopy(a)} for n, a in calls]
            model = fc_model
        return bool(bfcl.ast_checker(functions, decoded, gt, Language.PYTHON, category, model)["valid"])
    except Exception:
        return False


def main():
    evald, scratch, shared = sys.argv[1], sys.argv[2], sys.argv[3]
    per = int(sys.argv[4]) if len(sys.argv) > 4 else 100
    data = os.path.join(shared, "data", "bfcl")
    if not os.path.isdir(data):
        print("SKIP: no BFCL data under %s" % data)
        return 77
    models = pick_models()
    os.makedirs(scratch, exist_ok=True)
    total = agree = 0
    for cat in CATEGORIES:
        qfile = os.path.join(data, "BFCL_v3_%s.json" % cat)
        afile = os.path.join(data, "possible_answer", "BFCL_v3_%s.json" % cat)
        suite = os.path.join(scratch, cat)
        subprocess.run([evald, "suites", "import", "bfcl", qfile, "--answers", afile, "-o", suite], check=True,
                       capture_output=True)
        with open(qfile, encoding="utf-8") as f:
            questions = [json.loads(l) for l in f if l.strip()][:per]
        with open(afile, encoding="utf-8") as f:
            answers = {a["id"]: a["ground_truth"] for a in (json.loads(l) for l in f if l.strip())}
        rows, official = [], []
        for q in questions:
            functions, gt = q["function"], answers[q["id"]]
            for label, channel, calls in perturbations(functions, gt):
                official.append((q["id"], label, channel, bfcl_verdict(functions, gt, cat, channel, calls, models)))
                if channel == "text":
                    rows.append({"id": q["id"], "result": text_of(calls)})
                else:
                    rows.append({"id": q["id"], "result": [{n: json.dumps(a)} for n, a in calls]})
        results = os.path.join(scratch, cat + "_result.json")
        details = os.path.join(scratch, cat + "_details.jsonl")
        with open(results, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        subprocess.run([evald, "-q", "score", "--suite", suite, "--samples", results, "--details", details],
                       capture_output=True)
        with open(details, encoding="utf-8") as f:
            ours = [json.loads(l)["passed"] for l in f if l.strip()]
        same = sum(1 for (_, _, _, b), e in zip(official, ours) if b == e)
        print("%-18s %4d/%d verdicts equal to BFCL's ast_checker (%d pass by BFCL)"
              % (cat, same, len(official), sum(1 for o in official if o[3])))
        shown = 0
        for (qid, label, channel, b), e in zip(official, ours):
            if b != e and shown < 8:
                print("  differs: %s %s (%s): BFCL %s, evald %s" % (qid, label, channel, b, e))
                shown += 1
        total += len(official)
        agree += same
    print("BFCL verdict agreement: %d/%d (prompting model %s, function-calling model %s)" % (agree, total, *models))
    return 0 if agree == total else 1


if __name__ == "__main__":
    sys.exit(main())
