#!/usr/bin/env python3
"""Runs the tools a user would pick instead of oomcast on the same scenarios and prints one table.

Installs nothing: run it with the project's venv (scripts/make-venv.sh), where the peers are
pinned in scripts/venv-requirements.txt. For each scenario whose model has a transformers class
(bench/peer_scenarios.py) it asks every peer (bench/peer_tools.py), `oomcast plan SCENARIO
--json`, and the real measurement where the repo holds one: the published GPU figures of
scripts/memory_published.py (nvidia-smi, MiB) and, for the CPU validation scenarios of
validate/scenarios/, a capture of the real loop (validate/capture.py, live tensor bytes).

    .venv/bin/python bench/peers.py --oomcast build/oomcast [--scenario FILE ...] [--rows bundled,published,captured]

Prints a Markdown table (MiB) on stdout and progress on stderr; exit 0, 2 on bad input.
"""
import argparse
import glob
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from peer_scenarios import REPO, Scenario  # noqa: E402
from peer_tools import PEERS, Cell, installed  # noqa: E402

MIB = 1024 * 1024
CAPTURE_TORCH = "2.13"  # the captures run the venv's torch; oomcast plans for the same release


def published_rows():
    """(scenario, overrides, label, MiB) of the published GPU measurements, from the table
    scripts/memory_published.py checks (its training rows; the model-loaded row has no step)."""
    spec = importlib.util.spec_from_file_location("memory_published", os.path.join(REPO, "scripts",
                                                                                   "memory_published.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for label, scenario, overrides, mib, *_ in module.PUBLISHED:
        if label != "model loaded":
            yield os.path.join(REPO, scenario), overrides, f"published: bert-large, {label}", mib


ROW_SETS = ("bundled", "published", "captured")


def default_rows(sets):
    """The bundled scenarios, the published measurements and the CPU validation scenarios (with a
    capture each), as `sets` asks; rows whose model has no transformers class are dropped later."""
    rows = []
    if "bundled" in sets:
        rows += [(path, [], None, ("none", None)) for path in sorted(glob.glob(os.path.join(REPO, "scenarios", "*.yaml")))]
    if "published" in sets:
        rows += [(path, overrides, label, ("published", mib)) for path, overrides, label, mib in published_rows()]
    if "captured" in sets:
        for path in sorted(glob.glob(os.path.join(REPO, "validate", "scenarios", "*.yaml"))):
            rows.append((path, [f"allocator.torch_version={CAPTURE_TORCH}"], None, ("capture", None)))
    return rows


def oomcast_plan(oomcast, scenario):
    command = [oomcast, "plan", scenario.path, "--json"]
    for override in scenario.overrides:
        command += ["--set", override]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode not in (0, 1):  # 1: the plan predicts an OOM, still a prediction
        raise RuntimeError(f"{' '.join(command)}: {result.stderr.strip()}")
    return json.loads(result.stdout)


def captured_peak(oomcast, scenario):
    """The real peak (live tensor bytes) of the scenario's loop run on the CPU by validate/capture.py
    under this python's torch, read back by `oomcast compare`."""
    with tempfile.TemporaryDirectory(prefix="oomcast-peers-") as folder:
        trace = os.path.join(folder, "capture.trace")
        overrides = [arg for override in scenario.overrides for arg in ("--set", override)]
        subprocess.run([sys.executable, os.path.join(REPO, "validate", "capture.py"), scenario.path, "-o", trace,
                        "-q", *overrides], check=True, capture_output=True, text=True)
        result = subprocess.run([oomcast, "compare", scenario.path, trace, "--json", *overrides],
                                capture_output=True, text=True)
        return json.loads(result.stdout)["real_peak_bytes"]


def mib(value):
    if value is None:
        return ""
    size = value / MIB
    return f"{size:,.0f}" if size >= 100 else f"{size:.2f}"


def cell_text(cell):
    return mib(cell.value) if cell.value is not None else cell.note.replace("|", "/")


def run_peer(function, scenario):
    try:
        return function(scenario)
    except Exception as error:  # noqa: BLE001 - a peer that fails is a cell, not the end of the table
        message = str(error).splitlines()[0] if str(error) else ""
        return Cell(None, f"error: {type(error).__name__}: {message[:100]}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--oomcast", default=os.path.join(REPO, "build", "oomcast"))
    parser.add_argument("--scenario", action="append", default=[], metavar="FILE",
                        help="only these scenarios (default: bundled, published and CPU validation ones)")
    parser.add_argument("--rows", default=",".join(ROW_SETS),
                        help=f"which default rows, comma-separated among {', '.join(ROW_SETS)} (default: all)")
    args = parser.parse_args(argv)
    if not os.access(args.oomcast, os.X_OK):
        print(f"peers.py: no oomcast binary at {args.oomcast} (build it, or pass --oomcast)", file=sys.stderr)
        return 2
    for path in args.scenario:
        if not os.path.isfile(path):
            print(f"peers.py: no scenario file {path}", file=sys.stderr)
            return 2
    rows = ([(os.path.abspath(p), [], None, ("none", None)) for p in args.scenario] if args.scenario
            else default_rows(args.rows.split(",")))

    present = [(name, installed(module), function) for name, module, function in PEERS]
    header = [name if ok else f"{name} (not installed)" for name, ok, _ in present]
    print("| scenario | " + " | ".join(header) + " | oomcast allocated | oomcast reserved | oomcast nvidia-smi"
          " | real | real is |")
    print("|---|" + "---:|" * (len(present) + 4) + "---|")
    skipped = []
    started = time.time()
    for path, overrides, label, (real_kind, real_mib) in rows:
        scenario = Scenario(path, overrides, label)
        if scenario.hf_kind is None:
            skipped.append(f"{scenario.label} ({scenario.no_hf_reason})")
            continue
        print(f"peers.py: {scenario.label}", file=sys.stderr, flush=True)
        cells = [run_peer(function, scenario) if ok else Cell(None, "not installed") for _, ok, function in present]
        plan = oomcast_plan(args.oomcast, scenario)
        real, real_is = "", ""
        if real_kind == "published":
            real, real_is = f"{real_mib:,}", "published, nvidia-smi"
        elif real_kind == "capture":
            real, real_is = mib(captured_peak(args.oomcast, scenario)), "CPU capture, live tensors"
        print(f"| {scenario.label} | " + " | ".join(cell_text(c) for c in cells) +
              f" | {mib(plan['peak_allocated_bytes'])} | {mib(plan['peak_reserved_bytes'])}"
              f" | {mib(plan.get('predicted_device_used_bytes'))} | {real} | {real_is} |", flush=True)
    print(f"\n{len(rows) - len(skipped)} scenarios in {time.time() - started:.0f} s; torch "
          f"{__import__('torch').__version__}.", flush=True)
    if skipped:
        print("No transformers class, so no peer row: " + "; ".join(skipped) + ".")
    return 0


if __name__ == "__main__":
    sys.exit(main())
