#!/usr/bin/env python3
"""Compares oomcast's predictions with GPU memory and step times that others measured and published.

Each row is a published measurement: a scenario in scenarios/published/, the `--set` overrides
that give the published run's settings, the published device memory in use (MiB, as NVML or
nvidia-smi reports it: the allocator's reserved memory plus the CUDA context) and, where the
source gives one, the wall time of the run. The script runs `oomcast plan --json` for each and
prints a Markdown table (the one docs/validation.md shows). With --check LOW HIGH it exits 1
when a predicted/published memory ratio falls outside [LOW, HIGH].

    python3 scripts/memory_published.py [--oomcast build/oomcast] [--check 0.8 1.2]
"""
import argparse
import json
import subprocess
import sys

BERT = "scenarios/published/hf-bert-large-v100-trainer.yaml"
BERT_SOURCE = "HF Transformers perf_train_gpu_one.md (Jan 2022), bert-large-uncased, V100-16GB"
ACCUMULATE = ["batch_size=1", "grad_accum_steps=4"]
CHECKPOINT = ["checkpointing=full"]
FP16 = ["precision=amp_fp16"]
ADAFACTOR = ["optimizer.type=adafactor"]
ADAM_8BIT = ["optimizer=adamw8bit"]

# (label, scenario, overrides, published MiB, published seconds for the run or None,
#  optimizer steps in that run, where the figures come from). The label "model loaded" compares
#  the plan's setup phase (the model on the device, nothing run yet); the others its peak.
PUBLISHED = [
    ("model loaded", BERT, [], 2631, None, 0,
     "model_memory_anatomy.md: GPU memory occupied after from_pretrained(...).to('cuda')"),
    ("batch 4", BERT, [], 14949, 57.82, 128, BERT_SOURCE),
    ("batch 1, accumulation 4", BERT, ACCUMULATE, 8681, 66.03, 128, BERT_SOURCE),
    ("+ gradient checkpointing", BERT, ACCUMULATE + CHECKPOINT, 6775, 85.47, 128, BERT_SOURCE),
    ("batch 4, fp16 AMP", BERT, FP16, 13939, 27.46, 128, BERT_SOURCE),
    ("batch 1, acc. 4, checkpointing, fp16", BERT, ACCUMULATE + CHECKPOINT + FP16, 7275, 50.76, 128, BERT_SOURCE),
    ("batch 4, Adafactor", BERT, ADAFACTOR, 12295, 64.31, 128, BERT_SOURCE),
    ("batch 1, acc. 4, checkpointing, fp16, Adafactor", BERT, ACCUMULATE + CHECKPOINT + FP16 + ADAFACTOR, 4847, 56.54,
     128, BERT_SOURCE),
    ("batch 4, 8-bit Adam", BERT, ADAM_8BIT, 13085, 55.95, 128, BERT_SOURCE),
    ("batch 1, acc. 4, checkpointing, fp16, 8-bit Adam", BERT, ACCUMULATE + CHECKPOINT + FP16 + ADAM_8BIT, 5363, 49.46,
     128, BERT_SOURCE),
]

MIB = 1024 * 1024


def plan(oomcast, scenario, overrides):
    command = [oomcast, "plan", scenario, "--json"]
    for override in overrides:
        command += ["--set", override]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode not in (0, 1):  # 1: the plan predicts an OOM, still a prediction
        raise SystemExit(f"{' '.join(command)} failed: {result.stderr.strip()}")
    return json.loads(result.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--oomcast", default="build/oomcast")
    parser.add_argument("--check", nargs=2, type=float, metavar=("LOW", "HIGH"))
    args = parser.parse_args()
    print("| run | published MiB | predicted MiB | ratio | published s | predicted s | ratio | source |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    outside = []
    for label, scenario, overrides, published_mib, published_seconds, steps, source in PUBLISHED:
        result = plan(args.oomcast, scenario, overrides)
        if label == "model loaded":
            setup = next(phase for phase in result["phases"] if phase["name"] == "setup")
            predicted_mib = setup["peak_device_used_bytes"] / MIB
        else:
            predicted_mib = result["predicted_device_used_bytes"] / MIB
        ratio = predicted_mib / published_mib
        time_cells = "| | |"
        step_time = result.get("step_time") or {}
        if published_seconds and step_time.get("modelled"):
            predicted_seconds = step_time["step_seconds"] * steps
            time_cells = f"{published_seconds:.1f} | {predicted_seconds:.1f} | {predicted_seconds / published_seconds:.2f} |"
        print(f"| {label} | {published_mib:,} | {predicted_mib:,.0f} | {ratio:.3f} | {time_cells} {source} |")
        if args.check and not args.check[0] <= ratio <= args.check[1]:
            outside.append(f"{label}: memory ratio {ratio:.3f} outside [{args.check[0]}, {args.check[1]}]")
    for line in outside:
        print(line, file=sys.stderr)
    return 1 if outside else 0


if __name__ == "__main__":
    sys.exit(main())
