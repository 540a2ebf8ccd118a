"""oomcast.capture(model, batch=...): the layer graph of a live nn.Module, captured in this
process by capture/oomcast_capture.py (imported, not copied; in a wheel it is oomcast/_capture).

The module is copied onto the meta device first (parameters and buffers as meta tensors of the
same shapes, dtypes and requires_grad, tied ones still tied), so its real weights are neither
read, copied nor given a .grad; the capture runs the copy's forward, loss and backward at three
batch sizes, exactly as it runs a model file's model().
"""
from __future__ import annotations

import copy
import itertools
import os
import types
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

_CAPTURE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_capture")


def _capture_module() -> types.ModuleType:
    """capture/oomcast_capture.py (it puts its own folder on sys.path for its siblings)."""
    import importlib.util
    import sys
    loaded = sys.modules.get("oomcast_capture")
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location("oomcast_capture", os.path.join(_CAPTURE_DIR, "oomcast_capture.py"))
    assert spec is not None and spec.loader is not None, _CAPTURE_DIR
    module = importlib.util.module_from_spec(spec)
    sys.modules["oomcast_capture"] = module
    spec.loader.exec_module(module)
    return module


class CaptureError(ValueError):
    """The model could not be captured (its forward failed, a data-dependent op, ...)."""


class Graph:
    """A captured layer graph (docs/graph-format.md). Use it as ``model:`` of a scenario dict
    (it is written to a file when planned) or ``.save(path)`` it."""

    def __init__(self, document: Dict[str, Any], summary: Dict[str, Any], source: str) -> None:
        self.document = document
        self.summary = summary
        self.source = source
        self._saved: Optional[str] = None

    def text(self) -> str:
        """The graph file's YAML, as `oomcast_capture.py -o` writes it (without its header)."""
        import yaml_emit  # capture/yaml_emit.py, on sys.path once the capture is imported
        return str(yaml_emit.dump(self.document, [f"oomcast graph file captured from {self.source} by oomcast.capture()"]))

    def save(self, path: str) -> str:
        with open(path, "w") as handle:
            handle.write(self.text())
        return path

    def saved_path(self) -> str:
        """A file holding the graph (a temporary one, written once), for a scenario's model:."""
        if self._saved is None:
            import tempfile  # here, not at import: `import oomcast` stays light
            folder = tempfile.mkdtemp(prefix="oomcast-graph-")
            self._saved = self.save(os.path.join(folder, f"{self.document.get('name', 'model')}.graph.yaml"))
        return self._saved

    def __repr__(self) -> str:
        return f"Graph({self.document.get('name')!r}, {self.summary.get('parameters')} parameters, " \
               f"{self.summary.get('ops')} ops)"


def _meta_copy(model: Any) -> Any:
    """A copy of `model` whose parameters and buffers are meta tensors; the original untouched."""
    import torch
    memo: Dict[int, Any] = {}
    for tensor in itertools.chain(model.parameters(), model.buffers()):
        twin = torch.empty_like(tensor, device="meta")
        if isinstance(tensor, torch.nn.Parameter):
            twin = torch.nn.Parameter(twin, requires_grad=tensor.requires_grad)
        memo[id(tensor)] = twin
    return copy.deepcopy(model, memo)


def _example_batch(example: Sequence[Any]) -> Callable[..., Any]:
    """batch(batch_size) from one example (inputs, target): every tensor's first dimension
    becomes batch_size (zeros of the same dtype: valid token ids and class indices)."""
    import torch

    def resize(value: Any, batch_size: int) -> Any:
        if isinstance(value, torch.Tensor):
            return torch.zeros((batch_size,) + tuple(value.shape[1:]), dtype=value.dtype)
        if isinstance(value, (list, tuple)):
            return type(value)(resize(v, batch_size) for v in value)
        if isinstance(value, dict):
            return {k: resize(v, batch_size) for k, v in value.items()}
        return value

    inputs, target = example

    def batch(batch_size: int) -> Any:
        return resize(inputs, batch_size), resize(target, batch_size)
    return batch


def _optimizer_factory(optimizer: Any) -> Optional[Callable[..., Any]]:
    """optimizer(parameters) from an optimizer object (its class and defaults) or a factory."""
    if optimizer is None or callable(optimizer) and not hasattr(optimizer, "param_groups"):
        factory: Optional[Callable[..., Any]] = optimizer
        return factory
    import inspect
    kind = type(optimizer)
    # defaults may hold settings the constructor does not take (AdamW's decoupled_weight_decay)
    accepted = inspect.signature(kind.__init__).parameters
    defaults = {k: v for k, v in dict(getattr(optimizer, "defaults", {})).items() if k in accepted}
    return lambda parameters: kind(parameters, **defaults)


def capture(model: Any, batch: Union[Callable[..., Any], Sequence[Any]], loss: Optional[Callable[..., Any]] = None,
            optimizer: Any = None, sizes: Optional[Dict[str, List[int]]] = None, repeats: bool = True,
            name: Optional[str] = None) -> Graph:
    """Captures a live ``torch.nn.Module`` as a layer graph, on meta tensors.

    ``batch`` is ``batch(batch_size, [seq_len | image_size])`` returning ``(inputs, target)`` as
    in a model file (capture/README.md), or one example ``(inputs, target)`` whose first
    dimension is the batch; ``loss(output, target)`` defaults to cross-entropy over the last
    dimension; ``optimizer`` (an optimizer object or ``optimizer(parameters)``) is written as the
    graph's ``optimizer:``; ``sizes`` the three values each size is captured at.
    """
    capture_module = _capture_module()
    from recorder import CaptureError as CoreCaptureError  # capture/recorder.py
    template = _meta_copy(model)
    user = types.SimpleNamespace(model=lambda: copy.deepcopy(template),
                                 batch=batch if callable(batch) else _example_batch(batch))
    if loss is not None:
        user.loss = loss
    make_optimizer = _optimizer_factory(optimizer)
    if make_optimizer is not None:
        user.optimizer = make_optimizer
    label = name or type(model).__name__
    try:
        document, summary = capture_module.capture(label, sizes or {}, repeats=repeats, user=user)
    except CoreCaptureError as error:
        raise CaptureError(str(error)) from None
    return Graph(document, summary, label)
