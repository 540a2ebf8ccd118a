# graph_models.py: the real PyTorch side of a scenario whose model is a captured graph file
# (capture/oomcast_capture.py): the graph file's `# source:` header names the model file it was
# captured from, and capture.py runs that file's model(), batch(**sizes) and loss for real,
# with the same training loop as the built-in families.
import os
import sys

import torch.nn as nn

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "capture"))

import runner  # noqa: E402  (capture/runner.py: loads model files, default loss)


def graph_source(path):
    """The model file a graph file was captured from (its `# source: PATH` header, relative to
    the graph file), or None when the file is not a captured graph."""
    with open(path) as f:
        for line in f:
            if not line.startswith("#"):
                break
            if line.startswith("# source: "):
                return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), line[10:].strip()))
    return None


def compile_scopes(settings):
    """The compile: settings' scope list (empty when nothing is compiled)."""
    if not settings:
        return []
    scope = settings.get("scope", ["model"]) if isinstance(settings, dict) else ["model"]
    return [scope] if isinstance(scope, str) else list(scope)


def compiled(fn, settings):
    """torch.compile(fn) with the scenario's compile: settings (mode, fullgraph, dynamic and the
    partitioner's activation_memory_budget, set for the process as a training script sets it)."""
    import torch
    import torch._functorch.config  # noqa: F401  (activation_memory_budget; not imported by `import torch`)
    settings = settings if isinstance(settings, dict) else {}
    if "activation_memory_budget" in settings:
        torch._functorch.config.activation_memory_budget = float(settings["activation_memory_budget"])
    dynamic = {"false": False, "true": True, "auto": None}.get(str(settings.get("dynamic", "false")).lower(), False)
    kwargs = dict(fullgraph=bool(settings.get("fullgraph", False)), dynamic=dynamic)
    if settings.get("mode", "default") != "default":
        kwargs["mode"] = settings["mode"]
    return torch.compile(fn, **kwargs)


class _WithLoss(nn.Module):
    """model(x, y) -> (output, loss), as the loop calls the built-in families."""

    def __init__(self, user, model, compile_settings=None):
        super().__init__()
        self.inner = model
        self._loss = getattr(user, "loss", None) or runner.default_loss
        if compile_settings:  # the scenario's compile: torch.compile with inductor, as a recipe writes it
            self.inner = compiled(model, compile_settings)
            if "loss" in compile_scopes(compile_settings):
                self._loss = compiled(self._loss, compile_settings)

    def forward(self, x, y=None):
        out = runner._call_model(self.inner, x)
        # job: inference / forward without a loss calls model(x)[0]
        return (out,) if y is None else (out, self._loss(out, y))


def build(source, checkpointing=False, compile_settings=None):
    if checkpointing:
        raise ValueError("checkpointing: the CPU capture of a captured model runs none")
    user = runner.load_model_file(source)
    model = user.model()
    # the capture's parameter names: the wrapper must not appear in them
    wrapped = _WithLoss(user, model, compile_settings)
    wrapped.user = user
    return wrapped


def make_batch(model, batch_size, seq):
    keys = runner.size_keys(model.user)
    sizes = {"batch_size": batch_size}
    for k in keys:
        if k != "batch_size":
            sizes[k] = seq
    return model.user.batch(**sizes)
