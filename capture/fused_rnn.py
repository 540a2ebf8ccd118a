# fused_rnn.py: nn.LSTM as the CPU runs it. On the meta device the capture runs on, torch.lstm
# decomposes into one set of ops per time step (a program that saves every step's gates); an
# fp32 CPU run takes oneDNN's fused LSTM instead (torch 2.13 RNN.cpp use_mkldnn, then
# mkldnn/RNN.cpp mkldnn_rnn): the input transposed to [T, B, I] and made contiguous, one
# aten::mkldnn_rnn_layer per layer and direction (dropout between layers), hy and cy stacked.
# A TorchFunctionMode replays that program at the dispatcher on the meta tensors, so the
# recording holds what the real run allocates and autograd saves (MkldnnRnnLayerBackward0:
# input, weights, hx, cx, output, hy, cy and oneDNN's workspace). The meta kernel returns an
# empty workspace; layer_statement() writes its size and the kernel's temporaries, measured
# under torch 2.13 with the allocation hook (validate/alloc_hook.c) over T 1-33, B 1-8,
# input 8-300, hidden 16-300:
#   workspace  oneDNN's arrays, each from a 4096-byte boundary: gates T*B*G*4, ht T*B*ld(H)*4,
#              three state arrays 2*(T+1)*B*ld(max(I,H))*4 and two 2*(T+1)*B*H*4 (exact on all
#              384 points); G = ld(4H), ld(d) = d rounded up to 16, plus 16 when a multiple of 256
#   forward    the combined bias 4H*4, the weights reordered I*G*4 and H*G*4, and a scratchpad
#              T*B*G*4 + 2*B*G + 12856 (within 5 KB on every point with T, B > 1)
#   backward   zero gradients of hy and cy, the bias, every input's gradient (the kernel computes
#              all of them), the reordered weights and the scratchpad again
# GRU and RNN have no oneDNN path on the CPU (their per-step ops are what it runs), nor a packed
# sequence, projections (proj_size) or a non-fp32 input: those calls run as recorded before.
import contextlib

import torch

try:
    from torch.overrides import TorchFunctionMode
except ImportError:  # pragma: no cover
    TorchFunctionMode = None

_LSTM = getattr(torch, "lstm", None)
_LAYER = getattr(getattr(torch.ops.aten, "mkldnn_rnn_layer", None), "default", None)
_LSTM_MODE = 2  # ideep::rnn_kind::LSTM
_PAGE = 4096


def _fused_lstm(args, kwargs):
    """The CPU's fused LSTM program for torch.lstm(input, hx, params, has_biases, num_layers,
    dropout, train, bidirectional, batch_first), or None when the CPU would not take it."""
    if kwargs or len(args) != 9 or not isinstance(args[0], torch.Tensor):
        return None
    x, hx, params, has_biases, layers, dropout, train, bidirectional, batch_first = args
    per_layer = 4 if has_biases else 2
    directions = 2 if bidirectional else 1
    if x.dtype != torch.float32 or x.numel() == 0 or len(hx) != 2 or \
            len(params) != per_layer * layers * directions:
        return None
    h0, c0 = hx
    if h0.shape[-1] != c0.shape[-1] or params[0].shape[0] != 4 * h0.shape[-1]:
        return None  # proj_size: hy is smaller than the cell
    hidden = h0.shape[-1]
    layer_input = (x.transpose(0, 1) if batch_first else x).contiguous()
    h0, c0 = h0.contiguous(), c0.contiguous()
    hys, cys = [], []
    for layer in range(layers):
        outs = []
        for direction in range(directions):
            index = layer * directions + direction
            w = params[index * per_layer:(index + 1) * per_layer]
            b_ih = w[2] if has_biases else torch.zeros(w[0].shape, dtype=w[0].dtype, device=w[0].device)
            b_hh = w[3] if has_biases else torch.zeros(w[1].shape, dtype=w[1].dtype, device=w[1].device)
            out, hy, cy, _workspace = _LAYER(layer_input, w[0], w[1], b_ih, b_hh, h0[index], c0[index],
                                             direction > 0, [], _LSTM_MODE, hidden, layers, has_biases,
                                             bidirectional, batch_first, train)
            outs.append(out)
            hys.append(hy)
            cys.append(cy)
        layer_input = outs[0] if directions == 1 else torch.cat(outs, -1)
        if dropout and train and layer < layers - 1:
            layer_input = torch.dropout(layer_input, dropout, True)
    output = layer_input.transpose(0, 1) if batch_first else layer_input
    return output, torch.stack(hys, 0), torch.stack(cys, 0)


if TorchFunctionMode is not None and _LSTM is not None and _LAYER is not None:
    class _FusedRnnMode(TorchFunctionMode):
        def __init__(self, recorder):
            super().__init__()
            self.recorder = recorder

        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func is _LSTM and self.recorder.recording:
                fused = _fused_lstm(args, kwargs or {})
                if fused is not None:
                    return fused
            return func(*args, **(kwargs or {}))

    def fused_rnn_regions(recorder):
        return _FusedRnnMode(recorder)
else:
    def fused_rnn_regions(recorder):
        return contextlib.nullcontext()


# ---- the graph side

def _ld(d):
    """oneDNN's leading dimension for d floats (rnn_utils get_good_ld): 64-byte aligned, and off
    multiples of 256 (4K aliasing)."""
    ld = -(-d // 16) * 16
    return ld + 16 if ld % 256 == 0 else ld


def _page(expr):
    return f"(({expr})+{_PAGE - 1})/{_PAGE}*{_PAGE}"


def _term(expr):
    return str(expr) if isinstance(expr, int) or str(expr).isidentifier() or str(expr).isdigit() else f"({expr})"


def layer_statement(b, op, stmt):
    """Completes the generic statement of an aten::mkldnn_rnn_layer: the workspace's bytes and
    the kernel's forward temporaries and backward program (above), in the sizes' expressions of
    the input's [T, B, I] shape."""
    x, w_ih, w_hh, b_ih, b_hh, hx, cx = op.inputs[:7]
    steps, batch, features = b.shape(x)
    hidden = b.t(hx).shape[-1]
    if not all(isinstance(d, int) for d in (features,)):
        return stmt
    T, B = _term(steps), _term(batch)
    gates, ld_max = _ld(4 * hidden), _ld(max(features, hidden))
    states = f"2*({T}+1)*{B}"
    workspace = " + ".join([_page(f"{T}*{B}*{gates * 4}"), _page(f"{T}*{B}*{_ld(hidden) * 4}")]
                           + [_page(f"{states}*{ld_max * 4}")] * 3 + [_page(f"{states}*{hidden * 4}")] * 2)
    stmt["outputs"][3]["shape"] = [workspace]
    stmt["outputs"][3]["dtype"] = "uint8"
    scratch = f"{T}*{B}*{gates * 4}+{B}*{2 * gates}+12856"
    bias, w_in, w_rec = 4 * hidden * 4, features * gates * 4, hidden * gates * 4
    stmt["forward_temporaries"] = [
        {"name": "bias", "bytes": bias, "after_outputs": True},
        {"name": "weight_ih_reordered", "bytes": w_in, "after_outputs": True},
        {"name": "weight_hh_reordered", "bytes": w_rec, "after_outputs": True},
        {"name": "scratchpad", "bytes": scratch, "after_outputs": True}]
    grads = stmt.pop("grads")
    names = stmt["inputs"]
    state = f"{B}*{hidden * 4}"
    program = [{"alloc": "grad_hy", "bytes": state}, {"alloc": "grad_cy", "bytes": state},
               {"alloc": "bias", "bytes": bias}]
    unused = []
    for name, rule in zip(names, grads):
        if rule == "new":
            program.append({"grad": name})
        else:  # computed by the kernel whether or not autograd wants it
            shape = b.shape_of_name(name)
            program.append({"alloc": f"grad_{len(unused)}", "shape": shape, "dtype": "float32"})
            unused.append(f"grad_{len(unused)}")
    program += [{"alloc": "weight_ih_reordered", "bytes": w_in}, {"alloc": "weight_hh_reordered", "bytes": w_rec},
                {"alloc": "scratchpad", "bytes": scratch}, {"free": "scratchpad"},
                {"free": "weight_hh_reordered"}, {"free": "weight_ih_reordered"},
                {"free": "grad_hy"}, {"free": "grad_cy"}, {"free": "bias"}]
    program += [{"free": n} for n in unused]
    stmt["backward_program"] = program
    return stmt
