"""The launcher the multi-process CPU captures share (tensor_parallel_capture.py,
pipeline_parallel_capture.py): one command line for the parent and its ranks; the parent builds
the allocation hook once, starts one process of the same script per rank (each told its rank and
a file store for torch.distributed's rendezvous) and exits with the worst rank's status."""
import argparse
import os
import subprocess
import sys
import tempfile

import capture


def main(argv, description, script, run_rank, rank_count, store_prefix):
    """`run_rank(args)` runs one rank; `rank_count(config)` is how many the scenario needs."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("config")
    ap.add_argument("-o", "--output", required=True, help="trace prefix: writes OUTPUT.rank0, OUTPUT.rank1, ...")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    ap.add_argument("--store", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.rank >= 0:
        return run_rank(args)
    count = rank_count(capture.load_config(args.config, args.set))
    capture.hook_library(False)  # built once here, not by every rank at the same time
    store = tempfile.mktemp(prefix=store_prefix)
    extra = [x for item in args.set for x in ("--set", item)]
    ranks = [subprocess.Popen([sys.executable, os.path.abspath(script), args.config, "-o", args.output,
                               "--rank", str(rank), "--store", store] + extra) for rank in range(count)]
    codes = [p.wait() for p in ranks]
    if os.path.exists(store):
        os.unlink(store)
    return max(codes)
