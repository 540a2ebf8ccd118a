#!/usr/bin/env python3
"""`oomcast replay SNAPSHOT` (one pass over the pickle, call-site attribution included) side by
side with a plain-Python replay of the same file (bench/python_snapshot_replay.py: unpickle, a
minimal caching allocator, call sites at the peak), on every real snapshot in tests/data and on
a large synthetic snapshot written by replay_bench_snapshot --write (trace entries with stack
frames, as long recordings hold them). Both run as child processes, one after the other, each
`rounds` times; the user CPU time of each child (the measure issue 30 names; user + sys and
wall time are printed too) is reported as the median of the rounds. Issue 30's target: oomcast
at least 5x faster than the Python replay in user CPU time. Prints one JSON line per snapshot.

usage: replay_vs_python_bench.py OOMCAST REPLAY_BENCH_SNAPSHOT [entries=200000] [rounds=5]
"""
import glob
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))



def run_rounds(command, rounds):
    """Medians over `rounds` runs: (user s, user + sys s, wall s, stdout of the last run)."""
    users, totals, walls, out = [], [], [], ""
    for _ in range(rounds):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if result.returncode not in (0, 1):  # 1: the replay predicts an OOM, still a full replay
            sys.exit("failed (%d): %s\n%s" % (result.returncode, " ".join(command), result.stderr))
        user = after.ru_utime - before.ru_utime
        users.append(user)
        totals.append(user + after.ru_stime - before.ru_stime)
        walls.append(wall)
        out = result.stdout
    return statistics.median(users), statistics.median(totals), statistics.median(walls), out


def ratio(slow, fast):
    return round(slow / fast, 1) if fast > 0 else None


def compare(oomcast, path, label, rounds):
    o_user, o_total, o_wall, text = run_rounds([oomcast, "replay", path], rounds)
    p_user, p_total, p_wall, line = run_rounds(
        [sys.executable, os.path.join(HERE, "python_snapshot_replay.py"), path], rounds)
    python = json.loads(line)
    row = {
        "snapshot": label, "entries": python["entries"], "file_kib": round(os.path.getsize(path) / 1024),
        "oomcast_user_s": round(o_user, 4), "python_user_s": round(p_user, 4), "user_speedup": ratio(p_user, o_user),
        "oomcast_cpu_s": round(o_total, 3), "python_cpu_s": round(p_total, 3), "cpu_speedup": ratio(p_total, o_total),
        "oomcast_wall_s": round(o_wall, 3), "python_wall_s": round(p_wall, 3), "wall_speedup": ratio(p_wall, o_wall),
        "oomcast_attributed_call_sites": "by call site" in text, "rounds": rounds, "target_speedup": 5}
    print(json.dumps(row), flush=True)
    return row


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    oomcast, writer = sys.argv[1], sys.argv[2]
    entries = sys.argv[3] if len(sys.argv) > 3 else "200000"
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    rows = []
    with tempfile.TemporaryDirectory() as work:
        synthetic = os.path.join(work, "synthetic.pickle")
        subprocess.run([writer, "--write", synthetic, entries, "4"], check=True, stdout=subprocess.DEVNULL)
        rows.append(compare(oomcast, synthetic, "synthetic (replay_bench_snapshot --write %s 4)" % entries, rounds))
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "data", "*.pickle.gz"))):
        rows.append(compare(oomcast, path, os.path.relpath(path, ROOT), rounds))
    # All real snapshots together: the per-file times are mostly process start-up.
    real = rows[1:]
    o_user = sum(r["oomcast_user_s"] for r in real)
    p_user = sum(r["python_user_s"] for r in real)
    print(json.dumps({"snapshot": "all real snapshots (sum of medians)", "oomcast_user_s": round(o_user, 3),
                      "python_user_s": round(p_user, 3), "user_speedup": ratio(p_user, o_user), "target_speedup": 5}))


if __name__ == "__main__":
    main()
