#!/usr/bin/env python3
"""python_bench.py: the Python package's costs side by side. `import oomcast` in a fresh
interpreter (against `python -c pass`), and `oomcast.plan(SCENARIO)` in one process against
`oomcast plan SCENARIO --json` (a process per run, as a user runs it), best and median of N.

    PYTHONPATH=build/python .venv/bin/python bench/python_bench.py --oomcast build/oomcast [--rounds 5] [SCENARIO...]

Prints one JSON line per scenario and one for the import.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIOS = ["scenarios/gpt2-small-b8-amp-bf16.yaml", "scenarios/llama-2-7b-fp32-adamw-oom.yaml"]


def timed(run, rounds):
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return {"best_s": round(min(times), 4), "median_s": round(statistics.median(times), 4)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--oomcast", required=True, help="the CLI binary")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("scenarios", nargs="*", default=SCENARIOS)
    args = parser.parse_args()
    os.chdir(REPO)
    environment = {k: v for k, v in os.environ.items() if k != "PYTORCH_CUDA_ALLOC_CONF"}
    bare = timed(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True, env=environment), args.rounds)
    with_import = timed(lambda: subprocess.run([sys.executable, "-c", "import oomcast"], check=True,
                                               env=environment), args.rounds)
    print(json.dumps({"bench": "import oomcast", "python_startup": bare, "python_startup_and_import": with_import,
                      "import_only_best_s": round(with_import["best_s"] - bare["best_s"], 4)}))
    import oomcast
    for scenario in args.scenarios:
        python = timed(lambda: oomcast.plan(scenario), args.rounds)
        cli = timed(lambda: subprocess.run([args.oomcast, "plan", scenario, "--json"], env=environment,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), args.rounds)
        print(json.dumps({"bench": "plan", "scenario": scenario, "python": python, "cli": cli,
                          "python_over_cli_best": round(python["best_s"] / cli["best_s"], 3)}))


if __name__ == "__main__":
    main()
