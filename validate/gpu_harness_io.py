#!/usr/bin/python3
# gpu_harness_io.py: the GPU harness's talk with the outside: `oomcast plan`/`replay` runs for the
# prediction and the snapshot check, and the predicted-against-measured rows it prints and writes
# as CSV (split out of gpu_harness.py, which runs the training loop).
import csv
import json
import os
import subprocess

# Columns of the per-phase CSV (validate/results/*.csv has the same ones; README.md).
CSV_COLUMNS = [
    "gpu", "compute_capability", "torch_version", "cuda_version", "driver_version", "module_loading",
    "scenario", "overrides", "device_profile", "phase",
    "predicted_allocated_bytes", "measured_allocated_bytes",
    "predicted_reserved_bytes", "measured_reserved_bytes",
    "predicted_peak_allocated_bytes", "measured_peak_allocated_bytes",
    "predicted_peak_reserved_bytes", "measured_peak_reserved_bytes",
    "predicted_device_used_bytes", "measured_device_used_bytes",
    "predicted_context_bytes", "measured_context_bytes", "context_method", "dry_run",
]

def plan_overrides(cfg_overrides, profile, torch_version, cuda_version, module_loading):
    """The --set list that moves the scenario to the GPU that ran it."""
    sets = [f"device={profile}", f"allocator.torch_version={torch_version}"]
    if cuda_version:
        sets.append(f"device.cuda_version={cuda_version}")
    if module_loading:
        sets.append(f"device.module_loading={module_loading}")
    return sets + list(cfg_overrides)


def oomcast_plan(oomcast, scenario, sets, timeout):
    command = [oomcast, "plan", scenario, "--json"] + [a for s in sets for a in ("--set", s)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if done.returncode not in (0, 1):  # 1 = predicted OOM, still a prediction
        raise RuntimeError(f"oomcast plan failed ({done.returncode}): {done.stderr.strip()}")
    return json.loads(done.stdout)


def oomcast_replay(oomcast, snapshot, torch_version, timeout):
    """Replays a snapshot; returns (reproduced, summary text, json)."""
    command = [oomcast, "replay", snapshot, "--json"]
    if torch_version.startswith("2."):  # replay mimics 2.x releases; snapshots exist only there
        command += ["--torch-version", torch_version]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if done.returncode not in (0, 1):
        return False, f"oomcast replay failed ({done.returncode}): {done.stderr.strip()}", None
    out = json.loads(done.stdout)
    rec = out.get("recorded", {})
    reproduced = rec.get("first_mismatch") is None and rec.get("segment_decisions") == rec.get(
        "segment_decisions_matched")
    text = (f"{rec.get('segment_decisions_matched')} of {rec.get('segment_decisions')} segment decisions reproduced"
            f"; recorded peak reserved {rec.get('peak_reserved_bytes')} B, simulated {out.get('peak_reserved_bytes')} B")
    return reproduced, text, out


# ---------------------------------------------------------------- report

def mib(value):
    return "-" if value is None else f"{value / 2**20:10.2f}"


def rows_for_csv(meta, phases, plan, context_bytes, context_method, dry_run):
    predicted = {p["name"]: p for p in plan.get("phases", [])}
    out = []
    for row in phases.rows:
        p = predicted.get(row["phase"], {})
        peak_reserved = row["peak_reserved"]
        outside = None
        if row["device_used"] is not None and row["reserved"] is not None:
            outside = row["device_used"] - row["reserved"]
        # Device usage at the phase's peak: what the process held outside the allocator at the
        # mark, plus the phase's peak reserved.
        measured_device = None if outside is None or peak_reserved is None else outside + peak_reserved
        out.append(dict(meta, phase=row["phase"],
                        predicted_allocated_bytes=p.get("allocated_bytes"), measured_allocated_bytes=row["allocated"],
                        predicted_reserved_bytes=p.get("reserved_bytes"), measured_reserved_bytes=row["reserved"],
                        predicted_peak_allocated_bytes=p.get("peak_allocated_bytes"),
                        measured_peak_allocated_bytes=row["peak_allocated"],
                        predicted_peak_reserved_bytes=p.get("peak_reserved_bytes"),
                        measured_peak_reserved_bytes=peak_reserved,
                        predicted_device_used_bytes=p.get("peak_device_used_bytes"),
                        measured_device_used_bytes=measured_device,
                        predicted_context_bytes=(plan.get("outside_allocator") or {}).get("cuda_context_bytes"),
                        measured_context_bytes=context_bytes, context_method=context_method,
                        dry_run=int(dry_run)))
    return out


def print_table(rows, log):
    log(f"{'phase':<22} {'alloc MiB pred':>14} {'meas':>10} {'peak res pred':>14} {'meas':>10} "
        f"{'smi pred':>10} {'meas':>10}")
    for r in rows:
        log(f"{r['phase']:<22} {mib(r['predicted_peak_allocated_bytes']):>14} {mib(r['measured_peak_allocated_bytes']):>10} "
            f"{mib(r['predicted_peak_reserved_bytes']):>14} {mib(r['measured_peak_reserved_bytes']):>10} "
            f"{mib(r['predicted_device_used_bytes']):>10} {mib(r['measured_device_used_bytes']):>10}")


def write_csv(path, rows):
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        if new:
            writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in CSV_COLUMNS})


# ---------------------------------------------------------------- main
