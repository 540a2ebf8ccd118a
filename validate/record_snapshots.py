#!/usr/bin/env python3
"""Records small real torch.cuda.memory snapshots of what the default settings never show.

No public repository we could find holds a snapshot recorded with expandable segments, side
streams with record_stream, CUDA graph pools or torch.cuda.MemPool (tests/data/README.md), so
the simulator's replay of those is tested on hand-built recordings only. On a GPU this script
records one small snapshot of each, in its own process (the allocator reads
PYTORCH_CUDA_ALLOC_CONF once, at CUDA initialisation), gzips it and replays it with
`oomcast replay --json`, so a GPU session both gets the fixtures for tests/data/ and learns at
once whether the simulator reproduces them.

    python3 validate/record_snapshots.py --out DIR [--oomcast build/oomcast] [--only NAME ...]
    python3 validate/record_snapshots.py --list
    python3 validate/record_snapshots.py --replay-only DIR --oomcast build/oomcast
    python3 validate/record_snapshots.py --out DIR --dry-run

--replay-only replays every *.pickle / *.pickle.gz already in DIR (no GPU needed). --dry-run
checks the plumbing without a GPU: the recording list, torch's import, the output folder.
Each recording writes NAME.pickle.gz and NAME.json (torch version, GPU, settings, and what the
file really holds: actions, streams, pools, devices); summary.csv and one line per recording
starting "oomcast replay" go to DIR and to stdout. Exit 0 when every recording that ran was
reproduced, 1 when one was not, 77 when nothing could be recorded here (no torch or no GPU).
"""
import argparse
import csv
import gzip
import json
import os
import shutil
import subprocess
import sys
import time

# name: (PYTORCH_CUDA_ALLOC_CONF, oldest torch it needs, GPUs it needs, what it shows)
RECORDINGS = {
    "expandable_training": ("expandable_segments:True", (2, 1), 1,
                            "expandable segments from the first event: segment_map as a small MLP with "
                            "Adam trains at two batch sizes, segment_unmap at empty_cache"),
    "expandable_midrun": ("expandable_segments:True", (2, 1), 1,
                          "recording starts after the first step: the replay must rebuild the mapped "
                          "runs of each expandable segment from the dump-time state"),
    "expandable_ring": ("expandable_segments:True", (2, 1), 1,
                        "a ring buffer of 300 entries drops the beginning of the same run"),
    "side_stream": ("", (2, 1), 1,
                    "a side stream allocating its own blocks and record_stream on a tensor it reads, "
                    "so free_requested and free_completed are apart"),
    "expandable_side_stream": ("expandable_segments:True", (2, 1), 1,
                               "the side-stream run with expandable segments: one reservation per stream"),
    "cuda_graphs": ("", (2, 1), 1,
                    "two CUDA graphs sharing one private pool and a third with its own, replayed, "
                    "then one deleted"),
    "mem_pool": ("", (2, 6), 1,
                 "torch.cuda.MemPool with use_mem_pool, its blocks freed and reused, the pool deleted"),
    "two_devices": ("", (2, 1), 2, "allocations on cuda:0 and cuda:1 in one file"),
}


def torch_version(torch):
    parts = torch.__version__.split("+")[0].split(".")
    return int(parts[0]), int(parts[1])


# ---- the workloads (run in a child process) ----------------------------------------------------

def mlp(torch, width):
    return torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                               torch.nn.Linear(4 * width, width), torch.nn.LayerNorm(width)).cuda()


def train_steps(torch, model, optimizer, batch, steps):
    for _ in range(steps):
        x = torch.randn(batch, model[0].in_features, device="cuda")
        loss = model(x).float().pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize()


def start_recording(torch, max_entries=100000):
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                             max_entries=max_entries)


def run_expandable(torch, name):
    if name != "expandable_midrun":
        start_recording(torch, 300 if name == "expandable_ring" else 100000)
    model = mlp(torch, 1024)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    train_steps(torch, model, optimizer, 64, 1)
    if name == "expandable_midrun":
        start_recording(torch)
    train_steps(torch, model, optimizer, 64, 2)
    train_steps(torch, model, optimizer, 512, 2)  # the segment grows: more pages mapped
    torch.cuda.empty_cache()                       # unmaps the free pages
    small = [torch.ones(1000 + i, device="cuda") for i in range(50)]  # the small pool's segment
    del small[::2]
    train_steps(torch, model, optimizer, 128, 1)


def run_side_stream(torch, name):
    start_recording(torch)
    side = torch.cuda.Stream()
    weights = torch.randn(4096, 4096, device="cuda")
    for _ in range(3):
        data = torch.randn(4096, 4096, device="cuda")
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            result = data
            for _ in range(20):                      # long enough that the side stream is busy
                result = result @ weights            # allocated on the side stream
            partial = result.sum(dim=0)
        data.record_stream(side)
        del data, result                             # data's free waits for the side stream
        later = torch.randn(4096, 4096, device="cuda")  # polls the event: maybe still busy
        torch.cuda.current_stream().wait_stream(side)
        partial.record_stream(torch.cuda.current_stream())
        total = (later.sum() + partial.sum()).item()
        del later, partial, total
    torch.cuda.synchronize()
    torch.empty(1, device="cuda")  # a last malloc completes the remaining events


def run_cuda_graphs(torch, name):
    start_recording(torch)
    model = mlp(torch, 512).eval()
    static_in = torch.randn(64, 512, device="cuda")
    warm = torch.cuda.Stream()
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm), torch.no_grad():
        for _ in range(3):
            model(static_in)
    torch.cuda.current_stream().wait_stream(warm)
    graphs = []
    with torch.no_grad():
        first = torch.cuda.CUDAGraph()
        with torch.cuda.graph(first):
            out_first = model(static_in)
        graphs.append((first, out_first))
        shared = torch.cuda.CUDAGraph()
        with torch.cuda.graph(shared, pool=first.pool()):
            out_shared = model(out_first)
        graphs.append((shared, out_shared))
        own = torch.cuda.CUDAGraph()
        with torch.cuda.graph(own):
            out_own = model(static_in * 2)
        graphs.append((own, out_own))
    for _ in range(3):
        static_in.copy_(torch.randn(64, 512, device="cuda"))
        for graph, _ in graphs:
            graph.replay()
    torch.cuda.synchronize()
    del graphs[2], own, out_own  # the third graph's pool has no user left
    torch.cuda.empty_cache()
    torch.randn(64, 512, device="cuda")


def run_mem_pool(torch, name):
    start_recording(torch)
    use_mem_pool = getattr(torch.cuda, "use_mem_pool", None) or torch.cuda.memory.use_mem_pool
    pool = torch.cuda.MemPool()
    with use_mem_pool(pool):
        kept = [torch.randn(1024, 1024, device="cuda") for _ in range(4)]
        small = torch.ones(100, device="cuda")
    outside = torch.randn(1024, 1024, device="cuda")
    del kept[1:3]
    with use_mem_pool(pool):
        reused = torch.randn(1024, 1024, device="cuda")  # from the pool's freed blocks
    del kept, small, reused
    del pool
    torch.cuda.empty_cache()
    del outside
    torch.randn(2048, 2048, device="cuda")


def run_two_devices(torch, name):
    start_recording(torch)
    for device in ("cuda:0", "cuda:1"):
        with torch.cuda.device(device):
            tensors = [torch.randn(1 << 20, device=device) for _ in range(3)]
            del tensors[0]
            torch.randn(4 << 20, device=device)


WORKLOADS = {"expandable_training": run_expandable, "expandable_midrun": run_expandable,
             "expandable_ring": run_expandable, "side_stream": run_side_stream,
             "expandable_side_stream": run_side_stream, "cuda_graphs": run_cuda_graphs,
             "mem_pool": run_mem_pool, "two_devices": run_two_devices}


def describe(snapshot):
    """What the file really holds, so a fixture is checked for what it was recorded to show."""
    actions = {}
    streams = set()
    for trace in snapshot.get("device_traces", []):
        for entry in trace:
            actions[entry["action"]] = actions.get(entry["action"], 0) + 1
            streams.add(entry.get("stream", 0))
    segments = snapshot.get("segments", [])
    streams.update(segment.get("stream", 0) for segment in segments)
    return {"actions": actions, "streams": len(streams),
            "pools": sorted({str(tuple(segment.get("segment_pool_id", (0, 0)))) for segment in segments}),
            "devices": sorted({segment["device"] for segment in segments}),
            "expandable_segments": sum(1 for segment in segments if segment.get("is_expandable")),
            "allocator_settings": snapshot.get("allocator_settings", {})}


def child(name, out_dir):
    import pickle
    import torch
    run = WORKLOADS[name]
    run(torch, name)
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    path = os.path.join(out_dir, name + ".pickle.gz")
    with gzip.open(path, "wb") as handle:
        pickle.dump(snapshot, handle)
    facts = {"name": name, "torch": torch.__version__, "cuda": torch.version.cuda,
             "gpu": torch.cuda.get_device_name(0),
             "PYTORCH_CUDA_ALLOC_CONF": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
             "shows": RECORDINGS[name][3], "file": describe(snapshot)}
    with open(os.path.join(out_dir, name + ".json"), "w") as handle:
        json.dump(facts, handle, indent=1, sort_keys=True)
    return 0


# ---- the parent: record each in its own process, then replay -----------------------------------

def replay(oomcast, path, torch_release):
    """Runs oomcast replay --json; returns (verdict, detail)."""
    command = [oomcast, "replay", "--json", path]
    if torch_release:
        command += ["--torch-version", torch_release]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        return "ERROR", f"{type(error).__name__}: {error}"
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}").splitlines()
        return "REFUSED", said[-1][:300]
    result = json.loads(done.stdout)
    recorded = result.get("recorded") or {}
    decisions = recorded.get("segment_decisions", 0)
    matched = recorded.get("segment_decisions_matched", 0)
    peak_equal = recorded.get("peak_reserved_bytes") == result.get("peak_reserved_bytes")
    detail = (f"segment decisions {matched}/{decisions}, block addresses "
              f"{recorded.get('block_addresses_matched', 0)}/{recorded.get('block_addresses_checked', 0)}, "
              f"peak reserved recorded {recorded.get('peak_reserved_bytes')} simulated "
              f"{result.get('peak_reserved_bytes')}")
    if recorded.get("first_mismatch"):
        detail += f", first mismatch: {recorded['first_mismatch']}"
    verdict = "REPRODUCED" if matched == decisions and peak_equal and not recorded.get("first_mismatch") \
        else "DIFFERS"
    return verdict, detail


def release_of(facts_path):
    try:
        with open(facts_path) as handle:
            version = json.load(handle)["torch"].split("+")[0].split(".")
        return f"{version[0]}.{version[1]}"
    except (OSError, KeyError, ValueError, IndexError):
        return ""


def write_summary(out_dir, rows):
    with open(os.path.join(out_dir, "summary.csv"), "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["recording", "status", "detail"])
        writer.writerows(rows)


def replay_folder(folder, oomcast, rows):
    names = sorted(f for f in os.listdir(folder) if f.endswith((".pickle", ".pickle.gz")))
    for file_name in names:
        name = file_name.split(".pickle")[0]
        verdict, detail = replay(oomcast, os.path.join(folder, file_name),
                                 release_of(os.path.join(folder, name + ".json")))
        rows.append([name, verdict, detail])
        print(f"oomcast replay {name}: {verdict} ({detail})", flush=True)
    return names


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="folder for the recordings and summary.csv")
    parser.add_argument("--oomcast", default="build/oomcast", help="oomcast binary for the replays")
    parser.add_argument("--only", nargs="+", choices=sorted(RECORDINGS), help="record only these")
    parser.add_argument("--list", action="store_true", help="list the recordings and exit")
    parser.add_argument("--replay-only", metavar="DIR", help="replay the snapshots already in DIR")
    parser.add_argument("--dry-run", action="store_true", help="check the plumbing without a GPU")
    parser.add_argument("--timeout", type=int, default=90, help="seconds per recording (default 90)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.list:
        for name, (conf, oldest, gpus, shows) in RECORDINGS.items():
            print(f"{name}: torch >= {oldest[0]}.{oldest[1]}, {gpus} GPU(s), "
                  f"PYTORCH_CUDA_ALLOC_CONF='{conf}': {shows}")
        return 0
    if args.child:
        return child(args.child, args.out)
    if args.replay_only:
        if not os.path.isdir(args.replay_only):
            print(f"record_snapshots: --replay-only {args.replay_only}: not a folder", file=sys.stderr)
            return 2
        if not os.access(args.oomcast, os.X_OK):
            print(f"record_snapshots: --oomcast {args.oomcast}: no such executable (build it first)", file=sys.stderr)
            return 2
        rows = []
        if not replay_folder(args.replay_only, args.oomcast, rows):
            print(f"record_snapshots: no snapshot in {args.replay_only}", file=sys.stderr)
            return 2
        return 0 if all(row[1] == "REPRODUCED" for row in rows) else 1
    if not args.out:
        parser.error("--out DIR is needed to record")
    os.makedirs(args.out, exist_ok=True)
    try:
        import torch
    except ImportError:
        print(f"record_snapshots: {sys.executable} has no torch: nothing recorded (skipped)")
        return 77
    version = torch_version(torch)
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    rows = []
    for name in args.only or list(RECORDINGS):
        conf, oldest, needs_gpus, _ = RECORDINGS[name]
        if version < oldest:
            rows.append([name, "SKIPPED", f"needs torch >= {oldest[0]}.{oldest[1]}, have {torch.__version__}"])
        elif gpus < needs_gpus and not args.dry_run:
            rows.append([name, "SKIPPED", f"needs {needs_gpus} GPU(s), have {gpus}"])
        elif args.dry_run:
            rows.append([name, "DRY-RUN", f"would record with PYTORCH_CUDA_ALLOC_CONF='{conf}'"])
        else:
            environment = dict(os.environ)
            environment.pop("PYTORCH_ALLOC_CONF", None)
            environment["PYTORCH_CUDA_ALLOC_CONF"] = conf
            began = time.time()
            try:
                done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name,
                                       "--out", args.out], env=environment, capture_output=True,
                                      text=True, timeout=args.timeout)
                failed = done.returncode != 0 and (done.stderr.strip().splitlines() or ["exit"])[-1]
            except subprocess.TimeoutExpired:
                failed = f"timed out after {args.timeout}s"
            if failed:
                rows.append([name, "FAILED", str(failed)[:300]])
            else:
                verdict, detail = replay(args.oomcast, os.path.join(args.out, name + ".pickle.gz"),
                                         f"{version[0]}.{version[1]}")
                rows.append([name, verdict, f"{detail}; recorded in {time.time() - began:.0f}s"])
        print(f"oomcast replay {name}: {rows[-1][1]} ({rows[-1][2]})", flush=True)
        write_summary(args.out, rows)  # after each, so a run cut short keeps what it did
    if args.dry_run:
        return 0
    ran = [row for row in rows if row[1] not in ("SKIPPED",)]
    if not ran:
        return 77
    return 0 if all(row[1] == "REPRODUCED" for row in ran) else 1


if __name__ == "__main__":
    sys.exit(main())
