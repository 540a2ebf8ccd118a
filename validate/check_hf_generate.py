"""check_hf_generate.py: transformers' own generate() as the judge of the planner's generate job.

    PYTHON validate/check_hf_generate.py NAME --oomcast build/oomcast --out DIR [--tolerance 3%] [--cache dynamic]

For validate/hf_architectures/NAME/tiny.json (a decoder a built-in family reads): plans greedy
generation (generate.yaml beside this file's architectures: the family of the config.json, its
cache class) and compares it per phase with the same class's real model.generate() on the CPU
(validate/capture.py --transformers: the prefill and every decode step marked, the
DynamicCache or StaticCache of the installed transformers), then `oomcast compare --tolerance`.
Exit 0 pass, 1 outside the tolerance, 2 a tool failed, 77 (skip) without torch/transformers.
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ARCHITECTURES = os.path.join(HERE, "hf_architectures")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("name")
    ap.add_argument("--oomcast", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tolerance", default="3%")
    ap.add_argument("--cache", choices=("dynamic", "static"), default="dynamic")
    args = ap.parse_args(argv)
    try:
        import torch
        import transformers  # noqa: F401
        import yaml  # noqa: F401
    except ImportError as err:
        print(f"SKIP: {sys.executable} cannot import torch, transformers and yaml ({err}); scripts/make-venv.sh")
        return 77
    tiny = os.path.join(ARCHITECTURES, args.name, "tiny.json")
    if not os.path.isfile(tiny):
        print(f"check_hf_generate: error: {tiny}: no such file")
        return 2
    out = os.path.join(os.path.abspath(args.out), f"hf-generate-{args.name}-{args.cache}")
    os.makedirs(out, exist_ok=True)
    release = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    with open(os.path.join(ARCHITECTURES, "generate.yaml")) as f:
        text = f.read().replace("CONFIG", tiny).replace("NAME", args.name).replace("CACHE", args.cache)
    scenario = os.path.join(out, "generate.yaml")
    with open(scenario, "w") as f:
        f.write(text)
    trace = os.path.join(out, "generate.trace")
    env = dict(os.environ, OOMCAST_HOOK_DIR=os.path.join(out, "hook"))
    real = subprocess.run([sys.executable, os.path.join(HERE, "capture.py"), scenario, "-o", trace, "-q",
                           "--transformers", "--set", f"allocator.torch_version={release}"],
                          env=env, capture_output=True, text=True)
    if real.returncode != 0:
        print(f"FAIL: the real generate() exited {real.returncode}: {real.stderr.strip().splitlines()[-1:]}")
        return 2
    cmp = subprocess.run([args.oomcast, "compare", scenario, trace, "--tolerance", args.tolerance,
                          "--set", f"allocator.torch_version={release}"], capture_output=True, text=True)
    print(cmp.stdout.rstrip() or cmp.stderr.strip())
    if cmp.returncode == 0:
        print(f"PASS: {args.name}: the planned generate() ({args.cache} cache) within {args.tolerance} of "
              f"transformers {transformers.__version__}'s")
        return 0
    return 1 if cmp.returncode == 1 else 2


if __name__ == "__main__":
    sys.exit(main())
