"""hf_table.py: the table of docs/validation.md's real Hugging Face architectures.

    .venv/bin/python validate/hf_table.py --oomcast build/oomcast [--out DIR] [--full NAME ...] [NAME ...]

For every validate/hf_architectures/ model (or the NAMEs given): transformers' class and the
parameter count of the published config.json (model.num_parameters() on the meta device), then
validate/check_hf_architecture.py on its tiny.json (captured count, family-versus-capture peak,
CPU training step per phase against the real run). --full NAME also captures the full-size
config.json and checks its planned parameter count and, where a family exists, the family's
peak of the same scenario at full size. Prints a Markdown table.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
ARCHITECTURES = os.path.join(HERE, "hf_architectures")
sys.path.insert(0, os.path.join(REPO, "capture"))


def full_size(name):
    import torch
    import hf_model
    user = hf_model.model_file(os.path.join(ARCHITECTURES, name, "config.json"))
    with torch.device("meta"):
        built = user.model()
    return type(built).__name__, built.config._attn_implementation, built.num_parameters()


def plan(oomcast, scenario):
    out = subprocess.run([oomcast, "plan", scenario, "--json"], capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode in (0, 1) else {"error": out.stderr.strip()}


def full_check(name, oomcast, out):
    """(planned parameters, family peak difference or None) of the full-size config.json."""
    config = os.path.join(ARCHITECTURES, name, "config.json")
    graph = os.path.join(out, f"{name}.full.graph.yaml")
    cap = subprocess.run([sys.executable, os.path.join(REPO, "capture", "oomcast_capture.py"), config, "-o", graph,
                          "-q"],
                         capture_output=True, text=True)
    if cap.returncode != 0:
        return f"capture failed: {cap.stderr.strip().splitlines()[-1:]}", None
    with open(os.path.join(ARCHITECTURES, "training.yaml")) as f:
        text = f.read().replace("NAME", name).replace("batch_size: 3", "batch_size: 1").replace("seq_len: 32", "seq_len: 512")
        # a full-size step that fits a 141 GB H200: bf16 weights (pure_bf16), SGD (no optimizer
        # state), flash attention (the kernel SDPA picks for bf16, and the one that takes
        # enable_gqa's grouped k/v as they are)
        text = text.replace("device: cpu", "device: h200\nattention: flash").replace(
            "precision: fp32", "precision: pure_bf16").replace(
            "optimizer: {type: adamw, impl: single_tensor}", "optimizer: {type: sgd, impl: single_tensor}")
    mine = os.path.join(out, f"{name}.full.yaml")
    with open(mine, "w") as f:
        f.write(text.replace("GRAPH", os.path.basename(graph)))
    theirs = os.path.join(out, f"{name}.full-family.yaml")
    with open(theirs, "w") as f:
        f.write(text.replace("GRAPH", config))
    a, b = plan(oomcast, mine), plan(oomcast, theirs)
    if "error" in a:
        return a["error"], None
    if "error" in b or any("has no oomcast family" in w for w in b.get("warnings") or []):
        return a["parameters"], None
    return a["parameters"], (a["peak_allocated_bytes"] - b["peak_allocated_bytes"]) / b["peak_allocated_bytes"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*")
    ap.add_argument("--oomcast", required=True)
    ap.add_argument("--out", default="/tmp/oomcast-hf-table")
    ap.add_argument("--full", action="append", default=[], metavar="NAME")
    args = ap.parse_args(argv)
    names = args.names or sorted(d for d in os.listdir(ARCHITECTURES) if os.path.isdir(os.path.join(ARCHITECTURES, d)))
    os.makedirs(args.out, exist_ok=True)
    print("| architecture | transformers class (attention) | parameters (published config) | full-size capture counts "
          "| tiny: captured = num_parameters() | tiny: capture vs family peak | CPU step error, median / max per phase |")
    print("|---|---|---|---|---|---|---|")
    for name in names:
        cls, attention, count = full_size(name)
        full = "not run"
        if name in args.full:
            planned, difference = full_check(name, args.oomcast, args.out)
            full = ("equal" if planned == count else f"{planned}") + \
                   (f"; family peak {100 * difference:+.2f}%" if difference is not None else "")
        check = subprocess.run([sys.executable, os.path.join(HERE, "check_hf_architecture.py"), name,
                                "--oomcast", args.oomcast, "--out", args.out, "--json"],
                               capture_output=True, text=True)
        row = next((json.loads(line) for line in check.stdout.splitlines() if line.startswith("{")), None)
        if row is None:
            failure = (check.stdout.strip().splitlines() or ["no output"])[-1]
            print(f"| {name} | {cls} ({attention}) | {count:,} | {full} | {failure} | | |")
            continue
        same = "yes" if row["parameters"] == row["planned_parameters"] else f"no ({row['planned_parameters']})"
        family = row.get("family_peak_difference")
        family = "no family" if family is None else f"{100 * family:+.2f}%"
        compared = row["compare"]
        errors = f"{100 * compared['median_abs_peak_error']:.2f}% / {100 * compared['max_abs_peak_error']:.2f}%"
        print(f"| {name} | {cls} ({attention}) | {count:,} | {full} | {same} | {family} | {errors} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
