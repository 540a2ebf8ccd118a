# checkpoint_regions.py: torch.utils.checkpoint called inside the model's forward, seen while
# recording. Under the real checkpoint the recorder would read each op's saved tensors through
# the checkpoint's saved-tensor hooks, whose unpack re-runs the region (torch 2.13's
# _checkpoint_hook recomputes on any unpack outside backward), and the graph would record the
# region as plain ops that keep their saves. So while recording, the region runs plainly (its
# saves recorded as without checkpointing) and its span of ops is noted with use_reentrant; the
# graph file then marks the module the region is (`checkpoint: non_reentrant | reentrant`,
# docs/graph-format.md) and the planner checkpoints that unit whatever the scenario says.
# The entry points patched are the module globals checkpoint() itself calls (torch 2.13:
# CheckpointFunction and _checkpoint_without_reentrant_generator; 1.13:
# _checkpoint_without_reentrant), so `from torch.utils.checkpoint import checkpoint` made before
# the capture started is seen too, as is checkpoint_sequential.
import contextlib

import torch.utils.checkpoint as torch_checkpoint


class CheckpointCall:
    """One checkpoint call: the ops [start, end) it dispatched, and use_reentrant."""
    __slots__ = ("start", "end", "reentrant", "module")

    def __init__(self, start, reentrant, module):
        self.start, self.end, self.reentrant, self.module = start, start, reentrant, module


class _Regions:
    def __init__(self, recorder):
        self.recorder = recorder
        self.depth = 0  # a checkpoint inside a checkpointed region is part of the outer one

    def _begin(self, reentrant):
        r = self.recorder
        r.resolve_pending()
        self.depth += 1
        return CheckpointCall(len(r.rec.ops), reentrant, r.module_path())

    def _end(self, call):
        r = self.recorder
        r.resolve_pending()
        self.depth -= 1
        call.end = len(r.rec.ops)
        if self.depth == 0 and call.end > call.start:
            r.rec.checkpoint_calls.append(call)

    def reentrant_function(self, original):
        regions = self

        class RecordedCheckpointFunction:
            """CheckpointFunction.apply(function, preserve_rng_state, *args), run plainly."""
            @staticmethod
            def apply(function, preserve_rng_state, *args):
                if not regions.recorder.recording:
                    return original.apply(function, preserve_rng_state, *args)
                call = regions._begin(True)
                try:
                    return function(*args)
                finally:
                    regions._end(call)

        return RecordedCheckpointFunction

    def non_reentrant_generator(self, original):
        regions = self

        def generator(function, *args, **kwargs):
            if not regions.recorder.recording:
                yield from original(function, *args, **kwargs)
                return
            call = regions._begin(False)
            try:
                yield  # checkpoint() runs the function here
            finally:
                regions._end(call)

        return generator

    def non_reentrant_function(self, original):
        regions = self

        def run(function, preserve_rng_state, *args, **kwargs):  # torch 1.13's entry point
            if not regions.recorder.recording:
                return original(function, preserve_rng_state, *args, **kwargs)
            call = regions._begin(False)
            try:
                return function(*args, **kwargs)
            finally:
                regions._end(call)

        return run


@contextlib.contextmanager
def checkpoint_regions(recorder):
    """Patches torch.utils.checkpoint's entry points while the recorder is active."""
    regions = _Regions(recorder)
    patches = {}
    if hasattr(torch_checkpoint, "CheckpointFunction"):
        patches["CheckpointFunction"] = regions.reentrant_function(torch_checkpoint.CheckpointFunction)
    if hasattr(torch_checkpoint, "_checkpoint_without_reentrant_generator"):
        patches["_checkpoint_without_reentrant_generator"] = regions.non_reentrant_generator(
            torch_checkpoint._checkpoint_without_reentrant_generator)
    elif hasattr(torch_checkpoint, "_checkpoint_without_reentrant"):
        patches["_checkpoint_without_reentrant"] = regions.non_reentrant_function(
            torch_checkpoint._checkpoint_without_reentrant)
    originals = {name: getattr(torch_checkpoint, name) for name in patches}
    for name, patched in patches.items():
        setattr(torch_checkpoint, name, patched)
    try:
        yield regions
    finally:
        for name, original in originals.items():
            setattr(torch_checkpoint, name, original)


def checkpoint_options(rec, start, end):
    """The graph file's `checkpoint:` for a module call spanning ops [start, end): set when a
    checkpoint call ran exactly that module."""
    for call in rec.checkpoint_calls:
        if call.start == start and call.end == end:
            return {"checkpoint": "reentrant" if call.reentrant else "non_reentrant"}
    return {}


def unmatched_calls(rec, module_spans):
    """Checkpoint calls that are not one module call (a plain function, several modules): the
    graph file cannot mark them yet, so they are planned without checkpointing."""
    spans = set(module_spans)
    return [c for c in rec.checkpoint_calls if (c.start, c.end) not in spans]
