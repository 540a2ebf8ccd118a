#!/usr/bin/python3
# autocast_lists.py: which ops CPU autocast (bf16) runs in bf16 and which it runs in fp32, for the
# torch this python imports; run it under two releases to see where their policies differ:
#   .venv/bin/python validate/autocast_lists.py ; /usr/bin/python3 validate/autocast_lists.py   # 2.13, 1.13
# An op is "lower" when fp32 inputs give a bf16 result, "fp32" when bf16 inputs give an fp32 one.
# validate/op_probe.py --table writes the same classes (classes() below, by aten name) into
# validate/op_facts/, which the planner's lists (the table planner/autocast_lists.yaml) are tested against.
import torch, torch.nn.functional as F
# The probe's short names that are not the aten op's name.
ATEN_NAMES = {"bce_logits": "binary_cross_entropy_with_logits", "sdpa": "scaled_dot_product_attention",
              "vector_norm": "linalg_vector_norm", "chain_matmul": "linalg_multi_dot"}
def run(dt):
    a = torch.randn(4, 8, dtype=dt).abs() + 0.5
    v8 = torch.randn(8, dtype=dt); v4 = torch.randn(4, dtype=dt)
    m8 = torch.randn(8, 8, dtype=dt)
    b3 = torch.randn(2, 4, 8, dtype=dt); b3w = torch.randn(2, 8, 4, dtype=dt)
    i1 = torch.randn(1, 4, 8, dtype=dt); i2 = torch.randn(1, 4, 8, 8, dtype=dt); i3 = torch.randn(1, 4, 4, 4, 4, dtype=dt)
    w1 = torch.randn(4, 4, 3, dtype=dt); w2 = torch.randn(4, 4, 3, 3, dtype=dt); w3 = torch.randn(4, 4, 3, 3, 3, dtype=dt)
    tgt = torch.zeros(4, dtype=torch.long)
    ops = {
     "mm": lambda: torch.mm(a, m8), "addmm": lambda: torch.addmm(v8, a, m8), "bmm": lambda: torch.bmm(b3, b3w),
     "baddbmm": lambda: torch.baddbmm(torch.bmm(b3, b3w), b3, b3w), "addbmm": lambda: torch.addbmm(torch.zeros(4, 4, dtype=dt), b3, b3w),
     "matmul": lambda: a @ m8, "linear": lambda: F.linear(a, m8), "conv1d": lambda: F.conv1d(i1, w1), "conv2d": lambda: F.conv2d(i2, w2),
     "conv3d": lambda: F.conv3d(i3, w3), "conv_transpose1d": lambda: F.conv_transpose1d(i1, w1),
     "conv_transpose2d": lambda: F.conv_transpose2d(i2, w2), "conv_transpose3d": lambda: F.conv_transpose3d(i3, w3),
     "addmv": lambda: torch.addmv(v4, a, v8), "mv": lambda: torch.mv(a, v8), "addr": lambda: torch.addr(m8, v8, v8),
     "chain_matmul": lambda: torch.linalg.multi_dot([m8, m8, m8]), "prelu": lambda: F.prelu(i2, torch.ones(1, dtype=dt)),
     "softmax": lambda: F.softmax(a, -1), "log_softmax": lambda: F.log_softmax(a, -1), "layer_norm": lambda: F.layer_norm(a, (8,)),
     "group_norm": lambda: F.group_norm(i2, 2), "nll_loss": lambda: F.nll_loss(a, tgt), "mse_loss": lambda: F.mse_loss(a, a),
     "l1_loss": lambda: F.l1_loss(a, a), "smooth_l1_loss": lambda: F.smooth_l1_loss(a, a), "huber_loss": lambda: F.huber_loss(a, a),
     "bce_logits": lambda: F.binary_cross_entropy_with_logits(a, a.sigmoid()), "kl_div": lambda: F.kl_div(a, a, reduction="batchmean"),
     "exp": lambda: a.exp(), "expm1": lambda: a.expm1(), "log": lambda: a.log(), "log1p": lambda: a.log1p(),
     "reciprocal": lambda: a.reciprocal(), "rsqrt": lambda: a.rsqrt(), "pow": lambda: a.pow(2), "softplus": lambda: F.softplus(a),
     "sum": lambda: a.sum(), "prod": lambda: a.prod(), "cumsum": lambda: a.cumsum(0), "cumprod": lambda: a.cumprod(0),
     "logsumexp": lambda: a.logsumexp(0), "norm": lambda: a.norm(), "vector_norm": lambda: torch.linalg.vector_norm(a),
     "cdist": lambda: torch.cdist(a, a), "cosine_similarity": lambda: F.cosine_similarity(a, a),
     "sdpa": (lambda: F.scaled_dot_product_attention(i2, i2, i2)) if hasattr(F, "scaled_dot_product_attention") else None,
    }
    out = {}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        for k, f in ops.items():
            if f is None: out[k] = "-"; continue
            try: out[k] = {torch.float32: "f32", torch.bfloat16: "bf16"}.get(f().dtype, "?")
            except Exception: out[k] = "ERR"
    return out
def classes():
    """{aten name: "lower" | "fp32" | "none"} under CPU bf16 autocast for this torch."""
    f32, b16 = run(torch.float32), run(torch.bfloat16)
    return {ATEN_NAMES.get(k, k): "lower" if f32[k] == "bf16" else "fp32" if b16[k] == "f32" else "none"
            for k in f32 if f32[k] not in ("ERR", "-") and b16[k] not in ("ERR", "-")}
if __name__ == "__main__":
    f32, b16 = run(torch.float32), run(torch.bfloat16)
    print(torch.__version__)
    print("lower (fp32 in -> bf16):", " ".join(k for k in f32 if f32[k] == "bf16"))
    print("fp32 (bf16 in -> f32):", " ".join(k for k in b16 if b16[k] == "f32"))
    print("errors:", " ".join(k for k in f32 if f32[k] == "ERR" or b16[k] == "ERR"))
