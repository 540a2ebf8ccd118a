#!/usr/bin/env python3
"""python_bench.py: what the Python package costs next to the CLI, measured in one run.

1. `import oomcast` in a fresh interpreter: the wall time of `python -c "import oomcast"` minus
   that of `python -c pass` (medians of N), and what `-X importtime` says the import of the
   package itself took (its cumulative line, median of N).
2. For each scenario, `oomcast.plan(SCENARIO)` called in this process (after one call that is
   not counted) against `oomcast plan SCENARIO --json` run as a process per call, as a user or
   a launch script runs it (its output sent to /dev/null), medians of N, interleaved. Counted
   for Python: loading the scenario, the plan, the JSON rendering and its parsing into the typed
   Prediction. Counted for the CLI: the same work plus starting the process (exec, loading the
   shared libraries), which an in-process call does not pay. So a third column is what a script
   that only plans would pay: a fresh `python -c "import oomcast; oomcast.plan(SCENARIO)"`.

    PYTHONPATH=build/python .venv/bin/python bench/python_bench.py --oomcast build/oomcast [--rounds 7] [SCENARIO...]

Prints a table (seconds, medians) and the ratios; --json prints one JSON line per row instead.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIOS = ["scenarios/gpt2-tiny-cpu.yaml", "scenarios/gpt2-small-b8-amp-bf16.yaml",
             "scenarios/llama-2-7b-fp32-adamw-oom.yaml", "scenarios/llama-2-7b-lora-ddp-2xa100-40gb.yaml",
             "scenarios/llama-2-7b-zero3-8xa100.yaml"]


def seconds(run):
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def interleaved(runs, rounds):
    """{name: median seconds} of each run, the runs taking turns so load changes hit all alike."""
    times = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            times[name].append(seconds(run))
    return {name: statistics.median(values) for name, values in times.items()}


def import_time_self_reported(environment):
    """The cumulative microseconds -X importtime gives the top-level `oomcast` import."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", "import oomcast"], env=environment,
                          capture_output=True, text=True, check=True)
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s*\d+\s*\|\s*(\d+)\s*\|\s*oomcast$", line)
        if match:
            return int(match.group(1)) * 1e-6
    raise SystemExit("no `oomcast` line in -X importtime's output")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--oomcast", required=True, help="the CLI binary")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("scenarios", nargs="*", default=SCENARIOS)
    args = parser.parse_args()
    os.chdir(REPO)
    cli = os.path.abspath(args.oomcast)
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTORCH_CUDA_ALLOC_CONF", "OOMCAST_PROGRESS")}
    os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    rows = []

    def python(code):
        return lambda: subprocess.run([sys.executable, "-c", code], env=environment, check=True)

    startup = interleaved({"bare": python("pass"), "import": python("import oomcast")}, args.rounds)
    reported = statistics.median(import_time_self_reported(environment) for _ in range(args.rounds))
    rows.append({"bench": "import oomcast", "python_startup_s": startup["bare"],
                 "startup_and_import_s": startup["import"], "import_s": startup["import"] - startup["bare"],
                 "import_s_by_importtime": reported})

    import oomcast
    for scenario in args.scenarios:
        oomcast.plan(scenario)  # the first call: not counted
        medians = interleaved({
            "python": lambda: oomcast.plan(scenario),
            "cli": lambda: subprocess.run([cli, "plan", scenario, "--json"], env=environment,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
            "fresh_python": python(f"import oomcast; oomcast.plan({scenario!r})"),
        }, args.rounds)
        rows.append({"bench": "plan", "scenario": scenario, "python_s": medians["python"], "cli_s": medians["cli"],
                     "fresh_python_s": medians["fresh_python"],
                     "python_over_cli": medians["python"] / medians["cli"],
                     "fresh_python_over_cli": medians["fresh_python"] / medians["cli"]})

    if args.json:
        for row in rows:
            print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}))
        return
    first = rows[0]
    print(f"import oomcast (medians of {args.rounds}): {first['import_s']:.3f} s by wall time "
          f"({first['startup_and_import_s']:.3f} s with the interpreter's own {first['python_startup_s']:.3f} s), "
          f"{first['import_s_by_importtime']:.3f} s by -X importtime")
    print(f"{'plan, medians of ' + str(args.rounds) + ' (s)':<48} {'python':>8} {'cli':>8} {'fresh py':>9} "
          f"{'py/cli':>7} {'fresh/cli':>9}")
    for row in rows[1:]:
        print(f"{row['scenario']:<48} {row['python_s']:>8.4f} {row['cli_s']:>8.4f} {row['fresh_python_s']:>9.4f} "
              f"{row['python_over_cli']:>7.2f} {row['fresh_python_over_cli']:>9.2f}")


if __name__ == "__main__":
    main()
