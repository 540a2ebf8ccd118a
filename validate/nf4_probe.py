#!/usr/bin/python3
# nf4_probe.py: torchao's NF4 (torchtune's QLoRA weights) measured under the allocation hook on
# the CPU: the bytes to_nf4 allocates above its bf16 input (its peak and what it leaves), and
# linear_nf4's forward and backward peaks above their inputs. The planner's counterparts are the
# torchao sequences of planner/quantized_loading.cc and planner/ops/linear_variants.cc.
#
#   PYTHONPATH=DIR_WITH_TORCHAO .venv/bin/python validate/nf4_probe.py [--out 1024 --in 4096]
#
# torchao is not in the project's venv: put a torchao wheel (0.18, pure Python on the CPU)
# on PYTHONPATH. Exit 77 without it.
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capture  # noqa: E402


def walk(hook, events, n0):
    """Live bytes above the first mark: the peak of each phase and the live bytes at each mark."""
    start = next(i for i, e in enumerate(events) if e[0] == capture.Hook.MARK and e[1] == n0)
    sizes, live, phase, peaks, at = {}, 0, None, {}, {}
    for kind, ptr, size in events[start:]:
        if kind == capture.Hook.MARK:
            phase = hook.labels[ptr]
            at[phase] = live
        elif kind == capture.Hook.ALLOC:
            sizes[ptr] = size
            live += size
            peaks[phase] = max(peaks.get(phase, 0), live)
        elif ptr in sizes:
            live -= sizes.pop(ptr)
    return peaks, at


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=int, default=1024)
    parser.add_argument("--in", dest="inp", type=int, default=4096)
    parser.add_argument("--rows", type=int, default=256)
    args = parser.parse_args()
    capture.ensure_preloaded(False)
    import torch
    try:
        from torchao.quantization.quantize_.workflows.nf4.nf4_tensor import linear_nf4, to_nf4
    except ImportError:
        try:
            from torchao.dtypes.nf4tensor import linear_nf4, to_nf4
        except ImportError:
            print("nf4_probe: torchao is not importable (put it on PYTHONPATH)", file=sys.stderr)
            return 77
    torch.manual_seed(0)
    hook = capture.Hook()
    weight = torch.randn(args.out, args.inp, dtype=torch.bfloat16)
    x = torch.randn(args.rows, args.inp, dtype=torch.bfloat16, requires_grad=True)
    n0 = len(hook.labels)
    hook.start()
    hook.mark("to_nf4")
    nf4 = to_nf4(weight)
    hook.mark("forward")
    out = linear_nf4(x, nf4)
    hook.mark("backward")
    out.backward(torch.ones_like(out))
    hook.mark("end")
    hook.stop()
    peaks, at = walk(hook, hook.events(), n0)
    numel = args.out * args.inp
    print(f"weight [{args.out}, {args.inp}] bf16 ({numel * 2} B), input [{args.rows}, {args.inp}] bf16")
    print(f"to_nf4: peak above its input {peaks['to_nf4']} B, leaves {at['forward']} B")
    print(f"linear_nf4 forward: peak {peaks['forward'] - at['forward']} B above the NF4 weight, "
          f"leaves {at['backward'] - at['forward']} B")
    print(f"linear_nf4 backward: peak {peaks['backward'] - at['backward']} B above the forward's leftovers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
