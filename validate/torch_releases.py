#!/usr/bin/env python3
# torch_releases.py: the CPU validation under two torch releases side by side, by hand (CI runs
# the venv's 2.13 only). Captures every scenario in validate/scenarios/ once with each python
# (default: Debian's /usr/bin/python3, torch 1.13 from `apt-get install python3-torch`, and the
# project's .venv/bin/python, torch 2.13), compares each capture with the plan for the release
# that ran it (`oomcast compare --set allocator.torch_version=R`) and writes the per-scenario
# max/median errors of both into validate/results/torch-<R2>-cpu.md.
#
#   .venv/bin/python validate/torch_releases.py --oomcast build/oomcast [--jobs 2] [--only NAME ...]
import argparse
import concurrent.futures
import glob
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from run_all import capture_and_compare, phase_kind, PHASE_KINDS  # noqa: E402

END = "<!-- torch_releases.py: end of the generated part; notes below are kept -->"


def torch_release(python):
    """"2.6" for the torch PYTHON imports (its full version second)."""
    out = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], check=True,
                         stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()[-1]
    return ".".join(out.split("+")[0].split(".")[:2]), out


def scenario_tolerance(scenario, default):
    """The `# validation-tolerance: N%` a scenario with a documented gap names (as ctest reads it)."""
    with open(scenario) as f:
        for line in f:
            m = re.match(r"# validation-tolerance: ([0-9.]+%)", line)
            if m:
                return m.group(1)
    return default


def run_release(python, release, scenarios, oomcast, out_dir, jobs, tolerance):
    os.makedirs(out_dir, exist_ok=True)

    def one(scenario):
        try:
            return capture_and_compare(scenario, oomcast, out_dir, scenario_tolerance(scenario, tolerance),
                                       python=python, overrides=[f"allocator.torch_version={release}"])
        except (subprocess.CalledProcessError, RuntimeError, ValueError) as err:
            return {"error": str(err).splitlines()[0][:200]}

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(one, scenarios))


def worst_phases(result):
    worst = {}
    for p in result["phases"]:
        k = phase_kind(p["label"])
        if k not in worst or abs(p["peak_error"]) > abs(worst[k]):
            worst[k] = p["peak_error"]
    return worst


def cell(result):
    if "error" in result:
        return "capture failed", "-", "-"
    verdict = f"outside, first in {result['first_failing_phase']}" if result["first_failing_phase"] else "within"
    return verdict, f"{result['max_abs_peak_error'] * 100:.2f}", f"{result['median_abs_peak_error'] * 100:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--oomcast", default=os.path.join(REPO, "build", "oomcast"))
    ap.add_argument("--python", default="/usr/bin/python3", help="the first torch (default Debian's 1.13)")
    ap.add_argument("--python2", default=os.path.join(REPO, ".venv", "bin", "python"),
                    help="the second torch (default the project's venv, 2.13)")
    ap.add_argument("--out", default="/tmp/oomcast-torch-releases", help="where the traces go")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--tolerance", default="3%")
    ap.add_argument("--only", nargs="*", help="scenario names (default: all of validate/scenarios/)")
    ap.add_argument("--no-write", action="store_true", help="print the table only")
    args = ap.parse_args()
    scenarios = sorted(glob.glob(os.path.join(HERE, "scenarios", "*.yaml")))
    if args.only:
        scenarios = [s for s in scenarios if os.path.splitext(os.path.basename(s))[0] in args.only]
    releases = [torch_release(p) for p in (args.python, args.python2)]
    t0 = time.time()
    # the second release first: it is the one whose failures are news
    results = [run_release(p, r[0], scenarios, args.oomcast, os.path.join(args.out, r[0]), args.jobs, args.tolerance)
               for p, r in reversed(list(zip((args.python, args.python2), releases)))][::-1]
    seconds = time.time() - t0
    (a, a_full), (b, b_full) = releases
    head = (f"| scenario | tolerance | torch {a} | max % | median % | torch {b} | max % | median % | "
            + " | ".join(f"{b} {k} %" for k in PHASE_KINDS) + " |")
    lines = [head, "|---|---|---|---:|---:|---|---:|---:|" + "---:|" * len(PHASE_KINDS)]
    counts = {a: 0, b: 0}
    for scenario, ra, rb in zip(scenarios, *results):
        name = os.path.splitext(os.path.basename(scenario))[0]
        worst = worst_phases(rb) if "error" not in rb else {}
        phases = [f"{worst[k] * 100:+.2f}" if k in worst else "-" for k in PHASE_KINDS]
        for release, r in ((a, ra), (b, rb)):
            counts[release] += "error" not in r and not r["first_failing_phase"]
        lines.append(f"| {name} | {scenario_tolerance(scenario, args.tolerance)} | " + " | ".join(cell(ra)) + " | "
                     + " | ".join(cell(rb)) + " | " + " | ".join(phases) + " |")
    errors = [r["error"] for rs in results for r in rs if "error" in r]
    text = (f"# The CPU validation under torch {a} and torch {b}\n\n"
            f"Generated by `.venv/bin/python validate/torch_releases.py --oomcast build/oomcast` (torch {a_full} "
            f"from `{os.path.relpath(args.python, REPO) if args.python.startswith(REPO) else args.python}`, torch "
            f"{b_full} from `{os.path.relpath(args.python2, REPO) if args.python2.startswith(REPO) else args.python2}`; "
            f"CPU, one thread; {len(scenarios)} scenarios of validate/scenarios/ per release in {seconds:.0f} s "
            f"with {args.jobs} jobs). Each capture is compared with the plan for the release that ran it "
            f"(`--set allocator.torch_version=R`). Errors are (predicted − real) / the scenario's real peak, "
            f"per phase; max and median over its phases; the {b} phase columns are each phase kind's "
            f"largest error.\n\n" + "\n".join(lines) + "\n\n"
            f"Within tolerance: {counts[a]} of {len(scenarios)} under torch {a}, {counts[b]} of "
            f"{len(scenarios)} under torch {b}.\n")
    if errors:
        text += "\nCapture failures:\n\n" + "\n".join(f"- {e}" for e in errors) + "\n"
    print(text)
    if not args.no_write:
        path = os.path.join(HERE, "results", f"torch-{b}-cpu.md")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        kept = ""  # the notes written by hand below the generated part survive a rerun
        if os.path.exists(path):
            with open(path) as f:
                old = f.read()
            if END in old:
                kept = old.split(END, 1)[1]
        with open(path, "w") as f:
            f.write(text + "\n" + END + kept)
        print(f"wrote {os.path.relpath(path, REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
