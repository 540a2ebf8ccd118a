#!/usr/bin/python3
# check_gpu_results.py: measurements on real GPUs as tests. Reads every committed
# validate/results/*.csv (written by validate/run_gpu_checks.sh on a GPU), re-runs
# `oomcast plan --json` for each scenario with the settings of the run that measured it (GPU
# profile, torch and CUDA release, module loading, overrides) and checks that the current
# predictions stay within tolerance of every measurement: allocated within 1% and reserved
# within 3% (of the scenario's measured peak of that quantity, as the CPU validation does),
# at every phase mark and for every phase peak. Needs no GPU and no torch.
#
#   python3 validate/check_gpu_results.py [CSV ...] [--oomcast build/oomcast]
#   python3 validate/check_gpu_results.py --self-test     # the checker's own test (synthetic data)
#
# Exit codes: 0 every measurement within tolerance, 1 a prediction drifted (each one is
# listed), 2 bad input, 77 no result file committed yet (nothing to check: said plainly).
# Lines starting with '#' in a CSV are comments (synthetic test data says so in one).
import argparse
import csv
import glob
import io
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import gpu_harness  # noqa: E402  (plan_overrides, oomcast_plan, CSV_COLUMNS; no torch at import)

RESULTS_DIR = os.path.join(HERE, "results")
# (measured column, predicted column, quantity) checked for every row.
CHECKS = [
    ("measured_allocated_bytes", "allocated_bytes", "allocated"),
    ("measured_peak_allocated_bytes", "peak_allocated_bytes", "allocated"),
    ("measured_reserved_bytes", "reserved_bytes", "reserved"),
    ("measured_peak_reserved_bytes", "peak_reserved_bytes", "reserved"),
]


def read_rows(path):
    with open(path, newline="") as f:
        text = "".join(line for line in f if not line.lstrip().startswith("#"))
    rows = list(csv.DictReader(io.StringIO(text)))
    missing = [c for c in ("scenario", "phase", "device_profile", "torch_version") if rows and c not in rows[0]]
    if missing:
        raise ValueError(f"{path}: missing columns {', '.join(missing)}")
    return rows


def run_key(row):
    return (row["scenario"], row.get("overrides", ""), row["device_profile"], row["torch_version"],
            row.get("cuda_version", ""), row.get("module_loading", ""))


def predict(oomcast, key, timeout):
    scenario, overrides, profile, torch_version, cuda_version, loading = key
    sets = gpu_harness.plan_overrides([s for s in overrides.split(";") if s], profile,
                                      gpu_harness.torch_release(torch_version),
                                      ".".join(cuda_version.split(".")[:2]) if cuda_version else "", loading)
    plan = gpu_harness.oomcast_plan(oomcast, os.path.join(REPO, scenario), sets, timeout)
    return {p["name"]: p for p in plan.get("phases", [])}


def number(text):
    return None if text in (None, "") else int(float(text))


def check_file(path, oomcast, tolerances, timeout, log):
    """Returns (checked, failures) for one CSV."""
    rows = [r for r in read_rows(path) if r.get("dry_run", "0") in ("", "0")]
    failures, checked = [], 0
    groups = {}
    for row in rows:
        groups.setdefault(run_key(row), []).append(row)
    for key, group in groups.items():
        predicted = predict(oomcast, key, timeout)
        peaks = {"allocated": 0, "reserved": 0}
        for row in group:
            for measured_column, _, quantity in CHECKS:
                peaks[quantity] = max(peaks[quantity], number(row.get(measured_column)) or 0)
        for row in group:
            phase = predicted.get(row["phase"])
            if phase is None:
                # `teardown` (the script dropping its objects) was never a planner phase; a
                # phase the planner did predict when the run was recorded must still exist.
                if row.get("predicted_peak_allocated_bytes"):
                    failures.append(f"FAIL {key[0]} {row['phase']}: the planner has no such phase any more")
                continue
            for measured_column, predicted_key, quantity in CHECKS:
                measured = number(row.get(measured_column))
                if measured is None:
                    continue
                now = int(phase[predicted_key])
                error = 100.0 * abs(now - measured) / max(peaks[quantity], 1)
                checked += 1
                if error > tolerances[quantity]:
                    failures.append(f"FAIL {key[0]} [{row.get('gpu', '')}, torch {key[3]}] {row['phase']} "
                                    f"{predicted_key}: predicted {now}, measured {measured} ({error:.2f}% of the "
                                    f"measured peak; tolerance {tolerances[quantity]:g}%)")
    log(f"{os.path.relpath(path, REPO)}: {checked} comparisons in {len(groups)} run(s), {len(failures)} failed")
    return checked, failures


def check(paths, oomcast, tolerances, timeout, log):
    total, all_failures = 0, []
    for path in paths:
        checked, failures = check_file(path, oomcast, tolerances, timeout, log)
        total += checked
        all_failures += failures
    for line in all_failures:
        log(line)
    if total == 0 and not all_failures:
        log(f"{len(paths)} file(s) hold no measured value to compare (dry runs only?): SKIPPED, not passed")
        return 77
    verdict = "FAILED" if all_failures else "all within tolerance"
    log(f"{len(paths)} file(s), {total} comparisons: {verdict}")
    return 1 if all_failures else 0


def table(paths, log):
    """Prints predicted against measured as recorded in the CSVs (no planner run)."""
    def cell(value):
        return "-" if value is None else f"{value / 2**20:9.2f}"

    def difference(predicted, measured):
        if predicted is None or measured is None or measured == 0:
            return "      -"
        return f"{100.0 * (predicted - measured) / measured:+6.2f}%"

    for path in paths:
        for scenario_rows in _by_scenario(read_rows(path)):
            first = scenario_rows[0]
            log(f"{first['scenario']} on {first.get('gpu', '')} (torch {first.get('torch_version', '')}, context "
                f"measured {cell(number(first.get('measured_context_bytes'))).strip()} MiB, predicted "
                f"{cell(number(first.get('predicted_context_bytes'))).strip()} MiB)")
            log(f"  {'phase':<24} {'peak alloc MiB pred':>19} {'meas':>9} {'diff':>8} {'peak res pred':>13} "
                f"{'meas':>9} {'diff':>8} {'smi pred':>9} {'meas':>9}")
            for r in scenario_rows:
                pa, ma = number(r.get("predicted_peak_allocated_bytes")), number(r.get("measured_peak_allocated_bytes"))
                pr, mr = number(r.get("predicted_peak_reserved_bytes")), number(r.get("measured_peak_reserved_bytes"))
                ps, ms = number(r.get("predicted_device_used_bytes")), number(r.get("measured_device_used_bytes"))
                log(f"  {r['phase']:<24} {cell(pa):>19} {cell(ma):>9} {difference(pa, ma):>8} {cell(pr):>13} "
                    f"{cell(mr):>9} {difference(pr, mr):>8} {cell(ps):>9} {cell(ms):>9}")
    return 0


def _by_scenario(rows):
    groups = {}
    for row in rows:
        groups.setdefault(run_key(row), []).append(row)
    return list(groups.values())


def synthesize(oomcast, scenario, scale, path, label):
    """Writes a SYNTHETIC results CSV whose 'measurements' are the current predictions times
    `scale`: test data for this checker, never a claim about accuracy."""
    meta = dict(gpu=label, compute_capability="9.0", torch_version="2.6.0", cuda_version="12.4", driver_version="",
                module_loading="lazy", scenario=os.path.relpath(os.path.join(REPO, scenario), REPO), overrides="",
                device_profile="h200")
    predicted = predict(oomcast, run_key(meta), 120)
    with open(path, "w", newline="") as f:
        f.write(f"# SYNTHETIC test data for validate/check_gpu_results.py: 'measured' = prediction x {scale};"
                " NOT a measurement\n")
        writer = csv.DictWriter(f, fieldnames=gpu_harness.CSV_COLUMNS)
        writer.writeheader()
        for name, p in predicted.items():
            row = dict(meta, phase=name, dry_run=0)
            for measured_column, predicted_key, _ in CHECKS:
                row[measured_column] = int(int(p[predicted_key]) * scale)
            writer.writerow({k: row.get(k, "") for k in gpu_harness.CSV_COLUMNS})


def self_test(oomcast, tolerances, timeout):
    """The checker must accept predictions within tolerance and reject a drifted one."""
    quiet = lambda s: None  # noqa: E731
    scenario = "validate/scenarios/gpt2-tiny-adamw.yaml"
    with tempfile.TemporaryDirectory() as tmp:
        close, far = os.path.join(tmp, "close.csv"), os.path.join(tmp, "far.csv")
        synthesize(oomcast, scenario, 1.005, close, "SYNTHETIC")
        synthesize(oomcast, scenario, 1.02, far, "SYNTHETIC")
        accepted = check([close], oomcast, tolerances, timeout, quiet) == 0
        rejected = check([far], oomcast, tolerances, timeout, quiet) == 1
    print(f"self-test: 0.5% off accepted: {accepted}; 2% off (allocated tolerance 1%) rejected: {rejected}")
    return 0 if accepted and rejected else 1


def main(argv=None):
    ap = argparse.ArgumentParser(description="check current predictions against committed GPU measurements")
    ap.add_argument("files", nargs="*", help="result CSVs (default: every validate/results/*.csv)")
    ap.add_argument("--oomcast", default=os.path.join(REPO, "build", "oomcast"))
    ap.add_argument("--allocated-tolerance", type=float, default=1.0, help="percent of the measured peak")
    ap.add_argument("--reserved-tolerance", type=float, default=3.0, help="percent of the measured peak")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per oomcast call")
    ap.add_argument("--self-test", action="store_true", help="test the checker on synthetic data and exit")
    ap.add_argument("--table", action="store_true", help="print the CSVs' recorded predicted vs measured; no check")
    ap.add_argument("--results-dir", default=RESULTS_DIR, help="where committed results are (default validate/results)")
    args = ap.parse_args(argv)
    tolerances = {"allocated": args.allocated_tolerance, "reserved": args.reserved_tolerance}
    if args.self_test:
        return self_test(args.oomcast, tolerances, args.timeout)
    paths = args.files or sorted(glob.glob(os.path.join(args.results_dir, "*.csv")))
    if args.table:
        return table(paths, print)
    if not paths:
        print(f"check_gpu_results: no GPU results are committed in {os.path.relpath(args.results_dir, REPO)}/ yet, so there is nothing to "
              "check: SKIPPED, not passed. Run validate/run_gpu_checks.sh on a GPU and commit its CSV.")
        return 77
    try:
        return check(paths, args.oomcast, tolerances, args.timeout, print)
    except (OSError, ValueError, RuntimeError) as error:
        print(f"check_gpu_results: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
