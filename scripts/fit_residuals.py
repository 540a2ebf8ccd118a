#!/usr/bin/env python3
"""Prints the closed-form fit's worst residual for every scenario where `oomcast whatif` prints it.

Runs `oomcast whatif SCENARIO --json` on each scenario in scenarios/ and scenarios/published/
and prints a Markdown table: the scenario, how many laws the fit takes the max of (the moments
that set a simulated peak, or forward/backward and the optimizer step), and the worst
|simulated - formula| / simulated over its samples. With --check MAX it exits 1 when a
residual is above MAX (a fraction). Scenarios whatif rejects are listed as such.

    python3 scripts/fit_residuals.py [--oomcast build/oomcast] [--check 0.01] [--jobs N]
"""
import argparse
import glob
import json
import os
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--oomcast", default="build/oomcast")
    parser.add_argument("--check", type=float, metavar="MAX")
    parser.add_argument("--jobs", type=int, default=0)
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    scenarios = sorted(glob.glob(os.path.join(root, "scenarios", "*.yaml")))
    scenarios += sorted(glob.glob(os.path.join(root, "scenarios", "published", "*.yaml")))
    print("| scenario | laws | worst residual | at (B, S) |")
    print("|---|---:|---:|---|")
    above = []
    for path in scenarios:
        name = os.path.relpath(path, root)
        command = [args.oomcast, "whatif", path, "--json"] + (["--jobs", str(args.jobs)] if args.jobs else [])
        run = subprocess.run(command, capture_output=True, text=True)
        if run.returncode not in (0, 1):
            print(f"| {name} | - | rejected: {run.stderr.strip().splitlines()[-1] if run.stderr.strip() else run.returncode} | |")
            continue
        fit = json.loads(run.stdout)["fit"]
        if not fit:
            print(f"| {name} | - | no fit | |")
            continue
        laws = len(fit.get("moments") or []) or (2 if fit["step_coefficients"] else 1)
        worst = max(fit["samples"], key=lambda s: abs(s["residual_bytes"]) / s["peak_bytes"] if s["peak_bytes"] else 0)
        residual = fit["max_relative_residual"]
        print(f"| {name} | {laws} | {residual * 100:.2f}% | ({worst['batch']}, {worst['seq_len']}) |")
        if args.check is not None and residual > args.check:
            above.append(f"{name}: worst residual {residual * 100:.2f}% above {args.check * 100:.2f}%")
    for line in above:
        print(line, file=sys.stderr)
    return 1 if above else 0


if __name__ == "__main__":
    sys.exit(main())
