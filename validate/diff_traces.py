#!/usr/bin/python3
"""diff_traces.py: lines up a capture and a planned trace inside one phase, event by event.

Both traces are oomcast traces (`alloc ID BYTES`, `free ID`, `mark LABEL`). The events of the
phase opened by mark PHASE are matched with difflib on their (kind, bytes) keys (a free's key is
the size of what it frees), so the planner's tensor names (from `oomcast plan --emit-trace`) can be
read next to the capture's allocation sizes. Every line shows both sides' live bytes after the
event and their difference; the first line where the difference moves is flagged.

    /usr/bin/python3 validate/diff_traces.py CAPTURE PLANNED PHASE [--context N] [--all]
"""
import argparse
import difflib
import sys


def read(path):
    events = []  # (kind, id, bytes, label)
    sizes = {}
    for line in open(path):
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        if parts[0] == "alloc":
            sizes[parts[1]] = int(parts[2])
            events.append(("+", parts[1], int(parts[2])))
        elif parts[0] == "free":
            events.append(("-", parts[1], sizes.pop(parts[1], 0)))
        elif parts[0] == "mark":
            events.append(("mark", " ".join(parts[1:]), 0))
    return events


def phase(events, label):
    live = 0
    start = None
    for i, (kind, ident, size) in enumerate(events):
        if kind == "mark" and start is not None:
            return start_live, events[start:i]
        if kind == "mark" and ident == label:
            start, start_live = i + 1, live
        elif kind == "+":
            live += size
        elif kind == "-":
            live -= size
    if start is None:
        sys.exit(f"no mark {label}")
    return start_live, events[start:]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture")
    ap.add_argument("planned")
    ap.add_argument("phase")
    ap.add_argument("--all", action="store_true", help="print every line, not only the changed runs")
    ap.add_argument("--min-bytes", type=int, default=0, help="hide events smaller than this")
    args = ap.parse_args()
    real_live, real = phase(read(args.capture), args.phase)
    plan_live, plan = phase(read(args.planned), args.phase)
    real = [e for e in real if e[2] >= args.min_bytes]
    plan = [e for e in plan if e[2] >= args.min_bytes]
    key = lambda e: (e[0], e[2])  # noqa: E731
    matcher = difflib.SequenceMatcher(None, [key(e) for e in real], [key(e) for e in plan], autojunk=False)
    print(f"phase {args.phase}: live at mark real {real_live} planned {plan_live}")
    print(f"{'real event':>24} {'real live':>10} | {'planned event':<60} {'plan live':>10} {'diff':>8}")
    rl, pl = real_live, plan_live
    last_diff = pl - rl
    flagged = False

    def step(live, e):
        return live + e[2] if e[0] == "+" else live - e[2]

    real_peak = plan_peak = 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        n = max(i2 - i1, j2 - j1)
        for k in range(n):
            r = real[i1 + k] if i1 + k < i2 else None
            p = plan[j1 + k] if j1 + k < j2 else None
            if r:
                rl = step(rl, r)
            if p:
                pl = step(pl, p)
            real_peak, plan_peak = max(real_peak, rl), max(plan_peak, pl)
            diff = pl - rl
            show = args.all or tag != "equal" or diff != last_diff
            mark = ""
            if diff != last_diff and tag != "equal" and not flagged:
                mark, flagged = "  <== first parting", True
            if show:
                rs = f"{r[0]}{r[2]} ({r[1]})" if r else ""
                ps = f"{p[0]}{p[2]} {p[1]}" if p else ""
                print(f"{rs:>24} {rl:>10} | {ps[:60]:<60} {pl:>10} {diff:>+8}{mark}")
            last_diff = diff
    print(f"phase peak: real {real_peak} planned {plan_peak} ({plan_peak - real_peak:+d})")


if __name__ == "__main__":
    main()
