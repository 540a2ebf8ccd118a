#!/usr/bin/python3
# op_probe.py: runs single ops forward and backward under the allocation hook and prints what
# the CPU kernels allocate (+id:bytes) and free (-id) between the marks |fwd |bwd |done (the
# last allocation before |bwd is the ones_like output gradient). Used to find
# where CPU kernels differ from the CUDA op catalogue (README.md, "CPU versus CUDA").
#
#   /usr/bin/python3 validate/op_probe.py [--bf16] [op ...]
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
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("ops", nargs="*")
    ap.add_argument("--bf16", action="store_true", help="run the forward under CPU bf16 autocast")
    args = ap.parse_args()
    capture.ensure_preloaded(False)
    import contextlib
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    torch.set_num_threads(1)
    hook = capture.Hook()
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
