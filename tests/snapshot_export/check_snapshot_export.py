#!/usr/bin/env python3
"""Checks `oomcast plan --export-snapshot` against oomcast itself and against a real snapshot.

usage: check_snapshot_export.py OOMCAST OUT_DIR NAME REAL_SNAPSHOT.pickle.gz -- plan arguments...

1. Round trip: `oomcast replay` of the export reproduces every segment decision the export
   recorded (in order, size and address) and, when the step fits, the plan's peak allocated
   and peak reserved bytes; a step that does not fit ends with an `oom` entry.
2. Python's pickle loads the export, and it has the keys and value types of the real
   snapshot torch.cuda.memory._snapshot() wrote (top level, segments, blocks, trace entries
   per action, frames), and only real action names.
Standard library only.
"""
import gzip
import json
import os
import pickle
import subprocess
import sys

REAL_ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
                "segment_map", "segment_unmap", "oom", "snapshot"}


def run(command):
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if result.returncode not in (0, 1):
        sys.exit(f"{' '.join(command)} exited {result.returncode}: {result.stderr}")
    return result.stdout


def types_of(mapping):
    return {key: type(value).__name__ for key, value in mapping.items()}


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    return pickle.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)


def compare(failures, what, real, ours):
    if real.keys() != ours.keys():
        failures.append(f"{what}: keys {sorted(ours.keys())}, real {sorted(real.keys())}")
        return
    real_types, our_types = types_of(real), types_of(ours)
    for key in real:
        if real_types[key] != our_types[key]:
            failures.append(f"{what}['{key}']: {our_types[key]}, real {real_types[key]}")


def main():
    split = sys.argv.index("--")
    oomcast, out_dir, name, real_path = sys.argv[1:split]
    arguments = sys.argv[split + 1:]
    os.makedirs(out_dir, exist_ok=True)
    export = os.path.abspath(os.path.join(out_dir, name + ".pickle"))
    plan = json.loads(run([oomcast, "plan"] + arguments + ["--json"]))
    run([oomcast, "plan"] + arguments + ["--export-snapshot", export])
    replay = json.loads(run([oomcast, "replay", export, "--json"]))
    failures = []
    recorded = replay["recorded"]
    if recorded["first_mismatch"] is not None or recorded["segment_decisions_matched"] != recorded["segment_decisions"]:
        failures.append(f"replay diverged: {recorded['segment_decisions_matched']} of {recorded['segment_decisions']} "
                        f"decisions, first mismatch {recorded['first_mismatch']}")
    if recorded["segment_decisions"] == 0:
        failures.append("the export records no segment decision")
    ours = load(export)
    real = load(real_path)
    entries = ours["device_traces"][0]
    if plan["fits"]:
        for key in ("peak_allocated_bytes", "peak_reserved_bytes"):
            if replay[key] != plan[key]:
                failures.append(f"{key}: replay of the export {replay[key]}, plan {plan[key]}")
    elif not entries or entries[-1]["action"] != "oom":
        failures.append("a step that does not fit must end with an oom entry")

    compare(failures, "snapshot", real, ours)
    compare(failures, "segments[0]", real["segments"][0], ours["segments"][0])
    compare(failures, "segments[0]['blocks'][0]", real["segments"][0]["blocks"][0], ours["segments"][0]["blocks"][0])
    compare(failures, "allocator_settings", real["allocator_settings"], ours["allocator_settings"])
    real_by_action = {}
    for entry in real["device_traces"][0]:
        real_by_action.setdefault(entry["action"], entry)
    seen = set()
    for entry in entries:
        action = entry["action"]
        if action not in REAL_ACTIONS:
            failures.append(f"unknown action {action!r}")
        if action in seen:
            continue
        seen.add(action)
        if action in real_by_action:
            compare(failures, f"trace entry '{action}'", real_by_action[action], entry)
    real_frame = next(e["frames"][0] for e in real["device_traces"][0] if e.get("frames"))
    our_frame = next((e["frames"][0] for e in entries if e.get("frames")), None)
    if our_frame is None:
        failures.append("no trace entry names its frames")
    else:
        compare(failures, "frame", real_frame, our_frame)
    for failure in failures:
        print("FAIL:", failure)
    if failures:
        sys.exit(1)
    print(f"{name}: {len(entries)} trace entries ({', '.join(sorted(seen))}), {len(ours['segments'])} segments; "
          f"replay reproduced {recorded['segment_decisions']} of {recorded['segment_decisions']} decisions; "
          f"keys and types as in {os.path.basename(real_path)}")


if __name__ == "__main__":
    main()
