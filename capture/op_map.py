# op_map.py: which recorded dispatcher ops become catalogue ops of the graph format
# (planner/ops/op_catalogue.h), so the planner's precision regimes and device kernels (CPU
# dropout noise, mkldnn convolution copies, the autocast weight cache, cuBLAS) apply to them.
# Everything not matched here is written as a generic op with its recorded sizes and saves.
# A match is exact or nothing: an op whose arguments differ from what the catalogue op models
# (a strided convolution with unequal strides, gelu with a tanh approximation, ...) stays generic.

from sdpa import sdpa_statement

FLOATING = {"float32", "float16", "bfloat16", "float64"}


def _short(op):
    return op.op.split("::", 1)[-1]


def _tensor(arg):
    return arg[1] if isinstance(arg, tuple) and len(arg) == 2 and arg[0] == "T" else None


def _in_module_of(b, op, cls):
    return cls in (b.rec.module_types.get(op.module) or [])


def _used_only_by(b, tid, op_indices):
    return all(i in op_indices for i in b.uses.get(tid, [])) and tid not in (b.rec.output, b.rec.loss)


def _next_op(b, op, k=1):
    i = op.index + k
    if i < len(b.rec.ops) and b.rec.ops[i].module == op.module and b.rec.ops[i].phase == op.phase:
        return b.rec.ops[i]
    return None


def _linear(b, op):
    """t(W) [view(x)] addmm(bias, x2, Wt) | mm(x2, Wt) [view | _unsafe_view]: nn.Linear /
    F.linear inside a Linear or MultiheadAttention module, x contiguous."""
    if not (_in_module_of(b, op, "Linear") or _in_module_of(b, op, "MultiheadAttention")):
        return None
    w = op.inputs[0]
    if b.t(w).kind != "parameter" or len(b.t(w).shape) != 2:
        return None
    wt = op.outputs[0]
    chain = [op]
    nxt = _next_op(b, op)
    x = None
    if nxt is not None and _short(nxt) in ("view", "_reshape_alias") and nxt.inputs:
        x = nxt.inputs[0]
        chain.append(nxt)
        x2 = nxt.outputs[0]
        nxt = _next_op(b, nxt)
    if nxt is None or _short(nxt) not in ("addmm", "mm"):
        return None
    if _short(nxt) == "addmm":
        bias = _tensor(nxt.args.get("self"))
        mat1, mat2 = _tensor(nxt.args.get("mat1")), _tensor(nxt.args.get("mat2"))
        if nxt.args.get("beta", 1) != 1 or nxt.args.get("alpha", 1) != 1 or bias is None \
                or b.t(bias).kind != "parameter":
            return None
    else:
        bias = None
        mat1, mat2 = _tensor(nxt.args.get("self")), _tensor(nxt.args.get("mat2"))
    if mat2 != wt:
        return None
    if x is None:
        x = mat1
    elif mat1 != x2:
        return None
    if not b.t(x).contiguous:
        return None
    chain.append(nxt)
    out = nxt.outputs[0]
    after = _next_op(b, nxt)
    if len(chain) == 3:  # flattened: the result is viewed back to x's leading dims
        if after is None or _short(after) not in ("view", "_unsafe_view") or after.inputs[0] != out:
            return None
        chain.append(after)
        out = after.outputs[0]
    indices = {c.index for c in chain}
    for c in chain[:-1]:
        for o in c.outputs:
            if not _used_only_by(b, o, indices):
                return None
    b.consumed.update(i for i in indices if i != op.index)
    stmt = {"op": "linear", "x": b.name(x), "weight": b.name(w)}
    if bias is not None:
        stmt["bias"] = b.name(bias)
    stmt["out"] = b.name(out)
    return stmt


def _dropout(b, op):
    """empty_like(x), bernoulli_, div_, mul(x, noise) (CPU's _dropout_impl), or native_dropout."""
    if _short(op) == "native_dropout":
        return {"op": "dropout", "x": b.name(op.inputs[0]), "p": op.args.get("p"), "out": b.name(op.outputs[0])}
    if not _in_module_of(b, op, "Dropout"):
        return None
    chain = [op]
    for k, name in ((1, "bernoulli_"), (2, "div_"), (3, "mul")):
        nxt = _next_op(b, op, k)
        if nxt is None or _short(nxt) != name:
            return None
        chain.append(nxt)
    x = op.inputs[0]
    mul = chain[-1]
    if sorted(mul.inputs) != sorted([x, chain[2].outputs[0]]):
        return None
    b.consumed.update(c.index for c in chain[1:])
    p = next((a for a in (chain[1].args.get("p"),) if isinstance(a, float)), None)
    stmt = {"op": "dropout", "x": b.name(x)}
    if p is not None:
        stmt["p"] = round(1.0 - p, 6)
    stmt["out"] = b.name(mul.outputs[0])
    return stmt


def _unary(kind):
    def fn(b, op):
        if kind == "gelu" and op.args.get("approximate", "none") not in ("none", None):
            return None
        return {"op": kind, "x": b.name(op.inputs[0]), "out": b.name(op.outputs[0])}
    return fn


def _relu(b, op):
    stmt = {"op": "relu", "x": b.name(op.inputs[0])}
    if op.inplace:
        stmt["in_place"] = True
    stmt["out"] = b.name(op.outputs[0])
    return stmt


def _binary(kind):
    def fn(b, op):
        a, other = _tensor(op.args.get("self")), _tensor(op.args.get("other"))
        if a is None or other is None or op.args.get("alpha", 1) != 1:
            return None
        if b.is_scalar_constant(other):
            if kind != "mul" or op.inplace:
                return None
            return {"op": "scale", "x": b.name(a), "out": b.name(op.outputs[0])}
        if b.is_scalar_constant(a):
            return None
        if kind == "mul" and op.inplace:
            return None
        out_shape = b.t(op.outputs[0]).shape
        if out_shape not in (b.t(a).shape, b.t(other).shape):
            return None  # an outer broadcast (cos/sin tables): the catalogue op models one operand's shape
        stmt = {"op": kind, "a": b.name(a), "b": b.name(other)}
        if op.inplace:
            stmt["in_place"] = True
        stmt["out"] = b.name(op.outputs[0])
        return stmt
    return fn


def _softmax(b, op):
    x = op.inputs[0]
    dim = op.args.get("dim")
    if dim not in (-1, len(b.t(x).shape) - 1) or op.args.get("half_to_float"):
        return None
    return {"op": "softmax", "x": b.name(x), "out": b.name(op.outputs[0])}


def _layer_norm(b, op):
    x, w, bias = (_tensor(op.args.get(k)) for k in ("input", "weight", "bias"))
    shape = op.args.get("normalized_shape")
    if w is None or b.t(w).kind != "parameter" or not isinstance(shape, list) or len(shape) != 1:
        return None
    stmt = {"op": "layer_norm", "x": b.name(x), "weight": b.name(w)}
    if bias is not None:
        stmt["bias"] = b.name(bias)
    if not b.t(x).contiguous:
        stmt["noncontiguous_input"] = True
    stmt["out"] = b.name(op.outputs[0])
    return stmt


def _embedding(b, op):
    w, idx = _tensor(op.args.get("weight")), _tensor(op.args.get("indices"))
    if w is None or b.t(w).kind != "parameter" or op.args.get("padding_idx", -1) not in (-1, None) \
            or op.args.get("sparse"):
        return None
    return {"op": "embedding", "indices": b.name(idx), "weight": b.name(w), "out": b.name(op.outputs[0])}


def _conv(b, op):
    x, w, bias = (_tensor(op.args.get(k)) for k in ("input", "weight", "bias"))
    stride, padding, dilation = op.args.get("stride"), op.args.get("padding"), op.args.get("dilation")
    if len(b.t(x).shape) != 4 or op.args.get("transposed") or op.args.get("groups", 1) != 1:
        return None
    if not (isinstance(stride, list) and len(set(stride)) == 1 and isinstance(padding, list)
            and len(set(padding)) == 1 and set(dilation or [1]) == {1}):
        return None
    if b.t(w).kind != "parameter" or b.t(w).shape[2] != b.t(w).shape[3]:
        return None
    stmt = {"op": "conv2d", "x": b.name(x), "weight": b.name(w)}
    if bias is not None:
        stmt["bias"] = b.name(bias)
    if stride[0] != 1:
        stmt["stride"] = stride[0]
    if padding[0] != 0:
        stmt["padding"] = padding[0]
    stmt["out"] = b.name(op.outputs[0])
    return stmt


def _batch_norm(b, op):
    names = ("input", "weight", "bias", "running_mean", "running_var")
    ts = [_tensor(op.args.get(k)) for k in names]
    if any(t is None for t in ts) or len(b.t(ts[0]).shape) != 4 or not op.args.get("training"):
        return None
    stmt = {"op": "batch_norm", "x": b.name(ts[0])}
    stmt.update({k: b.name(t) for k, t in zip(names[1:], ts[1:])})
    stmt["out"] = b.name(op.outputs[0])
    return stmt


def _max_pool(b, op):
    a = op.args
    if (a.get("kernel_size"), a.get("stride"), a.get("padding")) != ([3, 3], [2, 2], [1, 1]) \
            or set(a.get("dilation") or [1]) != {1} or a.get("ceil_mode"):
        return None
    return {"op": "max_pool2d", "x": b.name(op.inputs[0]), "out": b.name(op.outputs[0])}


def _mean(b, op):
    x = op.inputs[0]
    dims = op.args.get("dim")
    if not _in_module_of(b, op, "AdaptiveAvgPool2d") or len(b.t(x).shape) != 4 \
            or sorted(d % 4 for d in (dims or [])) != [2, 3] or not op.args.get("keepdim"):
        return None
    return {"op": "adaptive_avg_pool2d", "x": b.name(x), "out": b.name(op.outputs[0])}


def _cross_entropy(b, op):
    """_log_softmax(logits, 1) then nll_loss_forward(mean): F.cross_entropy on [N, C]."""
    nxt = _next_op(b, op)
    x = op.inputs[0]
    if nxt is None or _short(nxt) != "nll_loss_forward" or len(b.t(x).shape) != 2 \
            or op.args.get("dim") not in (1, -1) or nxt.args.get("reduction") != 1 \
            or _tensor(nxt.args.get("weight")) is not None or nxt.inputs[0] != op.outputs[0]:
        return None
    if not _used_only_by(b, op.outputs[0], {nxt.index}):
        return None
    b.consumed.add(nxt.index)
    return {"op": "cross_entropy", "logits": b.name(x), "targets": b.name(_tensor(nxt.args.get("target"))),
            "out": b.name(nxt.outputs[0])}


def _clone(b, op):
    if op.args.get("memory_format") not in (None, "torch.contiguous_format"):
        return None
    return {"op": "copy", "x": b.name(op.inputs[0]), "out": b.name(op.outputs[0])}


def _cat(b, op):
    ts = op.args.get("tensors")
    if not isinstance(ts, list) or len(ts) != 2:
        return None
    dim = op.args.get("dim", 0)
    ndim = len(b.t(_tensor(ts[0])).shape)
    dim = dim % ndim if ndim else 0
    stmt = {"op": "cat", "a": b.name(_tensor(ts[0])), "b": b.name(_tensor(ts[1]))}
    if dim:
        stmt["dim"] = dim
    stmt["out"] = b.name(op.outputs[0])
    return stmt


_RULES = {
    "t": _linear, "empty_like": _dropout, "native_dropout": _dropout,
    "gelu": _unary("gelu"), "silu": _unary("silu"), "tanh": _unary("tanh"),
    "relu": _relu, "relu_": _relu, "add": _binary("add"), "add_": _binary("add"), "mul": _binary("mul"),
    "_softmax": _softmax, "native_layer_norm": _layer_norm, "embedding": _embedding,
    "convolution": _conv, "native_batch_norm": _batch_norm, "max_pool2d_with_indices": _max_pool,
    "mean": _mean, "_log_softmax": _cross_entropy, "clone": _clone, "cat": _cat,
}


def catalogue_statement(builder, op):
    """A catalogue statement for `op` (marking the other ops it folds in as consumed), or None."""
    if op.index in builder.sdpa_at:  # before the dtype check: a causal call starts with its bool mask
        stmt = sdpa_statement(builder, op, builder.sdpa_notes.append)
        if stmt is not None:
            return stmt
    rule = _RULES.get(_short(op))
    if rule is None or any(builder.t(o).dtype not in FLOATING for o in op.outputs[:1]):
        return None
    return rule(builder, op)
