#!/usr/bin/env python3
"""The `peers_table` ctest: runs bench/peers.py on the given scenarios with this python and checks
the table it prints: one row per scenario, every row as wide as the header, oomcast's columns
numbers, and each installed peer a number in at least one row, its other cells saying why not
("cannot express: ..." or "not run: ..."), never an error. Checks no timing.

    .venv/bin/python bench/check_peers_table.py build/oomcast SCENARIO...

Exit 0 when well-formed, 1 when not, 77 (ctest's skip) when this python lacks torch or
transformers (the project's venv, scripts/make-venv.sh, has both).
"""
import importlib.util
import os
import re
import subprocess
import sys

NUMBER = re.compile(r"^\d{1,3}(,\d{3})*(\.\d+)?$|^\d+\.\d+$")
PEER_COLUMNS = range(1, 5)
OOMCAST_COLUMNS = (5, 6)


def cells(line):
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def problems_of(table, scenario_count):
    lines = [line for line in table.splitlines() if line.startswith("|")]
    if len(lines) < 2:
        return ["no Markdown table in the output"]
    header, rows = cells(lines[0]), [cells(line) for line in lines[2:]]
    found = []
    if header[0] != "scenario":
        found.append(f"first column is {header[0]!r}, not 'scenario'")
    if len(cells(lines[1])) != len(header):
        found.append("the separator line is not as wide as the header")
    if len(rows) != scenario_count:
        found.append(f"{len(rows)} rows for {scenario_count} scenarios")
    for row in rows:
        if len(row) != len(header):
            found.append(f"{row[0]}: {len(row)} cells, header has {len(header)}")
            continue
        for column in OOMCAST_COLUMNS:
            if not NUMBER.match(row[column]):
                found.append(f"{row[0]}: {header[column]} is {row[column]!r}, not a number")
    for column in PEER_COLUMNS:
        column_cells = [row[column] for row in rows if len(row) == len(header)]
        if header[column].endswith("(not installed)"):
            found += [f"{header[column]}: a cell says {c!r}" for c in column_cells if c != "not installed"]
            continue
        if not any(NUMBER.match(c) for c in column_cells):
            found.append(f"{header[column]} is installed but gave no number")
        found += [f"{header[column]}: {c!r}" for c in column_cells
                  if not NUMBER.match(c) and not c.startswith(("cannot express:", "not run:"))]
    return found


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip().splitlines()[-4], file=sys.stderr)
        return 2
    missing = [m for m in ("torch", "transformers", "yaml") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"skipped: {sys.executable} lacks {', '.join(missing)} (run scripts/make-venv.sh)")
        return 77
    oomcast, scenarios = sys.argv[1], sys.argv[2:]
    peers = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers.py")
    command = [sys.executable, peers, "--oomcast", oomcast] + [a for s in scenarios for a in ("--scenario", s)]
    result = subprocess.run(command, capture_output=True, text=True)
    print(result.stdout)
    if result.returncode != 0:
        print(result.stderr[-3000:], file=sys.stderr)
        print(f"peers.py exited {result.returncode}")
        return 1
    found = problems_of(result.stdout, len(scenarios))
    for problem in found:
        print(f"problem: {problem}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
