# construction.py: what model() allocates and frees before it returns that is not a parameter or
# buffer of the finished model (a template layer nn.TransformerEncoder deep-copies, the untied
# lm_head weight that weight tying replaces, an init's intermediate tensors). The Recorder feeds
# it every tensor the dispatcher makes while model() runs; storages are told apart by identity
# (views share one), and a storage dies when the last tensor object seen on it dies (weakref
# finalizers). The result is the temporaries alive at the construction peak, written into the
# graph file's parameters: list as `construction_temporary:` entries (docs/graph-format.md).
import sys
import weakref

import torch

from recorder import storage_key  # the recorder's notion of storage identity, shared


def _storage_bytes(t):
    try:
        s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        s = getattr(s, "_storage", s)
        return int(s.nbytes())
    except Exception:
        return t.numel() * t.element_size()


def _constructing_module():
    """The class name of the innermost nn.Module whose __init__ is running (for names)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "__init__":
            owner = frame.f_locals.get("self")
            if isinstance(owner, torch.nn.Module):
                return type(owner).__name__
        frame = frame.f_back
    return "model"


class _Storage:
    __slots__ = ("key", "seq", "bytes", "shape", "dtype", "name", "objects", "freed")

    def __init__(self, key, seq, nbytes, shape, dtype, name):
        self.key, self.seq, self.bytes, self.shape, self.dtype, self.name = key, seq, nbytes, shape, dtype, name
        self.objects = 0     # tensor objects seen on it that are still alive
        self.freed = None    # event number when the last one died


class ConstructionTracker:
    """Events of model(): a storage allocated (an op's output on a storage none of its inputs
    has) and freed (the last tensor object on it died)."""

    def __init__(self):
        self.seq = 0
        self.live = {}        # storage key -> _Storage
        self.storages = []    # every allocation, in order
        self.watched = set()  # ids of tensor objects with a finalizer
        self._finalizers = []
        self.active = True

    def observe_op(self, inputs, outputs):
        input_keys = {storage_key(t) for t in inputs}
        for t in inputs:
            self.watch(t)
        for t in outputs:
            key = storage_key(t)
            if key is None:
                continue
            if key not in input_keys and key not in self.live:
                self.seq += 1
                entry = _Storage(key, self.seq, _storage_bytes(t), tuple(t.shape), t.dtype,
                                 f"{_constructing_module()}.tmp{len(self.storages)}")
                self.live[key] = entry
                self.storages.append(entry)
            self.watch(t)

    def name_parameter(self, owner, name, tensor):
        """Module.register_parameter / register_buffer: keeps the tensor watched and names its
        storage after the module's class and attribute."""
        if tensor is None:
            return
        entry = self.live.get(storage_key(tensor))
        if entry is not None:
            entry.name = f"{type(owner).__name__}.{name}.{entry.seq}"
        self.watch(tensor)

    def watch(self, t):
        if not self.active or id(t) in self.watched:
            return
        entry = self.live.get(storage_key(t))
        if entry is None:
            return
        entry.objects += 1
        self.watched.add(id(t))
        self._finalizers.append(weakref.finalize(t, self._died, entry, id(t)))

    def _died(self, entry, object_id):
        self.watched.discard(object_id)
        if not self.active:
            return
        entry.objects -= 1
        if entry.objects == 0 and entry.freed is None:
            self.seq += 1
            entry.freed = self.seq
            if self.live.get(entry.key) is entry:
                del self.live[entry.key]

    def finish(self, parameters, buffers):
        """Called once model() has returned (its locals are gone). The temporaries alive at the peak of live bytes while model() ran, as dicts with
        name, shape, dtype and `after` (how many of `parameters`, in model.parameters() order,
        were allocated before it). Parameters and buffers of the finished model never count
        as freed (a deep copy's Parameter objects are made without the dispatcher)."""
        self.active = False
        for f in self._finalizers:
            f.detach()
        # the latest storage on a final tensor's address is that tensor's (an earlier one there
        # was freed before the address came back)
        final_entry = {}
        for s in self.storages:
            final_entry[s.key] = s
        final = {id(final_entry[k]) for k in (storage_key(t) for t in list(parameters) + list(buffers))
                 if k in final_entry}
        # what is still alive and not a parameter or buffer (a plain tensor attribute) outlives
        # model(): not a temporary
        freed_at = {id(s): s.freed for s in self.storages if id(s) not in final and s.freed is not None}
        events = []
        for s in self.storages:
            events.append((s.seq, s.bytes))
            if id(s) in freed_at:
                events.append((freed_at[id(s)], -s.bytes))
        events.sort()
        live = peak = peak_at = 0
        for seq, delta in events:
            live += delta
            if live > peak:
                peak, peak_at = live, seq
        parameter_seqs = [final_entry[k].seq for k in (storage_key(p) for p in parameters) if k in final_entry]
        temporaries = []
        for s in self.storages:
            if id(s) in freed_at and s.seq <= peak_at < freed_at[id(s)]:
                after = sum(1 for q in parameter_seqs if q < s.seq)
                temporaries.append({"name": s.name, "shape": list(s.shape), "bytes": s.bytes,
                                    "dtype": str(s.dtype).replace("torch.", ""), "after": after})
        return temporaries


class constructing:
    """Context for model(): the recorder's tracker on, nn.Parameter() and
    Module.register_parameter/_buffer watched (a Parameter wraps its data in a new tensor
    object the dispatcher does not make)."""

    def __init__(self, recorder):
        self.recorder = recorder
        self.tracker = ConstructionTracker()

    def __enter__(self):
        tracker = self.tracker
        self._register_parameter = torch.nn.Module.register_parameter
        self._register_buffer = torch.nn.Module.register_buffer
        original_parameter, original_buffer = self._register_parameter, self._register_buffer

        def register_parameter(module, name, param):
            original_parameter(module, name, param)
            tracker.name_parameter(module, name, param)

        def register_buffer(module, name, tensor, *args, **kwargs):
            original_buffer(module, name, tensor, *args, **kwargs)
            tracker.name_parameter(module, name, tensor)

        self._parameter_new = torch.nn.Parameter.__dict__["__new__"]
        original_new = torch.nn.Parameter.__new__

        def parameter_new(cls, *args, **kwargs):
            param = original_new(cls, *args, **kwargs)
            tracker.watch(param)  # while the tensor it wraps is still alive
            return param

        torch.nn.Module.register_parameter = register_parameter
        torch.nn.Module.register_buffer = register_buffer
        torch.nn.Parameter.__new__ = parameter_new
        self.recorder.construction = tracker
        return tracker

    def __exit__(self, *exc):
        torch.nn.Module.register_parameter = self._register_parameter
        torch.nn.Module.register_buffer = self._register_buffer
        torch.nn.Parameter.__new__ = self._parameter_new
        self.recorder.construction = None
        return False
