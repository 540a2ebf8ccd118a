#!/usr/bin/env python3
"""python_bench.py: what the Python package costs next to the CLI, measured in one run.

    PYTHONPATH=build/python .venv/bin/python bench/python_bench.py --oomcast build/oomcast [--rounds 7] [SCENARIO...]

1. `import oomcast` in a fresh interpreter: `python -c "import oomcast"` minus `python -c pass`
   (wall time and the child's CPU time, medians of N), and the package's cumulative line of
   `-X importtime` (median of N). The interpreters it starts have their bytecode cached (in a
   private folder, filled by an uncounted first import), as a pip-installed package has.
2. For each scenario, medians of N, the runs interleaved so that load hits them alike:
   - cli: `oomcast plan SCENARIO --json`, one process per call as a user or a launch script
     runs it (output to /dev/null). Counts starting the process (exec, shared libraries), the
     scenario's loading, the plan, the JSON rendering and writing.
   - first: the first `oomcast.plan(SCENARIO)` of a fresh interpreter that has imported
     oomcast, timed inside it. Counts loading, plan, JSON rendering and its parsing into the
     typed Prediction; not the interpreter's start nor the import (part 1).
   - warm: `oomcast.plan(SCENARIO)` again in this process (after one uncounted call).
   The ratios first/cli and warm/cli are Python's time over the CLI's.
Times are wall seconds with the CPU seconds (user + system, of the child for a process) beside
them: on a shared machine the CPU time is the steadier of the two. With --callgrind it counts
instructions instead (valgrind, one run each, load-independent): the CLI's process, the CLI's
work (that process minus `oomcast --version`'s) and Python's first plan (a fresh
`python -c "import oomcast; oomcast.plan(SCENARIO)"` minus `python -c "import oomcast"`).
"""
import argparse
import atexit
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIOS = ["scenarios/gpt2-tiny-cpu.yaml", "scenarios/gpt2-small-b8-amp-bf16.yaml",
             "scenarios/llama-2-7b-fp32-adamw-oom.yaml", "scenarios/llama-2-7b-lora-ddp-2xa100-40gb.yaml",
             "scenarios/llama-2-7b-zero3-8xa100.yaml"]
FIRST_PLAN = ("import os, sys, time, oomcast\n"
              "wall, cpu = time.perf_counter(), time.process_time()\n"
              "oomcast.plan(sys.argv[1])\n"
              "print(time.perf_counter() - wall, time.process_time() - cpu)\n")


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process(command, environment):
    """A run of `command` as a process: (wall, the child's CPU seconds)."""
    def run():
        cpu, wall = children_cpu(), time.perf_counter()
        subprocess.run(command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - wall, children_cpu() - cpu
    return run


def in_process(call):
    def run():
        cpu, wall = time.process_time(), time.perf_counter()
        call()
        return time.perf_counter() - wall, time.process_time() - cpu
    return run


def reported_by_child(command, environment):
    """A run whose child prints its own (wall, CPU) seconds."""
    def run():
        done = subprocess.run(command, env=environment, capture_output=True, text=True, check=True)
        wall, cpu = done.stdout.split()
        return float(wall), float(cpu)
    return run


def interleaved(runs, rounds):
    """{name: (median wall, median CPU)} of each run, the runs taking turns."""
    times = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            times[name].append(run())
    return {name: (statistics.median(w for w, _ in values), statistics.median(c for _, c in values))
            for name, values in times.items()}


def import_time_self_reported(environment):
    """The cumulative seconds -X importtime gives the top-level `oomcast` import."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", "import oomcast"], env=environment,
                          capture_output=True, text=True, check=True)
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s*\d+\s*\|\s*(\d+)\s*\|\s*oomcast$", line)
        if match:
            return int(match.group(1)) * 1e-6
    raise SystemExit("no `oomcast` line in -X importtime's output")


def instructions(command, environment):
    """The instructions callgrind counts for one run of `command` (its output discarded)."""
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command],
                          env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    match = re.search(r"Collected : (\d+)", done.stderr)
    if not match:
        raise SystemExit(f"callgrind counted nothing for {command}: {done.stderr.strip()[-300:]}")
    return int(match.group(1))


def callgrind_rows(cli, scenarios, environment):
    startup = instructions([cli, "--version"], environment)
    imported = instructions([sys.executable, "-c", "import oomcast"], environment)
    bare = instructions([sys.executable, "-c", "pass"], environment)
    rows = [{"bench": "import oomcast (callgrind)", "import_instructions": imported - bare,
             "python_startup_instructions": bare}]
    for scenario in scenarios:
        process = instructions([cli, "plan", scenario, "--json"], environment)
        first = instructions([sys.executable, "-c", f"import oomcast; oomcast.plan({scenario!r})"], environment) - imported
        rows.append({"bench": "plan (callgrind)", "scenario": scenario, "cli_process": process,
                     "cli_work": process - startup, "python_first": first,
                     "python_over_cli_process": first / process, "python_over_cli_work": first / (process - startup)})
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--oomcast", required=True, help="the CLI binary")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="one JSON line per row instead of the table")
    parser.add_argument("--callgrind", action="store_true", help="count instructions (valgrind) instead of timing")
    parser.add_argument("scenarios", nargs="*", default=SCENARIOS)
    args = parser.parse_args()
    os.chdir(REPO)
    cli = os.path.abspath(args.oomcast)
    # The interpreters it starts read and write bytecode in a private folder (filled by a first,
    # uncounted import), as an installed package is: pip byte-compiles what it installs.
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("PYTORCH_CUDA_ALLOC_CONF", "OOMCAST_PROGRESS", "PYTHONDONTWRITEBYTECODE")}
    environment["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="oomcast-bench-pycache-")
    atexit.register(shutil.rmtree, environment["PYTHONPYCACHEPREFIX"], True)
    subprocess.run([sys.executable, "-c", "import oomcast"], env=environment, check=True)
    os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if args.callgrind:
        rows = callgrind_rows(cli, args.scenarios, environment)
        if args.json:
            for row in rows:
                print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}))
            return
        print(f"import oomcast: {rows[0]['import_instructions'] / 1e6:.1f} M instructions over `python -c pass` "
              f"({rows[0]['python_startup_instructions'] / 1e6:.1f} M)")
        print(f"{'plan, M instructions':<47} {'cli process':>11} {'cli work':>9} {'py first':>9} "
              f"{'py/process':>10} {'py/work':>8}")
        for r in rows[1:]:
            print(f"{r['scenario']:<47} {r['cli_process'] / 1e6:>11.1f} {r['cli_work'] / 1e6:>9.1f} "
                  f"{r['python_first'] / 1e6:>9.1f} {r['python_over_cli_process']:>10.2f} {r['python_over_cli_work']:>8.2f}")
        return

    startup = interleaved({"bare": process([sys.executable, "-c", "pass"], environment),
                           "import": process([sys.executable, "-c", "import oomcast"], environment)}, args.rounds)
    imported = {"bench": "import oomcast", "rounds": args.rounds,
                "import_wall_s": startup["import"][0] - startup["bare"][0],
                "import_cpu_s": startup["import"][1] - startup["bare"][1],
                "import_s_by_importtime": statistics.median(import_time_self_reported(environment)
                                                            for _ in range(args.rounds)),
                "python_startup_wall_s": startup["bare"][0]}
    rows = []
    import oomcast
    for scenario in args.scenarios:
        oomcast.plan(scenario)  # not counted
        medians = interleaved({
            "cli": process([cli, "plan", scenario, "--json"], environment),
            "first": reported_by_child([sys.executable, "-c", FIRST_PLAN, scenario], environment),
            "warm": in_process(lambda: oomcast.plan(scenario)),
        }, args.rounds)
        row = {"bench": "plan", "scenario": scenario}
        for name, (wall, cpu) in medians.items():
            row[f"{name}_wall_s"], row[f"{name}_cpu_s"] = wall, cpu
        for name in ("first", "warm"):
            row[f"{name}_over_cli_wall"] = medians[name][0] / medians["cli"][0]
            row[f"{name}_over_cli_cpu"] = medians[name][1] / medians["cli"][1]
        rows.append(row)

    if args.json:
        for row in [imported] + rows:
            print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}))
        return
    print(f"import oomcast, medians of {args.rounds}: {imported['import_wall_s']:.3f} s wall, "
          f"{imported['import_cpu_s']:.3f} s CPU over `python -c pass` ({imported['python_startup_wall_s']:.3f} s); "
          f"{imported['import_s_by_importtime']:.3f} s by -X importtime")
    print(f"plan, medians of {args.rounds}, seconds wall/CPU; ratios Python over CLI, wall/CPU")
    print(f"{'scenario':<47} {'cli':>13} {'first':>13} {'warm':>13} {'first/cli':>11} {'warm/cli':>11}")
    for r in rows:
        cells = [f"{r[n + '_wall_s']:.3f}/{r[n + '_cpu_s']:.3f}" for n in ("cli", "first", "warm")]
        ratios = [f"{r[n + '_over_cli_wall']:.2f}/{r[n + '_over_cli_cpu']:.2f}" for n in ("first", "warm")]
        print(f"{r['scenario']:<47} " + " ".join(f"{c:>13}" for c in cells) + " " + " ".join(f"{c:>11}" for c in ratios))


if __name__ == "__main__":
    main()
