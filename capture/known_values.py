# known_values.py: the values of small tensors the model computes from constants alone
# (torch.arange, ones, full, tensor literals and ops on them), kept on the CPU beside their meta
# twins, so that a model's control flow on such a value can run under the capture. Real code
# does this: transformers checks `(position_ids diff != 1).cumsum(-1)[:, -1] == 0).all()` for
# packed sequences, CLIP pools at `input_ids.argmax(-1)` of an arange row index, masks are
# built with triu and compared. None of these depends on the batch's values, so the graph
# does not either. Random factories (randint, randn: the batch) and anything computed from
# parameters or inputs stay unknown, and reads of them are refused as data-dependent.
import weakref

import torch
from torch.utils._pytree import tree_flatten, tree_map

# Beyond this many elements a tensor is not a control-flow value (a weight, an activation).
LIMIT = 1 << 16
CPU = torch.device("cpu")


def _nondeterministic(func):
    tags = getattr(func, "tags", None) or []
    seeded = getattr(getattr(torch, "Tag", None), "nondeterministic_seeded", None)
    return seeded is not None and seeded in tags


class KnownValues:
    """Meta tensor -> its CPU value, for tensors computed from constants only."""

    def __init__(self):
        self.values = {}  # id(meta tensor) -> (weak reference to it, CPU value); by identity

    def value_of(self, t):
        entry = self.values.get(id(t))
        return entry[1] if entry is not None and entry[0]() is t else None

    def _set(self, t, value):
        key = id(t)
        self.values[key] = (weakref.ref(t, lambda _ref: self.values.pop(key, None)), value)

    def all_known(self, args, kwargs):
        """The CPU twins of args and kwargs, or None when a tensor among them is unknown."""
        tensors = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        if any(self.value_of(t) is None for t in tensors):
            return None
        swap = lambda x: self.value_of(x) if isinstance(x, torch.Tensor) else x  # noqa: E731
        cpu_kwargs = {k: tree_map(swap, v) for k, v in kwargs.items()}
        if "device" in cpu_kwargs:
            cpu_kwargs["device"] = CPU
        return tree_map(swap, tuple(args)), cpu_kwargs

    def evaluate(self, func, args, kwargs, meta_result=None):
        """The op's result on the CPU twins, or None when an input is unknown, the op is random
        or the result is too large to be a control-flow value. meta_result, the op's result on
        the meta device when known, says its size before anything runs on the CPU: a factory
        asked for a weight (torch.zeros(16384, 16384)) must not be materialised to find out."""
        if _nondeterministic(func):
            return None
        if meta_result is not None and sum(o.numel() for o in tree_flatten(meta_result)[0]
                                           if isinstance(o, torch.Tensor)) > LIMIT:
            return None
        known = self.all_known(args, kwargs)
        if known is None:
            return None
        cpu_args, cpu_kwargs = known
        if not any(isinstance(a, torch.Tensor) for a in tree_flatten((cpu_args, cpu_kwargs))[0]) \
                and "device" not in kwargs and "dtype" not in kwargs:
            return None  # no tensor in and no factory: nothing to evaluate
        try:
            result = func(*cpu_args, **cpu_kwargs)
        except Exception:
            return None
        outs = [o for o in tree_flatten(result)[0] if isinstance(o, torch.Tensor)]
        if not outs or sum(o.numel() for o in outs) > LIMIT:
            return None
        return result

    def remember(self, meta_result, cpu_result):
        metas = tree_flatten(meta_result)[0]
        cpus = tree_flatten(cpu_result)[0]
        for m, c in zip(metas, cpus):
            if isinstance(m, torch.Tensor) and isinstance(c, torch.Tensor):
                self._set(m, c)

    def forget_written(self, schema, args, kwargs):
        """An op with an unknown input that writes into a known tensor makes its value unknown
        (and that of every known tensor sharing its CPU storage)."""
        for i, a in enumerate(schema.arguments):
            if a.alias_info is None or not a.alias_info.is_write:
                continue
            value = args[i] if i < len(args) else kwargs.get(a.name)
            for t in tree_flatten(value)[0]:
                twin = self.value_of(t) if isinstance(t, torch.Tensor) else None
                if twin is None:
                    continue
                storage = twin.untyped_storage().data_ptr()
                for key, (_ref, other) in list(self.values.items()):
                    if other.untyped_storage().data_ptr() == storage:
                        self.values.pop(key, None)
