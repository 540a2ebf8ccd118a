#!/usr/bin/env python3
"""Compares oomcast's step-time model with published training and decode throughputs.

Runs `oomcast plan --json` on each scenario in scenarios/published/ and prints predicted
against published tokens/s per GPU as Markdown tables (the ones docs/step-time.md shows):
training steps, then generation's decode steps.
With --check LOW HIGH it exits 1 when a predicted/published ratio falls outside [LOW, HIGH].

    python3 scripts/step_time_published.py [--oomcast build/oomcast] [--check 0.5 2.0]
"""
import argparse
import json
import subprocess
import sys

# (scenario, published tokens/s per GPU, where it comes from)
PUBLISHED = [
    ("scenarios/published/nanogpt-gpt2-124m-8xa100-40gb.yaml", 106_700,
     "nanoGPT README: GPT-2 124M, 600k iters x 491,520 tokens in ~4 days on 8 x A100-40GB"),
    ("scenarios/published/llmc-gpt2-124m-8xa100-80gb.yaml", 231_000,
     "llm.c discussion #481: 10B tokens in ~90 min on 8 x A100-80GB SXM"),
    ("scenarios/published/fsdp-llama-2-7b-128xa100.yaml", 3_700,
     "PyTorch blog (IBM/Meta) Maximizing training throughput using PyTorch FSDP: 3,700 tokens/s/GPU"),
    ("scenarios/published/llama-2-paper-7b-a100.yaml", 3_014,
     "Llama 2 paper Table 2: 2.0T tokens in 184,320 A100-80GB GPU-hours"),
]

# Generation: (scenario, published decode tokens/s for all sequences, where it comes from)
PUBLISHED_DECODE = [
    ("scenarios/published/gpt-fast-llama-2-7b-a100-decode.yaml", 104.9,
     "gpt-fast README (pytorch-labs/gpt-fast): Llama-2-7B bf16, batch 1, torch.compile + static cache, "
     "A100-80GB at 330 W: 104.9 tokens/s (1,397 GB/s)"),
]


def predict(oomcast, scenario):
    out = subprocess.run([oomcast, "plan", scenario, "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["step_time"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--oomcast", default="build/oomcast")
    parser.add_argument("--check", nargs=2, type=float, metavar=("LOW", "HIGH"))
    args = parser.parse_args()
    print("| scenario | predicted tokens/s/GPU | published | ratio | predicted MFU | step split (fwd/bwd/recompute/opt/exposed comm) | source |")
    print("|---|---:|---:|---:|---:|---|---|")
    outside = []
    for scenario, published, source in PUBLISHED:
        t = predict(args.oomcast, scenario)
        if not t["modelled"]:
            outside.append(f"{scenario}: not modelled ({t['not_modelled']})")
            continue
        predicted = t["tokens_per_second"]
        ratio = predicted / published
        split = "/".join(f"{t[key]:.3f}" for key in ("forward_seconds", "backward_seconds", "recompute_seconds",
                                                    "optimizer_seconds", "communication_exposed_seconds"))
        name = scenario.split("/")[-1]
        print(f"| {name} | {predicted:,.0f} | {published:,} | {ratio:.2f} | {t['model_flops_utilization']:.2f} | {split} s | {source} |")
        if args.check and not args.check[0] <= ratio <= args.check[1]:
            outside.append(f"{name}: ratio {ratio:.2f} outside [{args.check[0]}, {args.check[1]}]")
    print()
    print("| scenario | predicted decode tokens/s | published | ratio | decode step | prefill | source |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for scenario, published, source in PUBLISHED_DECODE:
        t = predict(args.oomcast, scenario)
        if not t["modelled"] or not t["generation"]:
            outside.append(f"{scenario}: generation not modelled ({t['not_modelled']})")
            continue
        g = t["generation"]
        predicted = g["decode_tokens_per_second"]
        ratio = predicted / published
        name = scenario.split("/")[-1]
        print(f"| {name} | {predicted:,.1f} | {published:,} | {ratio:.2f} | {g['decode_seconds_per_step'] * 1e3:.2f} ms "
              f"| {g['prefill_seconds'] * 1e3:.2f} ms | {source} |")
        if args.check and not args.check[0] <= ratio <= args.check[1]:
            outside.append(f"{name}: ratio {ratio:.2f} outside [{args.check[0]}, {args.check[1]}]")
    for line in outside:
        print(line, file=sys.stderr)
    return 1 if outside else 0


if __name__ == "__main__":
    sys.exit(main())
