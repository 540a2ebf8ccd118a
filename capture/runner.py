# runner.py: loads a user's MODEL.py and runs one training step of it (model(), batch(**sizes),
# loss, backward, optionally the user's optimizer step) under the Recorder at given sizes.
import importlib.util
import inspect
import os
import sys
import traceback

import torch
import torch.nn.functional as F

from construction import constructing
from recorder import CaptureError, Recorder, Recording, no_cyclic_gc
from checkpoint_regions import checkpoint_regions
from fused_rnn import fused_rnn_regions
from sdpa import sdpa_regions

SIZE_KEYS = ("batch_size", "seq_len", "image_size")


def load_model_file(path):
    """Imports MODEL.py as a module; checks that it defines model() and batch(). A Hugging Face
    config.json stands for transformers' own class of it (hf_model.py)."""
    if not os.path.isfile(path):
        raise CaptureError(f"{path}: no such model file")
    import hf_model
    if hf_model.is_hf_config(path):
        return hf_model.model_file(path)
    spec = importlib.util.spec_from_file_location("oomcast_user_model", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        raise CaptureError(f"{path}: importing it failed: {_one_line(err)}{_where(err, path)}")
    for fn in ("model", "batch"):
        if not callable(getattr(module, fn, None)):
            raise CaptureError(f"{path}: defines no {fn}() function (a model file needs model() "
                               f"returning the nn.Module and batch(**sizes) returning (inputs, target))")
    return module


def size_keys(user):
    """The scenario size keys batch() takes (its keyword arguments among SIZE_KEYS)."""
    params = inspect.signature(user.batch).parameters
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        declared = getattr(user, "sizes", None) or {}
        return [k for k in SIZE_KEYS if k in declared] or ["batch_size"]
    return [k for k in SIZE_KEYS if k in params]


def _one_line(err):
    if isinstance(err, MemoryError):
        return "MemoryError (more memory than the capture may use: the machine's RAM)"
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}".rstrip(": ")


_LIBRARY_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                      for m in (torch, os) if getattr(m, "__file__", None)) + (os.path.dirname(os.path.abspath(__file__)) + os.sep,)


def _where(err, path):
    """' (MODEL.py line N)' for the innermost frame of the user's code: the model file's, else
    the innermost frame outside torch, the standard library and the capture (a module the model
    file imports, or a package's model class such as transformers')."""
    frames = traceback.extract_tb(err.__traceback__)
    own = [f for f in frames if os.path.abspath(f.filename) == os.path.abspath(path)]
    if own:
        return f" ({os.path.basename(path)} line {own[-1].lineno})"
    user = [f for f in frames if not os.path.abspath(f.filename).startswith(_LIBRARY_DIRS)]
    return f" ({user[-1].filename} line {user[-1].lineno})" if user else ""


def _located(err, path):
    """A CaptureError's text with the user's line, unless the recorder already named it."""
    return f"{err}" if f"{os.path.basename(path)} line " in str(err) else f"{err}{_where(err, path)}"


def default_loss(output, target):
    """Cross-entropy over the last dimension."""
    return F.cross_entropy(output.reshape(-1, output.shape[-1]), target.reshape(-1))


def _call_model(model, inputs):
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, (list, tuple)):
        return model(*inputs)
    return model(inputs)


def _first_tensor(x):
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, (list, tuple)):
        for v in x:
            t = _first_tensor(v)
            if t is not None:
                return t
    if isinstance(x, dict):
        for v in x.values():
            t = _first_tensor(v)
            if t is not None:
                return t
    return None


def _named_tensors(prefix, x):
    if isinstance(x, torch.Tensor):
        return [(prefix, x)]
    out = []
    if isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            out += _named_tensors(f"{prefix}.{i}", v)
    elif isinstance(x, dict):
        for k, v in x.items():
            out += _named_tensors(f"{prefix}.{k}", v)
    return out


def import_lazy_torch_modules():
    """torch 2.x imports torch._dynamo lazily, from inside torch.optim.Optimizer.__init__ (its
    _disable_dynamo wrapper); the import runs tensor ops at module level, which under the
    Recorder would be recorded as the model's (and read values). Importing it first keeps the
    recording to the user's code. torch 1.13 has no torch._dynamo."""
    if importlib.util.find_spec("torch._dynamo") is not None:
        importlib.import_module("torch._dynamo")


# Dispatcher ops one run may take before the capture gives up on it as a loop that never ends
# (the 80-layer 70B-shaped decoder takes about 8,000).
MAX_OPS = 2_000_000


def record_lifetimes(user, path, sizes, base, max_ops=MAX_OPS):
    """Runs the forward and loss at `sizes` once more under torch.no_grad() and, where it
    dispatches the same ops as `base` (the training recording at the same sizes), sets each
    base tensor's no_grad_dies_at: when the program's own variable let go of it. Returns
    whether the two runs matched (a model that branches on grad mode: nothing is set)."""
    try:
        with torch.no_grad():
            other = record(user, path, sizes, max_ops=max_ops, backward=False)
    except Exception:
        return False
    forward = [op for op in base.ops if op.phase in ("forward", "loss")]
    if len(forward) != len(other.ops) or any(a.op != b.op or len(a.outputs) != len(b.outputs)
                                            for a, b in zip(forward, other.ops)):
        return False
    for a, b in zip(forward, other.ops):
        for mine, theirs in zip(a.outputs, b.outputs):
            died = other.tensors[theirs].dies_at
            if died is not None and died[0] in ("forward", "loss") and base.tensors[mine].producer == a.index:
                base.tensors[mine].no_grad_dies_at = died
    return True


def record(user, path, sizes, run_optimizer=True, max_ops=MAX_OPS, backward=True):
    """One recorded training step at `sizes` (without the backward: its forward and loss);
    returns the Recording."""
    import_lazy_torch_modules()
    rec = Recording()
    mode = Recorder(rec)
    mode.model_path, mode.sizes, mode.max_ops = path, dict(sizes), max_ops
    mode.stated_shape = getattr(user, "data_dependent_shape", None)
    torch.manual_seed(0)
    with no_cyclic_gc(), mode, sdpa_regions(mode), checkpoint_regions(mode), fused_rnn_regions(mode):
        with constructing(mode) as construction:
            try:
                model = user.model()
            except CaptureError as err:
                raise CaptureError(f"{path}: model(): {_located(err, path)}")
            except Exception as err:
                raise CaptureError(f"{path}: model() failed: {_one_line(err)}{_where(err, path)}")
        if not isinstance(model, torch.nn.Module):
            raise CaptureError(f"{path}: model() returned {type(model).__name__}, not an nn.Module")
        rec.construction_temporaries = construction.finish(list(model.parameters()), list(model.buffers()))
        model.train()
        _register_state(mode, model)
        try:
            inputs, target = user.batch(**sizes)
        except CaptureError as err:
            raise CaptureError(f"{path}: batch({_kw(sizes)}): {_located(err, path)}")
        except Exception as err:
            raise CaptureError(f"{path}: batch({_kw(sizes)}) failed: {_one_line(err)}{_where(err, path)}")
        for name, t in _named_tensors("inputs", inputs) + _named_tensors("target", target):
            tid = mode.tensor_id(t)
            if tid in rec.inputs:
                continue  # the same tensor in inputs and target: one input
            rec.tensors[tid].kind, rec.tensors[tid].name = "input", name
            rec.inputs.append(tid)
        handles = mode.attach(model)
        loss_fn = getattr(user, "loss", None) or default_loss
        mode.recording = True
        try:
            if True:
                mode.phase = "forward"
                try:
                    output = _call_model(model, inputs)
                except CaptureError as err:
                    raise CaptureError(f"{path}: {_located(err, path)}")
                except Exception as err:
                    raise CaptureError(f"{path}: the forward failed at {_kw(sizes)}"
                                       f"{' in module ' + mode.module_path() if mode.module_path() else ''}: "
                                       f"{_one_line(err)}{_where(err, path)}")
                mode.resolve_pending()
                out_t = _first_tensor(output)
                if out_t is None:
                    raise CaptureError(f"{path}: the model's forward returned no tensor")
                rec.output = mode.tensor_id(out_t)
                mode.phase = "loss"
                mode.modules.append("loss")
                try:
                    loss = loss_fn(output, target)
                except CaptureError as err:
                    raise CaptureError(f"{path}: the loss: {_located(err, path)}")
                except Exception as err:
                    raise CaptureError(f"{path}: the loss failed: {_one_line(err)}{_where(err, path)}")
                mode.modules.pop()
                mode.resolve_pending()
                if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
                    raise CaptureError(f"{path}: the loss is not a one-element tensor")
                rec.loss = mode.tensor_id(loss)
            mode.recording = False
            mode.phase = "backward"
            if not backward:
                return rec
            try:
                loss.backward()
            except CaptureError:
                raise
            except Exception as err:
                raise CaptureError(f"{path}: the backward failed: {_one_line(err)}{_where(err, path)}")
            missing = [rec.parameter_names[p][0] for p in rec.parameters
                       if rec.tensors[p].requires_grad and mode.obj(p).grad is None]
            rec.params_without_grad = missing
        finally:
            for h in handles:
                h.remove()
    return rec


def _kw(sizes):
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


def _register_state(mode, model):
    """Parameters in model.parameters() order (tied ones once, with every name they have) and
    persistent buffers."""
    rec = mode.rec
    for mod_name, module in model.named_modules(remove_duplicate=False) \
            if "remove_duplicate" in inspect.signature(model.named_modules).parameters \
            else model.named_modules():
        prefix = mod_name + "." if mod_name else ""
        for pname, p in module._parameters.items():
            if p is None:
                continue
            tid = mode.lookup(p)
            if tid is None:
                tid = mode.register(p, "parameter")
            rec.parameter_names.setdefault(tid, [])
            if prefix + pname not in rec.parameter_names[tid]:
                rec.parameter_names[tid].append(prefix + pname)
        non_persistent = getattr(module, "_non_persistent_buffers_set", set())
        for bname, b in module._buffers.items():
            if b is None:
                continue
            tid = mode.lookup(b)
            if tid is None:
                tid = mode.register(b, "buffer")
            rec.tensors[tid].kind = "buffer" if bname not in non_persistent else "buffer_nonpersistent"
            rec.buffer_names.setdefault(tid, [])
            if prefix + bname not in rec.buffer_names[tid]:
                rec.buffer_names[tid].append(prefix + bname)
    order = [mode.lookup(p) for p in model.parameters()]
    rec.parameters = order
    for tid in order:
        rec.tensors[tid].name = rec.parameter_names[tid][0]
    rec.buffers = [mode.lookup(b) for b in model.buffers()]
    for tid in rec.buffers:
        rec.tensors[tid].name = rec.buffer_names[tid][0]


# torch.optim (and bitsandbytes) classes the planner models, by class name.
_OPTIMIZER_TYPES = {"SGD": "sgd", "Adam": "adam", "AdamW": "adamw", "Adafactor": "adafactor",
                    "AdamW8bit": "adamw8bit", "PagedAdamW8bit": "adamw8bit"}


def read_optimizer(user, path):
    """(section, note): the model file's optimizer(parameters) as a graph file's `optimizer:`
    mapping (type, impl, momentum, amsgrad as the scenario names them), or None with a note
    saying why not; (None, None) when the file defines no optimizer(). Built on the meta device
    (the constructor allocates no state)."""
    make = getattr(user, "optimizer", None)
    if not callable(make):
        return None, None
    torch.manual_seed(0)
    with no_cyclic_gc(), Recorder(Recording()):
        try:
            opt = make(user.model().parameters())
        except CaptureError:
            raise
        except Exception as err:
            raise CaptureError(f"{path}: optimizer(parameters) failed: {_one_line(err)}{_where(err, path)}")
    kind = _OPTIMIZER_TYPES.get(type(opt).__name__)
    if kind is None:
        return None, (f"optimizer(): {type(opt).__module__}.{type(opt).__name__} is not one oomcast plans "
                      f"(sgd, adam, adamw, adafactor, adamw8bit); the scenario's optimizer applies")
    groups = getattr(opt, "param_groups", None) or [{}]
    settings = dict(getattr(opt, "defaults", {}) or {})
    settings.update(groups[0])
    section = {"type": kind}
    if kind != "adamw8bit":
        if settings.get("fused"):
            section["impl"] = "fused"
        elif settings.get("foreach") is True:
            section["impl"] = "foreach"
        elif settings.get("foreach") is False:
            section["impl"] = "single_tensor"
        # foreach=None: torch's default for the device, which the scenario's device decides
    if kind == "sgd" and settings.get("momentum"):
        section["momentum"] = float(settings["momentum"])
    if kind in ("adam", "adamw") and settings.get("amsgrad"):
        section["amsgrad"] = True
    note = None
    if len(groups) > 1:
        note = f"optimizer(): {len(groups)} parameter groups; the first group's settings are written"
    return section, note
