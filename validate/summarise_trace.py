#!/usr/bin/python3
# summarise_trace.py: prints, for a trace in oomcast's text format, the live bytes at every
# mark and the peak of every phase (a phase runs from one mark to the next), with no allocator
# rounding: the sums of requested bytes. The C++ comparison computes the same numbers.
#
#   /usr/bin/python3 validate/summarise_trace.py TRACE [--json]
import argparse
import json
import sys


def summarise(lines):
    """Returns (phases, totals). Each phase: label, live bytes at its mark, its peak, the live
    bytes at its end, allocations and frees in it. A 'start' phase holds events before the first
    mark."""
    live, cur, peak = {}, 0, 0
    phases = [dict(label="start", live_at_mark=0, peak=0, allocs=0, frees=0, alloc_bytes=0)]
    for n, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        f = line.split()
        ph = phases[-1]
        if f[0] == "alloc":
            if f[1] in live:
                raise ValueError(f"line {n}: {f[1]} allocated twice")
            live[f[1]] = int(f[2])
            cur += int(f[2])
            ph["allocs"] += 1
            ph["alloc_bytes"] += int(f[2])
            ph["peak"] = max(ph["peak"], cur)
        elif f[0] == "free":
            if f[1] not in live:
                raise ValueError(f"line {n}: free of unknown id {f[1]}")
            cur -= live.pop(f[1])
            ph["frees"] += 1
        elif f[0] == "mark":
            ph["live_at_end"] = cur
            phases.append(dict(label=" ".join(f[1:]), live_at_mark=cur, peak=cur, allocs=0, frees=0,
                               alloc_bytes=0))
        elif f[0] != "empty_cache":
            raise ValueError(f"line {n}: unknown action {f[0]!r}")
        peak = max(peak, cur)
    phases[-1]["live_at_end"] = cur
    if phases[0]["allocs"] == 0 and phases[0]["frees"] == 0 and len(phases) > 1:
        phases.pop(0)
    return phases, dict(peak=peak, live_at_end=cur, live_tensors_at_end=len(live))


def main(argv=None):
    ap = argparse.ArgumentParser(description="live bytes at every mark and per-phase peaks")
    ap.add_argument("trace")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args(argv)
    with open(args.trace) as f:
        phases, totals = summarise(f)
    if args.json:
        json.dump(dict(phases=phases, **totals), sys.stdout, indent=1)
        print()
        return 0
    print(f"{'mark':28s} {'live at mark':>14s} {'phase peak':>14s} {'live at end':>14s} "
          f"{'allocs':>7s} {'frees':>7s}")
    for p in phases:
        print(f"{p['label']:28s} {p['live_at_mark']:14d} {p['peak']:14d} {p['live_at_end']:14d} "
              f"{p['allocs']:7d} {p['frees']:7d}")
    print(f"overall peak {totals['peak']} B; live at end {totals['live_at_end']} B "
          f"({totals['live_tensors_at_end']} tensors)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
