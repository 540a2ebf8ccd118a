# sdpa.py: F.scaled_dot_product_attention calls, seen at the Python level while recording.
# On the meta device SDPA always decomposes into its math backend, so the dispatcher ops alone
# would pin a model to math attention whatever the scenario's `attention:` says. A
# TorchFunctionMode marks the dispatcher ops each call produced as one region (with the call's
# arguments); sdpa_statement() turns a region the catalogue `attention` op models exactly into
# that op. torch 1.13 has no SDPA: the mode is then not installed and nothing changes.
import contextlib

import torch

try:
    from torch.overrides import TorchFunctionMode
except ImportError:  # pragma: no cover
    TorchFunctionMode = None

_SDPA = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
_ARGUMENTS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")


class SdpaCall:
    """One recorded SDPA call: the ops [start, end) it dispatched, its tensors and options."""
    __slots__ = ("start", "end", "q", "k", "v", "mask", "out", "options", "mergeable", "module")

    def __init__(self):
        self.start = self.end = 0
        self.q = self.k = self.v = self.mask = self.out = None
        self.options, self.mergeable, self.module = {}, {}, ""


def _heads_mergeable(t):
    """Whether matmul can fold a [b, heads, s, d] operand to [b*heads, s, d] without a copy
    (the catalogue op's *_contiguous flags): dims 0 and 1 merge when stride0 = stride1*heads.
    Size-1 dims are not exempted: the graph must hold at every batch size."""
    return t.dim() == 4 and t.stride(0) == t.stride(1) * t.shape[1]


def _mark(recorder, sdpa, args, kwargs):
    """Runs one SDPA call, recording the ops it dispatches as a region."""
    r = recorder
    bound = dict(zip(_ARGUMENTS, args))
    bound.update(kwargs)
    r.resolve_pending()
    call = SdpaCall()
    call.module = r.module_path()
    tensors = [bound.get(n) for n in ("query", "key", "value")]
    if all(isinstance(t, torch.Tensor) for t in tensors):
        call.q, call.k, call.v = (r.tensor_id(t) for t in tensors)
        call.mergeable = {n: _heads_mergeable(t) for n, t in zip("qkv", tensors)}
    mask = bound.get("attn_mask")
    if isinstance(mask, torch.Tensor):
        call.mask = r.tensor_id(mask)
    call.options = {"attn_mask": None if mask is None else "tensor", "dropout_p": bound.get("dropout_p", 0.0),
                    "is_causal": bool(bound.get("is_causal", False)), "scale": bound.get("scale"),
                    "enable_gqa": bool(bound.get("enable_gqa", False))}
    call.start = len(r.rec.ops)
    out = sdpa(*args, **kwargs)
    r.resolve_pending()
    call.end = len(r.rec.ops)
    if isinstance(out, torch.Tensor):
        call.out = r.lookup(out)
    r.rec.sdpa_calls.append(call)
    return out


if TorchFunctionMode is not None and _SDPA is not None:
    class _SdpaMode(TorchFunctionMode):
        """Sees calls of the SDPA builtin however the user's code named it. A torch function
        mode is off while its handler runs, so an SDPA call nested in another Python-level torch
        function (F.multi_head_attention_forward) reaches the patched module global instead."""

        def __init__(self, regions):
            super().__init__()
            self.regions = regions

        def __torch_function__(self, func, types, args=(), kwargs=None):
            return self.regions.call(func, args, kwargs or {})

    class _SdpaRegions:
        def __init__(self, recorder):
            self.recorder, self.inside = recorder, False
            self.mode = _SdpaMode(self)

        def call(self, func, args, kwargs):
            if func is not _SDPA or self.inside or not self.recorder.recording:
                return func(*args, **kwargs)
            self.inside = True
            try:
                return _mark(self.recorder, func, args, kwargs)
            finally:
                self.inside = False

        def _patched(self, *args, **kwargs):
            return self.call(_SDPA, args, kwargs)

        def __enter__(self):
            torch.nn.functional.scaled_dot_product_attention = self._patched
            self.mode.__enter__()
            return self

        def __exit__(self, *exc):
            self.mode.__exit__(*exc)
            torch.nn.functional.scaled_dot_product_attention = _SDPA
            return False

    def sdpa_regions(recorder):
        return _SdpaRegions(recorder)
else:
    def sdpa_regions(recorder):
        return contextlib.nullcontext()


# ---- the graph side

_HEAD_MERGES = ({"op": "transpose", "dims": {1, 2}}, {"op": "permute", "dims": ([0, 2, 1, 3], [2, 0, 1, 3])})


def _short(op):
    return op.op.split("::", 1)[-1]


def _heads_merge(b, op, out):
    """The view that brings SDPA's [b, heads, s, d] result to [.., s, heads, d] for the copy that
    follows (`.transpose(1, 2).contiguous()`, MultiheadAttention's `.permute(2, 0, 1, 3)
    .contiguous()`): the copy the catalogue op includes. None if `op` is not that."""
    if op is None or not op.inputs or op.inputs[0] != out:
        return None
    name = _short(op)
    if name == "transpose":
        dims = {op.args.get("dim0", 0) % 4, op.args.get("dim1", 0) % 4}
        return op if dims == {1, 2} else None
    if name == "permute":
        dims = [d % 4 for d in (op.args.get("dims") or [])]
        return op if dims in ([0, 2, 1, 3], [2, 0, 1, 3]) else None
    return None


def inexact_reason(b, call):
    """Why the catalogue op would not model this call exactly, or None."""
    o = call.options
    if call.q is None or call.out is None:
        return "query/key/value are not tensors"
    shapes = [b.t(t).shape for t in (call.q, call.k, call.v)]
    if o["attn_mask"] is not None:
        # SDPA takes a bool mask (converted per call to q's dtype) or an additive float mask,
        # broadcastable to [batch, heads, q_len, kv_len] (sdp_utils_cpp.cpp check_attn_mask_shape)
        if call.mask is None:
            return "attn_mask is not a tensor"
        if o["is_causal"]:
            return "attn_mask with is_causal"
        mask = b.t(call.mask)
        target = tuple(shapes[0][:2]) + (shapes[0][2], shapes[1][2]) if len(shapes[0]) == 4 else None
        if target is None or len(mask.shape) > 4 or any(
                m not in (1, t) for m, t in zip(reversed(tuple(mask.shape)), reversed(target))):
            return "attn_mask does not broadcast to [batch, heads, q_len, kv_len]"
        if str(mask.dtype) not in ("bool", "float32", "float16", "bfloat16", "float64"):
            return f"attn_mask of dtype {mask.dtype}"
    if o["enable_gqa"]:
        # grouped k and v: [batch, kv_heads, seq, head_dim] with kv_heads dividing q's heads
        q, k, v = shapes
        if len(q) != 4 or k != v or len(k) != 4 or (k[0], k[2], k[3]) != (q[0], q[2], q[3]) or q[1] % k[1]:
            return "enable_gqa with k, v not [batch, kv_heads, seq, head_dim] of q's batch, seq and head_dim"
    elif len(shapes[0]) != 4 or shapes[1] != shapes[0] or shapes[2] != shapes[0]:
        return "q, k, v are not all [batch, heads, seq, head_dim] of one shape"
    # A `scale` is taken by every kernel (the CPU flash kernel, CUDA's, the math backend's scalar
    # muls) and changes no tensor. What picks the kernel is the dropout: the CPU flash kernel
    # takes none (torch 2.13: torch._fused_sdp_choice answers math for dropout_p > 0), so the
    # statement carries the call's dropout_p and the planner runs the math backend on the CPU.
    if not isinstance(o["dropout_p"], (int, float)) or not 0.0 <= o["dropout_p"] <= 1.0:
        return "dropout_p is not a probability"
    return None


def sdpa_statement(b, op, note):
    """The `attention` statement for the SDPA call starting at `op` (its ops, the heads-merging
    view and the contiguous copy after it marked consumed), or None; `note(reason)` is told why
    a call stays generic ops."""
    call = b.sdpa_at.get(op.index)
    if call is None:
        return None
    reason = inexact_reason(b, call)
    ops = b.rec.ops
    region = set(range(call.start, call.end))
    after, out = call.end, call.out
    # transformers 5's sdpa_attention_forward reshapes the result to its own shape (undoing its
    # pack_gqa, a no-op otherwise) before the transpose: a view that changes nothing is folded too
    identity = ops[after] if after < len(ops) else None
    if identity is not None and _short(identity) in ("view", "_unsafe_view", "reshape") \
            and identity.inputs[:1] == [out] and identity.outputs \
            and tuple(b.t(identity.outputs[0]).shape) == tuple(b.t(out).shape):
        after, out = after + 1, identity.outputs[0]
        region = region | {identity.index}
    merge = _heads_merge(b, ops[after], out) if after < len(ops) else None
    copy = ops[after + 1] if merge is not None and after + 1 < len(ops) else None
    if copy is not None and (_short(copy) != "clone" or copy.inputs[:1] != merge.outputs[:1]
                             or copy.args.get("memory_format") not in (None, "torch.contiguous_format")):
        copy = None
    # Without that copy the op's result is SDPA's own [b, heads, s, d] (`heads_first`); the ops
    # after it stay as recorded.
    folded = region | ({merge.index, copy.index} if copy is not None else set())
    if reason is None:
        inner = [t for i in region for t in ops[i].outputs if t != out]
        inner += [merge.outputs[0]] if copy is not None else []
        if not all(all(u in folded for u in b.uses.get(t, [])) and t not in (b.rec.output, b.rec.loss)
                   for t in inner):
            reason = "a tensor made inside it is used outside"
    if reason is not None:
        note(f"{call.module or 'the model'}: {reason}")
        return None
    b.consumed.update(i for i in folded if i != op.index)
    stmt = {"op": "attention", "q": b.name(call.q), "k": b.name(call.k), "v": b.name(call.v),
            "causal": call.options["is_causal"]}
    if call.mask is not None:
        stmt["attn_mask"] = b.name(call.mask)
    if call.options["enable_gqa"]:
        stmt["enable_gqa"] = True
    if call.options["dropout_p"] > 0:
        stmt["dropout"] = float(call.options["dropout_p"])
    for n in "qkv":
        if call.mergeable.get(n):
            stmt[f"{n}_contiguous"] = True
    if copy is None:
        stmt["heads_first"] = True
    stmt["out"] = b.name(copy.outputs[0] if copy is not None else out)
    return stmt
