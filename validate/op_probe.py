#!/usr/bin/python3
# op_probe.py: runs single ops forward and backward under the allocation hook and prints what
# the CPU kernels allocate (+id:bytes) and free (-id) between the marks |fwd |bwd |done (the
# last allocation before |bwd is the ones_like output gradient). Used to find
# where CPU kernels differ from the CUDA op catalogue (README.md, "CPU versus CUDA").
# --table FILE measures every probe under three settings (fp32 with grad, bf16 autocast with
# grad, fp32 under no_grad) plus the autocast class of each listed op, and writes the versioned
# table validate/op_facts/torch-VERSION-cpu.tsv: the planner's lists are tested against it
# (planner/autocast_lists_test.cc) and ctest op_facts.torch_2_13 fails when torch disagrees.
#
#   .venv/bin/python validate/op_probe.py [--bf16] [op ...]
#   .venv/bin/python validate/op_probe.py --table validate/op_facts/torch-2.13-cpu.tsv
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capture  # noqa: E402


def probes(torch, F):
    B, T, H, NH, V = 2, 16, 64, 2, 96
    x = lambda *s: torch.randn(*s, requires_grad=True)  # noqa: E731
    lin = torch.nn.Linear(H, 3 * H)
    ln = torch.nn.LayerNorm(H)
    conv = torch.nn.Conv2d(8, 16, 3, padding=1)
    bn = torch.nn.BatchNorm2d(8)
    emb = torch.nn.Embedding(V, H)
    tgt = torch.randint(0, V, (B * T,))
    idx = torch.randint(0, V, (B, T))
    cos_t, sin_t = torch.randn(1, 1, T, H), torch.randn(1, 1, T, H)
    images = torch.randn(B, 8, 16, 16)
    mha = torch.nn.MultiheadAttention(H, NH, batch_first=True)
    xb = lambda *s: torch.randn(*s, dtype=torch.bfloat16, requires_grad=True)  # noqa: E731
    conv64 = torch.nn.Conv2d(64, 64, 3, padding=1)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    return {
        "linear": (lambda a: lin(a), [x(B, T, H)]),
        "matmul4d": (lambda a, b: a @ b.transpose(-2, -1), [x(B, NH, T, H), x(B, NH, T, H)]),
        # q @ kᵀ with a contiguous k (repeat_kv's reshape output): no copy of kᵀ
        "matmul4d_contig": (lambda a, b: a.transpose(1, 2) @ b.transpose(-2, -1),
                            [x(B, T, NH, H), x(B, NH, T, H)]),
        "softmax": (lambda a: F.softmax(a, dim=-1), [x(B, NH, T, T)]),
        "layer_norm": (lambda a: ln(a), [x(B, T, H)]),
        "gelu": (lambda a: F.gelu(a), [x(B, T, H)]),
        "silu_mul": (lambda a, b: F.silu(a) * b, [x(B, T, H), x(B, T, H)]),
        "dropout": (lambda a: F.dropout(a, 0.1, training=True), [x(B, T, H)]),
        "cross_entropy": (lambda a: F.cross_entropy(a, tgt), [x(B * T, V)]),
        "embedding": (lambda: emb(idx), []),
        "conv2d": (lambda a: conv(a), [x(B, 8, 16, 16)]),
        "batch_norm": (lambda a: bn(a), [x(B, 8, 16, 16)]),
        "max_pool2d": (lambda a: F.max_pool2d(a, 3, 2, 1), [x(B, 8, 16, 16)]),
        "relu_": (lambda a: F.relu(a * 1.0, inplace=True), [x(B, 8, 16, 16)]),
        # layer_norm of a non-contiguous input (a [T, B, H] tensor seen as [B, T, H])
        "layer_norm_noncontig": (lambda a: ln(a.transpose(0, 1)), [x(T, B, H)]),
        # ViT's head input: x = ln(x)[:, 0] on a non-contiguous residual stream
        "layer_norm_select": (lambda a: ln(a.transpose(0, 1))[:, 0], [x(T, B, H)]),
        "layer_norm_select_contig": (lambda a: ln(a)[:, 0], [x(B, T, H)]),
        # a first conv (input without grad): only the weight and bias grads
        "conv2d_first": (lambda: conv(images), []),
        # a slice view (rotate_half's x[..., :d/2]): slice_backward
        "slice": (lambda a: a[..., : H // 2] * 2.0, [x(B, T, H)]),
        # HF rotary: q * cos + rotate_half(q) * sin
        "rotary": (lambda a: a * cos_t + torch.cat((-a[..., H // 2:], a[..., : H // 2]), dim=-1) * sin_t,
                   [x(B, NH, T, H)]),
        # HF LlamaRMSNorm's variance: pow(2) then mean(-1, keepdim=True)
        "pow_mean": (lambda a: a.pow(2).mean(-1, keepdim=True), [x(B, T, H)]),
        "rmsnorm": (lambda a: a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-6), [x(B, T, H)]),
        # nn.MultiheadAttention(batch_first=True) self-attention, need_weights=False (ViT)
        "mha": (lambda a: mha(a, a, a, need_weights=False)[0], [x(B, T, H)]),
        # bf16 activations (autocast's matmul outputs) into ops whose autocast class differs by device
        "softmax_bf16_input": (lambda a: F.softmax(a, dim=-1), [xb(B, NH, T, T)]),
        "layer_norm_bf16_input": (lambda a: ln(a), [xb(B, T, H)]),
        "cross_entropy_bf16_input": (lambda a: F.cross_entropy(a, tgt), [xb(B * T, V)]),
        # oneDNN's conv2d with 64 input channels (U-Net, ResNet): its own input/output copies
        "conv2d_64ch": (lambda a: conv64(a), [x(B, 64, 16, 16)]),
        # hand-written attention: scores by einsum, the mask by where, softmax as exp(x - max) / sum
        "einsum_scores": (lambda a, b: torch.einsum("bhqd,bhkd->bhqk", a, b), [x(B, NH, T, H), x(B, NH, T, H)]),
        "masked_fill_scores": (lambda a: a.masked_fill(~causal, float("-inf")), [x(B, NH, T, T)]),
        "where_scores": (lambda a: torch.where(causal, a, torch.finfo(a.dtype).min), [x(B, NH, T, T)]),
        "manual_softmax": (lambda a: (lambda e: e / e.sum(-1, keepdim=True))((a - a.amax(-1, keepdim=True)).exp()),
                           [x(B, NH, T, T)]),
    }


# The settings of --table: name, autocast, grad mode.
SETTINGS = (("fp32", False, True), ("amp_bf16", True, True), ("no_grad", False, False))


def measure(torch, hook, fn, inputs, autocast, grad):
    """Bytes above the start: the forward's peak, what the forward leaves (output and saved
    tensors), the backward's peak (with the output's gradient) and what is left at the end."""
    import contextlib
    ctx = torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
    n0 = len(hook.labels)
    hook.start()
    hook.mark("fwd")
    with ctx, torch.set_grad_enabled(grad):
        out = fn(*inputs)
    hook.mark("bwd")
    if grad and out.requires_grad:
        out.backward(torch.ones_like(out))
    hook.mark("done")
    del out
    for t in inputs:
        t.grad = None
    hook.mark("after")
    hook.stop()
    events = hook.events()
    start = next(i for i, e in enumerate(events) if e[0] == capture.Hook.MARK and e[1] == n0)
    sizes, live, phase, result = {}, 0, None, {"fwd_peak": 0, "bwd_peak": 0}
    for kind, ptr, size in events[start:]:
        if kind == capture.Hook.MARK:
            phase = hook.labels[ptr]
            if phase == "bwd":
                result["kept"] = live
            if phase == "after":
                result["left"] = live
        elif kind == capture.Hook.ALLOC:
            sizes[ptr] = size
            live += size
            key = {"fwd": "fwd_peak", "bwd": "bwd_peak"}.get(phase)
            if key:
                result[key] = max(result[key], live)
        elif ptr in sizes:
            live -= sizes.pop(ptr)
    return result


def cpu_capability(torch):
    """ATen's capability (AVX2, AVX512) with the bf16 features oneDNN picks its bf16 GEMM kernels,
    and so their buffers, by: an AVX512 CPU with AVX512_BF16 (AMD EPYC, measured 2026-12-02)
    makes other bf16 matmul and linear buffers than the AVX512 one the table was measured on."""
    capability = torch.backends.cpu.get_cpu_capability()
    cpu = getattr(torch, "cpu", None)
    for feature, probe in (("AVX512_BF16", "_is_avx512_bf16_supported"), ("AMX", "_is_amx_tile_supported")):
        supported = getattr(cpu, probe, None)
        if supported is not None and supported():
            capability += "+" + feature
    return capability


def write_table(path, torch, F, hook):
    import autocast_lists
    rows = [f"# validate/op_probe.py --table under torch {torch.__version__} on the CPU, one thread. Do not edit:",
            f"# cpu capability: {cpu_capability(torch)} (oneDNN's convolution and bf16 GEMM buffers depend on it)",
            "# regenerate with `.venv/bin/python validate/op_probe.py --table validate/op_facts/torch-2.13-cpu.tsv`.",
            "# autocast OP CLASS: the op's class under CPU bf16 autocast (lower: fp32 in -> bf16 out; fp32: bf16",
            "#   in -> fp32 out; none: follows its input).",
            "# op PROBE SETTING FWD_PEAK KEPT BWD_PEAK LEFT: bytes above the probe's start (its inputs exist):",
            "#   the forward's peak, what the forward leaves (output + saved), the backward's peak, the end."]
    rows += [f"autocast\t{op}\t{cls}" for op, cls in sorted(autocast_lists.classes().items())]
    for setting, autocast, grad in SETTINGS:
        torch.manual_seed(0)
        for name, (fn, inputs) in probes(torch, F).items():
            r = measure(torch, hook, fn, inputs, autocast, grad)
            rows.append(f"op\t{name}\t{setting}\t{r['fwd_peak']}\t{r['kept']}\t{r['bwd_peak']}\t{r['left']}")
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("ops", nargs="*")
    ap.add_argument("--bf16", action="store_true", help="run the forward under CPU bf16 autocast")
    ap.add_argument("--table", metavar="FILE", help="write the measured facts table to FILE")
    args = ap.parse_args()
    capture.ensure_preloaded(False)
    import contextlib
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    torch.set_num_threads(1)
    hook = capture.Hook()
    if args.table:
        write_table(args.table, torch, F, hook)
        return
    table = probes(torch, F)
    for name in args.ops or list(table):
        fn, inputs = table[name]
        ctx = torch.autocast("cpu", dtype=torch.bfloat16) if args.bf16 else contextlib.nullcontext()
        n0 = len(hook.labels)
        hook.start()
        hook.mark("fwd")
        with ctx:
            out = fn(*inputs)
        grad = torch.ones_like(out)
        hook.mark("bwd")
        out.backward(grad)
        hook.mark("done")
        del out, grad
        for t in inputs:
            t.grad = None
        hook.mark("after")
        hook.stop()
        events = hook.events()
        # events since this probe's first mark
        start = next(i for i, e in enumerate(events) if e[0] == capture.Hook.MARK and e[1] == n0)
        ids, line, n = {}, [], 0
        for kind, ptr, size in events[start:]:
            if kind == capture.Hook.MARK:
                line.append("|" + hook.labels[ptr])
            elif kind == capture.Hook.ALLOC:
                ids[ptr] = f"a{n}"
                n += 1
                line.append(f"+{ids[ptr]}:{size}")
            elif ptr in ids:
                line.append(f"-{ids.pop(ptr)}")
        print(f"{name}{' (bf16 autocast)' if args.bf16 else ''}: " + " ".join(line))


if __name__ == "__main__":
    main()
