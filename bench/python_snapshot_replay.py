#!/usr/bin/env python3
"""The plain-Python baseline that `oomcast replay` is compared with (bench/replay_vs_python_bench.py):
unpickles a torch.cuda.memory._dump_snapshot() file, replays its trace through a minimal
caching allocator written here in plain Python, and attributes the live bytes at the
allocated peak to call sites (its first Python frame outside torch), as `oomcast replay` does.

It is a speed baseline, not a second simulator: one stream, no expandable segments, no
max_split_size, no garbage collection, no OOM; blocks allocated before the recording window are
unknown to it (their frees are ignored). The rules it does follow are PyTorch's
(c10/cuda/CUDACachingAllocator.cpp, torch 2.x): 512-byte rounding, the 1 MiB small-pool limit,
2 MiB small segments, 20 MiB segments below 10 MiB, 2 MiB rounding above, best fit by
(size, address), splitting when the rest is >= 512 B (small) or > 1 MiB (large), merging free
neighbours on free.

usage: python_snapshot_replay.py SNAPSHOT.pickle[.gz]   (prints one JSON line)
"""
import bisect
import gzip
import json
import pickle
import sys

MIN_BLOCK = 512
SMALL_SIZE = 1 << 20
SMALL_BUFFER = 2 << 20
LARGE_BUFFER = 20 << 20
MIN_LARGE_ALLOC = 10 << 20
ROUND_LARGE = 2 << 20


class Block:
    __slots__ = ("addr", "size", "small", "free", "prev", "next", "site")

    def __init__(self, addr, size, small):
        self.addr, self.size, self.small = addr, size, small
        self.free, self.prev, self.next, self.site = True, None, None, None


class Allocator:
    def __init__(self):
        self.pools = {True: [], False: []}   # sorted (size, addr) keys of free blocks
        self.free_blocks = {}                # (size, addr) -> Block
        self.next_address = 1 << 40          # simulated cudaMalloc addresses
        self.allocated = self.reserved = 0
        self.peak_allocated = self.peak_reserved = 0
        self.segments = 0

    def _insert_free(self, block):
        key = (block.size, block.addr)
        bisect.insort(self.pools[block.small], key)
        self.free_blocks[key] = block

    def _remove_free(self, block):
        key = (block.size, block.addr)
        pool = self.pools[block.small]
        del pool[bisect.bisect_left(pool, key)]
        del self.free_blocks[key]

    def malloc(self, size):
        size = MIN_BLOCK if size < MIN_BLOCK else (size + MIN_BLOCK - 1) // MIN_BLOCK * MIN_BLOCK
        small = size <= SMALL_SIZE
        pool = self.pools[small]
        i = bisect.bisect_left(pool, (size, 0))
        if i < len(pool):
            block = self.free_blocks[pool[i]]
            self._remove_free(block)
        else:
            if small:
                segment = SMALL_BUFFER
            elif size < MIN_LARGE_ALLOC:
                segment = LARGE_BUFFER
            else:
                segment = (size + ROUND_LARGE - 1) // ROUND_LARGE * ROUND_LARGE
            block = Block(self.next_address, segment, small)
            self.next_address += segment
            self.reserved += segment
            self.segments += 1
            self.peak_reserved = max(self.peak_reserved, self.reserved)
        rest = block.size - size
        if rest >= MIN_BLOCK if small else rest > SMALL_SIZE:
            remaining = Block(block.addr + size, rest, small)
            remaining.prev, remaining.next = block, block.next
            if block.next is not None:
                block.next.prev = remaining
            block.next = remaining
            block.size = size
            self._insert_free(remaining)
        block.free = False
        self.allocated += block.size
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return block

    def release(self, block):
        block.free = True
        self.allocated -= block.size
        for neighbour in (block.prev, block.next):
            if neighbour is not None and neighbour.free:
                self._remove_free(neighbour)
                if neighbour is block.prev:
                    neighbour.size += block.size
                    neighbour.next = block.next
                    if block.next is not None:
                        block.next.prev = neighbour
                    block = neighbour
                else:
                    block.size += neighbour.size
                    block.next = neighbour.next
                    if neighbour.next is not None:
                        neighbour.next.prev = block
        self._insert_free(block)


def site_of(entry):
    """The first Python frame outside torch (else the first Python frame), as file:line name."""
    first_python = None
    for frame in entry.get("frames") or ():
        filename = frame.get("filename", "")
        if not filename.endswith(".py"):
            continue
        if "torch/" not in filename:
            return "%s:%s %s" % (filename, frame.get("line"), frame.get("name"))
        if first_python is None:
            first_python = frame
    if first_python is None:
        return "(no Python frame)"
    return "%s:%s %s" % (first_python.get("filename"), first_python.get("line"), first_python.get("name"))


def main():
    path = sys.argv[1]
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        snapshot = pickle.load(f)
    traces = snapshot.get("device_traces") or [[]]
    trace = max(traces, key=len)
    free_action = "free_completed" if any(e.get("action") == "free_completed" for e in trace) else "free_requested"
    allocator = Allocator()
    live = {}            # recorded address -> Block
    site_bytes = {}      # call site -> live bytes, kept as it goes
    peak_sites = {}      # a copy of site_bytes at the allocated peak
    for entry in trace:
        action = entry.get("action")
        if action == "alloc":
            block = allocator.malloc(entry["size"])
            block.site = site_of(entry)
            site_bytes[block.site] = site_bytes.get(block.site, 0) + block.size
            live[entry["addr"]] = block
            if allocator.allocated == allocator.peak_allocated:
                peak_sites = dict(site_bytes)
        elif action == free_action:
            block = live.pop(entry["addr"], None)
            if block is not None:
                site_bytes[block.site] -= block.size
                allocator.release(block)
    by_site = peak_sites
    top = sorted(by_site.items(), key=lambda item: -item[1])[:10]
    print(json.dumps({"entries": len(trace), "peak_allocated": allocator.peak_allocated,
                      "peak_reserved": allocator.peak_reserved, "segments": allocator.segments,
                      "top_sites": [[site, size] for site, size in top]}))


if __name__ == "__main__":
    main()
