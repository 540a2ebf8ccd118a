# value_shapes.py: ops whose result's size depends on tensor values (nonzero, a boolean-mask
# index, masked_select, unique, repeat_interleave by a computed tensor). A graph file cannot
# express such a size, but the user often knows it: a top-k router's capacity, a fixed mask's
# count. The model file states it with
#
#     def data_dependent_shape(op, inputs, sizes, line):
#         # op: "nonzero", "index", "masked_select", ...; inputs: the op's tensor input shapes;
#         # sizes: this run's {"batch_size": ..., "seq_len": ...}; line: the model file's line
#         return (capacity(sizes), 1)        # the result's shape, or a list, one per output
#
# which the capture calls at every size it runs (so the size is fitted like any other shape);
# returning None, or no such function, refuses the op with the file, line and this advice.
import os
import sys

import torch

# Outputs that are positions (int64) whatever the input's dtype; others follow the first input.
_INDEX_RESULTS = {"aten::nonzero": [torch.int64], "aten::argwhere": [torch.int64],
                  "aten::_unique2": [None, torch.int64, torch.int64],
                  "aten::unique_dim": [None, torch.int64, torch.int64],
                  "aten::unique_consecutive": [None, torch.int64, torch.int64],
                  "aten::repeat_interleave": [None]}

ADVICE = ("define data_dependent_shape(op, inputs, sizes, line) in the model file returning the "
          "result's shape (capture/README.md, 'Value-dependent shapes'), or compute it from the "
          "sizes instead of tensor values")
READ_ADVICE = ("a Python value read from a tensor cannot follow the sizes: compute it from the "
               "sizes (batch_size, seq_len, image_size) or from constants instead")


def user_line(model_path):
    """The innermost line of the model file on the current Python stack, or None."""
    if not model_path:
        return None
    target = os.path.abspath(model_path)
    frame = sys._getframe(1)
    while frame is not None:
        if os.path.abspath(frame.f_code.co_filename) == target:
            return frame.f_lineno
        frame = frame.f_back
    return None


def stated_result(hook, func, name, args, kwargs, sizes, line, meta):
    """Meta tensors shaped as the user's data_dependent_shape() says, or None when it has no
    answer. The dtypes follow the op (positions are int64; values keep the input's dtype)."""
    if hook is None:
        return None
    tensors = [a for a in _flat(args, kwargs) if isinstance(a, torch.Tensor)]
    shapes = hook(name.split("::")[-1], [tuple(t.shape) for t in tensors], dict(sizes or {}), line)
    if shapes is None:
        return None
    returns = [r for r in func._schema.returns]
    if shapes and all(isinstance(d, int) for d in shapes):
        shapes = [shapes]
    shapes = [tuple(int(d) for d in s) for s in shapes]
    if len(shapes) != len(returns):
        raise ValueError(f"data_dependent_shape() gave {len(shapes)} shapes for {name}, which has "
                         f"{len(returns)} results")
    dtypes = _INDEX_RESULTS.get(name, [None] * len(returns))
    first = tensors[0].dtype if tensors else torch.float32
    outs = [torch.empty(s, dtype=(d or first), device=meta) for s, d in zip(shapes, dtypes + [None] * len(shapes))]
    return outs[0] if len(outs) == 1 else tuple(outs)


def _flat(args, kwargs):
    from torch.utils._pytree import tree_flatten
    return tree_flatten((args, kwargs))[0]
