#!/usr/bin/env python3
"""`oomcast replay SNAPSHOT` (one pass over the pickle, call-site attribution included) side by
side with a plain-Python replay of the same file (bench/python_snapshot_replay.py: unpickle, a
minimal caching allocator, call sites at the peak), on a large synthetic snapshot written by
replay_bench_snapshot --write (about a million trace entries with stack frames) and on the
largest real snapshot in tests/data. Both run as child processes; the CPU time (user + sys) of
each child and the wall time are reported, best of `rounds`. Issue 30's target: oomcast at least
5x faster than the Python replay on CPU time. Prints one JSON line per snapshot.

usage: replay_vs_python_bench.py OOMCAST REPLAY_BENCH_SNAPSHOT [entries=1000000] [rounds=3]
"""
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REAL_SNAPSHOT = os.path.join(HERE, "..", "tests", "data", "cs336_kk_2p7b_fp32_step_ctx128.pickle.gz")


def timed(command):
    """(cpu seconds of the child, wall seconds, stdout) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode not in (0, 1):  # 1: the replay predicts an OOM, still a full replay
        sys.exit("failed (%d): %s\n%s" % (result.returncode, " ".join(command), result.stderr))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, result.stdout


def best_of(command, rounds):
    runs = [timed(command) for _ in range(rounds)]
    return min(r[0] for r in runs), min(r[1] for r in runs), runs[-1][2]


def compare(oomcast, path, label, rounds):
    oomcast_cpu, oomcast_wall, text = best_of([oomcast, "replay", path], rounds)
    python_cpu, python_wall, line = best_of([sys.executable, os.path.join(HERE, "python_snapshot_replay.py"), path], rounds)
    python = json.loads(line)
    print(json.dumps({
        "snapshot": label, "entries": python["entries"], "file_mib": round(os.path.getsize(path) / 2**20, 1),
        "oomcast_cpu_s": round(oomcast_cpu, 3), "python_cpu_s": round(python_cpu, 3),
        "cpu_speedup": round(python_cpu / oomcast_cpu, 1) if oomcast_cpu > 0 else None,
        "oomcast_wall_s": round(oomcast_wall, 3), "python_wall_s": round(python_wall, 3),
        "wall_speedup": round(python_wall / oomcast_wall, 1) if oomcast_wall > 0 else None,
        "oomcast_attributed_call_sites": "by call site" in text, "target_speedup": 5}))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    oomcast, writer = sys.argv[1], sys.argv[2]
    entries = sys.argv[3] if len(sys.argv) > 3 else "1000000"
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    with tempfile.TemporaryDirectory() as work:
        synthetic = os.path.join(work, "synthetic.pickle")
        subprocess.run([writer, "--write", synthetic, entries, "4"], check=True, stdout=subprocess.DEVNULL)
        compare(oomcast, synthetic, "synthetic (replay_bench_snapshot --write, 4 frames per entry)", rounds)
    compare(oomcast, REAL_SNAPSHOT, os.path.relpath(REAL_SNAPSHOT, os.path.join(HERE, "..")), rounds)


if __name__ == "__main__":
    main()
