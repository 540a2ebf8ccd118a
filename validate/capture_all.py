#!/usr/bin/python3
# capture_all.py: captures every config in validate/scenarios (each in its own process), keeps the
# traces, and prints a Markdown table of the real per-phase peaks of the last iteration and how
# long each capture took (wall clock, and CPU seconds, which do not depend on the machine's
# load). The planner comparison (the lead's C++ side) reads the same traces.
#
#   /usr/bin/python3 validate/capture_all.py [--out DIR] [CONFIG ...]
import argparse
import glob
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from summarise_trace import summarise  # noqa: E402

PHASES = ("forward", "backward", "optimizer", "zero_grad", "eval")


def last_iteration_peaks(phases):
    """Peak per phase kind over the last iteration's phases (micro-batches merged)."""
    iters = [p["label"].split("/")[0] for p in phases if p["label"].startswith("iter")]
    last = iters[-1] if iters else None
    out = {}
    for p in phases:
        parts = p["label"].split("/")
        if parts[0] == last and parts[-1] in PHASES:
            out[parts[-1]] = max(out.get(parts[-1], 0), p["peak"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("configs", nargs="*")
    ap.add_argument("--out", help="directory for the traces (default: a temporary directory)")
    args = ap.parse_args()
    configs = args.configs or sorted(glob.glob(os.path.join(HERE, "scenarios", "*.yaml")))
    out = args.out or tempfile.mkdtemp(prefix="oomcast-captures-")
    os.makedirs(out, exist_ok=True)
    print("| config | setup (B) | forward peak | backward peak | optimizer peak | eval peak "
          "| overall peak | wall s | cpu s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    failed = 0
    for cfg in configs:
        name = os.path.splitext(os.path.basename(cfg))[0]
        trace = os.path.join(out, name + ".trace")
        t0 = time.time()
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = subprocess.run([sys.executable, os.path.join(HERE, "capture.py"), cfg, "-o", trace, "-q"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        secs = time.time() - t0
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime
        if r.returncode != 0:
            failed += 1
            print(f"| {name} | capture failed: {r.stdout.strip().splitlines()[-1:]} |", flush=True)
            continue
        with open(trace) as f:
            phases, totals = summarise(f)
        setup = next((p["live_at_end"] for p in phases if p["label"] == "setup"), 0)
        pk = last_iteration_peaks(phases)
        cell = lambda k: str(pk[k]) if k in pk else "-"  # noqa: E731
        print(f"| {name} | {setup} | {cell('forward')} | {cell('backward')} | {cell('optimizer')} "
              f"| {cell('eval')} | {totals['peak']} | {secs:.1f} | {cpu:.1f} |", flush=True)
    print(f"\ntraces in {out}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
