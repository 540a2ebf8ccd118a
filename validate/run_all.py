#!/usr/bin/env python3
# run_all.py: captures every scenario in validate/scenarios/ with real PyTorch (the torch of the
# python running it: the venv's 2.13), compares each with the planner for that release
# (`oomcast compare --json --set allocator.torch_version=R`) and writes the accuracy table into
# docs/validation.md (between the generated-table markers). The one command behind that table:
#
#   .venv/bin/python validate/run_all.py --oomcast build/oomcast [--out DIR] [--jobs 2] [--no-write] [--reuse]
#
# --reuse compares the traces already in DIR (captured by an earlier run) without capturing
# them again: a planner change is measured against the same real runs in seconds.
import argparse
import concurrent.futures
import glob
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DOC = os.path.join(REPO, "docs", "validation.md")
BEGIN, END = "<!-- run_all.py: begin table -->", "<!-- run_all.py: end table -->"
PHASE_KINDS = ("setup", "forward", "backward", "optimizer", "zero_grad", "eval")


def capture_and_compare(scenario, oomcast, out_dir, tolerance, python=sys.executable, overrides=(), reuse=False):
    """Captures SCENARIO with PYTHON's torch (unless `reuse` finds its trace in OUT_DIR) and
    compares it with the plan (--set OVERRIDES)."""
    name = os.path.splitext(os.path.basename(scenario))[0]
    trace = os.path.join(out_dir, name + ".trace")
    t0 = time.time()
    if not (reuse and os.path.isfile(trace) and os.path.getsize(trace) > 0):
        subprocess.run([python, os.path.join(HERE, "capture.py"), scenario, "-o", trace, "-q"], check=True,
                       env=dict(os.environ, OOMCAST_HOOK_DIR=os.path.join(out_dir, "hook-" + name)))
    capture_s = time.time() - t0
    sets = [arg for key_value in overrides for arg in ("--set", key_value)]
    done = subprocess.run([oomcast, "compare", scenario, trace, "--json", "--tolerance", tolerance, *sets],
                          stdout=subprocess.PIPE, text=True)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"oomcast compare {scenario} failed with exit code {done.returncode}")
    result = json.loads(done.stdout)
    result["name"], result["capture_seconds"] = name, capture_s
    return result


def describe(scenario):
    import yaml
    with open(scenario) as f:
        doc = yaml.safe_load(f)
    model = doc["model"]
    model = model if isinstance(model, str) else model.get("preset") or model.get("path")
    return model, doc.get("description", "")


def phase_kind(label):
    return "setup" if label == "setup" else label.rsplit("/", 1)[-1]


def pct(x):
    return f"{x * 100:+.2f}"


def table(results, scenarios):
    head = ("| scenario | model | configuration | real peak (B) | predicted peak (B) | "
            + " | ".join(f"{k} %" for k in PHASE_KINDS) + " | max % | median % |")
    lines = [head, "|" + "---|" * 5 + "---:|" * (len(PHASE_KINDS) + 2)]
    all_errors = []
    for r, scenario in zip(results, scenarios):
        model, description = describe(scenario)
        worst = {}
        for p in r["phases"]:  # the phase's largest error over iterations and micro-batches
            k = phase_kind(p["label"])
            if k not in worst or abs(p["peak_error"]) > abs(worst[k]):
                worst[k] = p["peak_error"]
            all_errors.append(abs(p["peak_error"]))
        cells = [pct(worst[k]) if k in worst else "-" for k in PHASE_KINDS]
        lines.append(f"| {r['name']} | {model} | {description} | {r['real_peak_bytes']} | "
                     f"{r['predicted_peak_bytes']} | " + " | ".join(cells) +
                     f" | {r['max_abs_peak_error'] * 100:.2f} | {r['median_abs_peak_error'] * 100:.2f} |")
    all_errors.sort()
    n = len(all_errors)
    median = (all_errors[n // 2] if n % 2 else (all_errors[n // 2 - 1] + all_errors[n // 2]) / 2) if n else 0.0
    summary = (f"Over all {n} phase peaks of the {len(results)} scenarios: max |error| "
               f"{max(all_errors) * 100 if n else 0:.2f}%, median |error| {median * 100:.2f}% "
               f"(of each scenario's real peak).")
    return "\n".join(lines), summary


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--oomcast", default=os.path.join(REPO, "build", "oomcast"), help="the oomcast binary")
    ap.add_argument("--out", default="/tmp/oomcast-captures", help="where the traces go")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--tolerance", default="3%")
    ap.add_argument("--no-write", action="store_true", help="print the table, leave docs/validation.md alone")
    ap.add_argument("--reuse", action="store_true", help="compare the traces already in --out instead of capturing")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    scenarios = sorted(glob.glob(os.path.join(HERE, "scenarios", "*.yaml")))
    import torch
    release = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda s: capture_and_compare(s, args.oomcast, args.out, args.tolerance,
                                                              overrides=[f"allocator.torch_version={release}"],
                                                              reuse=args.reuse),
                                scenarios))
    rows, summary = table(results, scenarios)
    block = (f"{BEGIN}\nGenerated by `.venv/bin/python validate/run_all.py --oomcast build/oomcast` "
             f"(torch {torch.__version__} CPU, one thread; {len(scenarios)} scenarios in "
             f"{time.time() - t0:.0f} s with {args.jobs} jobs). Errors are (predicted − real) / the "
             f"scenario's real overall peak; each phase column is that phase's largest error over the "
             f"iterations and micro-batches.\n\n{rows}\n\n{summary}\n{END}")
    print(block)
    for r in results:
        if r["first_failing_phase"]:
            d = r.get("divergence") or {}
            print(f"{r['name']}: outside {args.tolerance} first in {r['first_failing_phase']}; curves part "
                  f"near '{d.get('op')}' in {d.get('phase')}", file=sys.stderr)
    if not args.no_write:
        with open(DOC) as f:
            text = f.read()
        pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
        text = pattern.sub(lambda m: block, text) if pattern.search(text) else text + "\n" + block + "\n"
        with open(DOC, "w") as f:
            f.write(text)
    return 0 if all(not r["first_failing_phase"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
