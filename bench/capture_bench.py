#!/usr/bin/env python3
"""capture_bench.py: capture time of capture/oomcast_capture.py on ResNet-50 (Hugging Face
transformers' ResNetForImageClassification, capture/examples/resnet50.py), a
32-layer 4096-wide decoder and the 70B-shaped decoder, side by side in one run (wall and CPU
seconds, ops recorded, file lines); with --oomcast, also the plan time of the captured
70B-shaped graph against the llama-2-70b preset at the same scenario settings.

    .venv/bin/python bench/capture_bench.py [--oomcast build/oomcast] [--rounds 1]

Prints one JSON line per measurement and a summary line of ratios.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(REPO, "capture", "oomcast_capture.py")
MODELS = ["resnet50", "decoder_4096", "decoder_70b"]


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd):
    cpu0, t0 = child_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return proc, time.perf_counter() - t0, child_cpu() - cpu0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--oomcast", help="the oomcast binary, to time planning the captured 70B graph")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    out = tempfile.mkdtemp(prefix="oomcast-capture-bench-")
    results = {}
    # the baseline: importing torch alone, which every capture pays
    _, import_wall, import_cpu = timed([sys.executable, "-c", "import torch"])
    print(json.dumps({"measure": "import torch", "wall_s": round(import_wall, 2), "cpu_s": round(import_cpu, 2)}))
    for _ in range(args.rounds):
        for name in MODELS:
            graph = os.path.join(out, name + ".graph.yaml")
            proc, wall, cpu = timed([sys.executable, TOOL, os.path.join(REPO, "capture", "examples", name + ".py"),
                                     "-o", graph])
            if proc.returncode != 0:
                print(proc.stderr, file=sys.stderr)
                return 1
            lines = sum(1 for _ in open(graph))
            info = proc.stderr.splitlines()[0]
            results.setdefault(name, []).append(wall)
            print(json.dumps({"measure": "capture", "model": name, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                              "file_lines": lines, "log": info}))
    best = {k: min(v) for k, v in results.items()}
    summary = {"decoder_4096_over_resnet50": round(best["decoder_4096"] / best["resnet50"], 2),
               "decoder_70b_over_resnet50": round(best["decoder_70b"] / best["resnet50"], 2)}
    if args.oomcast:
        scenario_common = "batch_size: 1\nseq_len: 4096\nprecision: amp_bf16\ndevice: h100-80gb\ncheckpointing: full\n"
        plans = {}
        for label, model in (("preset", "llama-2-70b"), ("captured", os.path.join(out, "decoder_70b.graph.yaml"))):
            path = os.path.join(out, f"plan-{label}.yaml")
            with open(path, "w") as f:
                f.write(f"model: {model}\n" + scenario_common)
            walls = []
            for _ in range(3):
                proc, wall, _ = timed([args.oomcast, "plan", path])
                if proc.returncode not in (0, 1):
                    print(json.dumps({"measure": "plan", "model": label, "error": proc.stderr.strip()[:300]}))
                    break
                walls.append(wall)
            if walls:
                plans[label] = min(walls)
                print(json.dumps({"measure": "plan", "model": label, "wall_s": round(min(walls), 3)}))
        if len(plans) == 2:
            summary["plan_captured_over_preset"] = round(plans["captured"] / plans["preset"], 2)
    print(json.dumps({"summary": summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
