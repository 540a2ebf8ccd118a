# recorder.py: runs one forward + loss + backward of a user's model under a TorchDispatchMode
# and records, at the dispatcher level (below autograd), every op: its inputs and outputs
# (shape, dtype, which storage they alias), the module it ran in, and what autograd saved for
# it (read back from the outputs' grad_fn through saved-tensor hooks). Tensors live on the meta
# device: every factory call is redirected there whatever `device=` says, so a 4096-wide model
# needs no real memory; the few ops torch has no meta kernel for run on zero-filled CPU copies.
import contextlib
import weakref

import known_values
import torch
import value_shapes
from torch.utils._python_dispatch import TorchDispatchMode

try:  # torch >= 1.13 keeps the pytree helpers here; they are stable across 1.13 and 2.x
    from torch.utils._pytree import tree_flatten, tree_map
except ImportError:  # pragma: no cover
    raise

META = torch.device("meta")


class CaptureError(Exception):
    """A problem with the user's model file or model; printed as one line, exit code 2."""


# Ops whose output shape (or a Python value) depends on the tensors' contents. Tag
# dynamic_output_shape exists from 1.13 on; the scalar reads have no tag in 1.13.
_VALUE_READS = {"aten::_local_scalar_dense", "aten::item", "aten::is_nonzero", "aten::equal",
                "aten::allclose"}


_SAVED_ATTRS = {}  # grad_fn class -> its _saved_* attribute names


def _op_name(func):
    return str(func.overloadpacket._qualified_op_name) if hasattr(func.overloadpacket, "_qualified_op_name") \
        else "aten::" + func.overloadpacket.__name__


def _overload(func):
    return getattr(func, "_overloadname", None) or str(func).rsplit(".", 1)[-1]


_SAVES_DISPATCH_DETACH = None


def saves_dispatch_detach():
    """Whether this torch dispatches a detach when autograd saves an op's output: torch 1.13
    does (SavedVariable of an output); later versions may not. Probed once, on a meta tensor,
    instead of keyed on the version string."""
    global _SAVES_DISPATCH_DETACH
    if _SAVES_DISPATCH_DETACH is None:
        seen = []

        class Probe(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                seen.append(_op_name(func))
                return func(*args, **(kwargs or {}))

        leaf = torch.ones(2, device=META, requires_grad=True)
        with Probe():
            leaf.exp()  # exp saves its result
        _SAVES_DISPATCH_DETACH = seen[-1:] == ["aten::detach"]
    return _SAVES_DISPATCH_DETACH


# Indexing ops tagged dynamic_output_shape because a bool (or uint8) mask index has as many
# results as it has true values; with integer index tensors only, the result's shape is the
# indices' broadcast shape with the indexed dimensions replaced, known without any value.
_INDEXING = {"aten::index", "aten::index_put", "aten::index_put_", "aten::_index_put_impl_",
             "aten::_unsafe_index", "aten::_unsafe_index_put"}


def _has_mask_index(args, kwargs):
    indices = args[1] if len(args) > 1 else kwargs.get("indices")
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices or [])


def _is_data_dependent(func, name, args=(), kwargs=None):
    if name in _VALUE_READS:
        return True
    if name in _INDEXING:
        return _has_mask_index(args, kwargs or {})
    if name == "aten::repeat_interleave" and (kwargs or {}).get("output_size") is not None:
        return False  # the caller stated the result's length
    tags = getattr(func, "tags", None) or []
    dyn = getattr(torch, "Tag", None)
    return dyn is not None and getattr(dyn, "dynamic_output_shape", None) in tags


# The most an op without a meta kernel may have in inputs to run on zero-filled CPU copies: the
# capture materialises nothing the size of a model's weights.
_CPU_FALLBACK_BYTES = 1 << 30


def _grouped_mm_meta(args, kwargs):
    """aten::_grouped_mm's result on meta tensors: torch 2.13's meta kernel accepts bf16 only
    (the CUDA kernel's rule) while its CPU kernel, which transformers' MoE experts run, takes
    any float dtype. The shapes by operand ranks (offs has one entry per group):
    2-D x 3-D [M, K] x [G, K, N] -> [M, N]; 3-D x 2-D [G, M, K] x [K, N] -> [M, N];
    2-D x 2-D [M, K] x [K, N] -> [G, M, N]; 3-D x 3-D [G, M, K] x [G, K, N] -> [G, M, N]."""
    a, b = args[0], args[1]
    offs = args[2] if len(args) > 2 else kwargs.get("offs")
    out_dtype = kwargs.get("out_dtype") or (args[4] if len(args) > 4 else None) or a.dtype
    if a.dim() == 2 and b.dim() == 3:
        shape = (a.shape[0], b.shape[-1])
    elif a.dim() == 3 and b.dim() == 2:
        shape = (a.shape[1], b.shape[-1])
    elif a.dim() == 2 and b.dim() == 2:
        shape = (offs.shape[0], a.shape[0], b.shape[-1])
    else:
        shape = (a.shape[0], a.shape[1], b.shape[-1])
    return torch.empty(shape, dtype=out_dtype, device=META)


def storage_key(t):
    """Identity of a tensor's storage; works for meta tensors (no data pointer)."""
    try:
        s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    except Exception:
        return None
    s = getattr(s, "_storage", s)
    return getattr(s, "_cdata", None)


def _storage_object(t):
    try:
        return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    except Exception:
        return None


def _geometry(t):
    try:
        return (storage_key(t), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
    except Exception:
        return None


def _dtype_name(dtype):
    return str(dtype).replace("torch.", "")


class TensorRec:
    __slots__ = ("id", "shape", "dtype", "storage", "kind", "name", "requires_grad", "producer",
                 "alias_of", "inplace_of", "dies_at", "no_grad_dies_at", "contiguous")

    def __init__(self, tid, shape, dtype, kind, name=None):
        self.id, self.shape, self.dtype, self.kind, self.name = tid, tuple(shape), dtype, kind, name
        self.storage = tid          # the tensor that owns the storage (itself or a view's base)
        self.requires_grad = False
        self.producer = -1          # index of the op that made it (-1: parameter, buffer, input)
        self.alias_of = None        # view of this tensor
        self.inplace_of = None      # an in-place op's result: the same storage, a new version
        self.dies_at = None         # ops recorded when the Python object died (None: outlived the run)
        # the same, from a run of the forward under no_grad (runner.record_lifetimes): autograd
        # keeps a saved tensor's Python object alive, so dies_at cannot see its variable die
        self.no_grad_dies_at = None
        self.contiguous = True


class OpRec:
    __slots__ = ("index", "op", "overload", "module", "inputs", "scalars", "outputs", "saved",
                 "inplace", "view", "grad_inputs", "phase", "args", "input_requires_grad")

    def __init__(self, index, op, overload, module, phase):
        self.index, self.op, self.overload, self.module, self.phase = index, op, overload, module, phase
        self.inputs, self.scalars, self.outputs, self.saved = [], [], [], []
        self.inplace = self.view = False
        self.grad_inputs = []       # parallel to inputs: whether a gradient flows back to it
        self.args = {}              # schema argument name -> value (tensors as ("T", id))
        # input id -> whether it required grad when this op ran: an in-place write into a view
        # (out[..., 0] = a) makes its base require grad from then on, which the tensor's record,
        # taken at its creation, does not say
        self.input_requires_grad = {}


class Recording:
    """What one run recorded: tensors, ops in program order, module calls, named tensors."""

    def __init__(self):
        self.tensors, self.ops, self.module_calls = [], [], []
        self.parameters, self.buffers, self.inputs = [], [], []   # tensor ids
        self.parameter_names, self.buffer_names = {}, {}          # id -> [qualified names]
        self.input_names = {}
        self.module_types = {}                                    # path -> class name
        self.output = None
        self.loss = None
        self.fallback_ops = set()  # ops that had no meta kernel and ran on CPU copies
        self.construction_temporaries = []  # model()'s temporaries alive at its peak (construction.py)
        self.sdpa_calls = []       # capture/sdpa.py: F.scaled_dot_product_attention regions
        self.checkpoint_calls = []  # capture/checkpoint_regions.py: torch.utils.checkpoint regions


class Recorder(TorchDispatchMode):
    """The dispatch mode: redirects factories to meta and records ops while `recording`."""

    def __init__(self, rec):
        super().__init__()
        self.rec = rec
        self.by_impl = {}        # TensorImpl address -> tensor id
        self.by_geometry = {}    # (storage, offset, shape, strides, dtype) -> latest tensor id
        self.storage_of = {}     # tensor id -> storage identity while recording
        # the storages of every recorded tensor, held for the whole run: a storage's identity is
        # its address, so one freed and reused by a new tensor would make by_geometry (and
        # storage_of) take the new tensor for a dead one. Meta storages hold no memory.
        self.storages = []
        self.keep = []           # parameters, buffers, inputs, grad_fn nodes (strong references)
        self.objects = {}        # tensor id -> weak reference (activations) or the tensor
        self.modules = []        # stack of module paths
        self.recording = False
        self.phase = "forward"
        self._pending_objects = None
        self._pending = None     # last op, whose saved tensors are read at the next op
        self._seen_nodes = set()
        self._swallowed = set()  # outputs whose autograd-save detach was already skipped
        self._saves_detach = saves_dispatch_detach()  # probed before this mode is entered
        self.construction = None  # construction.ConstructionTracker while model() runs
        self.known = known_values.KnownValues()  # values computed from constants alone
        self.model_path = None    # the model file: refusals name its line
        self.sizes = {}           # this run's sizes, for the model file's data_dependent_shape()
        self.stated_shape = None  # the model file's data_dependent_shape(), if any (value_shapes.py)
        self.max_ops = None       # dispatcher ops allowed in one run (a loop that never ends)
        self.op_count = 0

    # ---- tensors
    def module_path(self):
        return self.modules[-1] if self.modules else ""

    def lookup(self, t):
        """The recorded tensor t is: the same TensorImpl, else the latest tensor with the same
        storage and geometry (autograd unpacks a saved output as a new TensorImpl)."""
        tid = self.by_impl.get(t._cdata)
        if tid is not None and self.rec.tensors[tid].shape == tuple(t.shape):
            return tid
        tid = self.by_geometry.get(_geometry(t))
        if tid is not None and self.rec.tensors[tid].shape == tuple(t.shape):
            return tid
        return None

    def register(self, t, kind, name=None, producer=-1):
        tid = len(self.rec.tensors)
        r = TensorRec(tid, t.shape, _dtype_name(t.dtype), kind, name)
        r.producer = producer
        r.requires_grad = bool(t.requires_grad)
        r.contiguous = bool(t.is_contiguous())
        self.rec.tensors.append(r)
        self.by_impl[t._cdata] = tid
        self.by_geometry[_geometry(t)] = tid
        self.storage_of[tid] = storage_key(t)
        self.storages.append(_storage_object(t))
        if kind in ("activation", "constant"):
            # when the Python object dies (its last variable rebound or its frame returned) is
            # the tensor's lifetime as the program holds it; autograd's saving is separate
            self.objects[tid] = weakref.ref(t, self._death_callback(tid, t._cdata))
        else:
            self.keep.append(t)
            self.objects[tid] = (lambda obj: (lambda: obj))(t)
        return tid

    def _death_callback(self, tid, impl):
        def died(_ref):
            r = self.rec.tensors[tid]
            if r.dies_at is None:
                r.dies_at = (self.phase, len(self.rec.ops))
            # the address may be reused by a new TensorImpl; a saved tensor unpacked later
            # is found by its storage and geometry instead
            for key, table in ((impl, self.by_impl),):
                if table.get(key) == tid:
                    del table[key]
        return died

    def obj(self, tid):
        return self.objects[tid]()

    def tensor_id(self, t):
        """Id of a tensor an op reads; one the recording has not seen (made outside the
        mode: a Python scalar wrapped by autograd, a torch.tensor literal) becomes a constant."""
        tid = self.lookup(t)
        if tid is None:
            tid = self.register(t, "constant")
        return tid

    # ---- saved tensors: read back from the previous op's grad_fn
    def resolve_pending(self):
        op, self._pending = self._pending, None
        if op is None:
            return
        objects, self._pending_objects = self._pending_objects, None
        # unpacking a saved output dispatches a detach: not part of the program
        was, self.recording = self.recording, False
        try:
            self._resolve(op)
        finally:
            self.recording = was
            del objects

    def _resolve(self, op):
        for oid in op.outputs:
            t = self.obj(oid)
            if t is None:
                continue
            self.rec.tensors[oid].requires_grad = bool(t.requires_grad)
            node = t.grad_fn
            if node is None or id(node) in self._seen_nodes:
                continue
            self._seen_nodes.add(id(node))
            self.keep.append(node)
            op.saved.extend(self._saved_of(node, op))
            op.grad_inputs = self._grad_flows(node, op)

    def _saved_of(self, node, op):
        ids = []
        attrs = _SAVED_ATTRS.get(type(node))
        if attrs is None:
            attrs = _SAVED_ATTRS[type(node)] = sorted(a for a in dir(node) if a.startswith("_saved_"))
        for attr in attrs:
            try:
                value = getattr(node, attr)
            except Exception:
                continue
            for v in (value if isinstance(value, (list, tuple)) else [value]):
                if isinstance(v, torch.Tensor):
                    tid = self.lookup(v)
                    if tid is None and v.numel() > 1:
                        tid = self.register(v, "constant")
                    if tid is not None and tid not in ids:
                        ids.append(tid)
        return ids

    def _grad_flows(self, node, op):
        flows = []
        for tid in op.inputs:
            flows.append(bool(self.rec.tensors[tid].requires_grad))
        return flows

    # ---- the dispatch hook
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = _op_name(func)
        if name == "aten::detach" and self._is_autograd_save(args[0]):
            return func(*args, **kwargs)
        self.op_count += 1
        if self.max_ops is not None and self.op_count > self.max_ops:
            line = value_shapes.user_line(self.model_path)
            raise CaptureError(f"more than {self.max_ops} tensor ops in one run{self._where(line)} (a loop that "
                               f"never ends? --max-ops raises the limit)")
        self.resolve_pending()
        schema = func._schema
        if any(a.name == "device" for a in schema.arguments):
            kwargs["device"] = META
        args = tree_map(self._to_meta, args)
        kwargs = {k: tree_map(self._to_meta, v) for k, v in kwargs.items()}
        out = known = None
        if name in _VALUE_READS:
            # a read of a value computed from constants (known_values.py) is the same at any size
            cpu = self.known.all_known(args, kwargs)
            if cpu is not None:
                return func(*cpu[0], **cpu[1])
        elif _is_data_dependent(func, name, args, kwargs):
            known = self.known.evaluate(func, args, kwargs)
            if known is not None:
                out = tree_map(lambda c: torch.empty(c.shape, dtype=c.dtype, device=META)
                               if isinstance(c, torch.Tensor) else c, known)
        if out is None and (name in _VALUE_READS or _is_data_dependent(func, name, args, kwargs)):
            out = self._value_dependent(func, name, args, kwargs)
        if out is None and name == "aten::_grouped_mm":
            out = _grouped_mm_meta(args, kwargs)
        if out is None:
            out = None if self.recording else self._meta_backward(name, args)
        if out is None:
            try:
                out = func(*args, **kwargs)
            except (NotImplementedError, RuntimeError) as err:
                out = self._cpu_fallback(func, args, kwargs, err)
            known = self.known.evaluate(func, args, kwargs, out)
        if known is not None:
            self.known.remember(out, known)
        else:
            self.known.forget_written(schema, args, kwargs)
        if self.recording:
            self._record(func, name, schema, args, kwargs, out)
        elif self.construction is not None:
            flat_in = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
            flat_out = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
            self.construction.observe_op(flat_in, flat_out)
        return out

    def _value_dependent(self, func, name, args, kwargs):
        """The result of an op whose size depends on tensor values, as the model file's
        data_dependent_shape() states it; refused with the file's line and advice otherwise."""
        line = value_shapes.user_line(self.model_path)
        if name not in _VALUE_READS:
            try:
                out = value_shapes.stated_result(self.stated_shape, func, name, args, kwargs, self.sizes,
                                                 line, META)
            except CaptureError:
                raise
            except Exception as err:
                raise CaptureError(f"data_dependent_shape() failed for {name}{self._where(line)}: "
                                   f"{type(err).__name__}: {err}")
            if out is not None:
                return out
        advice = value_shapes.READ_ADVICE if name in _VALUE_READS else value_shapes.ADVICE
        raise CaptureError(f"data-dependent shape: {name}{self._where(line)}: its result depends on tensor "
                           f"values, which a graph file cannot express; {advice}")

    def _where(self, line):
        """' in module M (MODEL.py line N)' / ' while model() builds the model', for refusals."""
        if self.construction is not None:
            where = " while model() builds the model"
        elif self.module_path():
            where = f" in module {self.module_path()}"
        else:
            where = f" in the {self.phase}" if self.phase != "forward" else " in the model's forward"
        if line is not None and self.model_path:
            where += f" ({self.model_path.rsplit('/', 1)[-1]} line {line})"
        return where

    def _is_autograd_save(self, t):
        """torch 1.13 saves an op's output as output.detach(), dispatched right after the op
        (saves_dispatch_detach() says whether this torch does):
        not part of the program. One per output of a node that saves results (_saved_result*);
        a user's detach in that very spot would alias the same storage anyway."""
        op = self._pending
        if op is None or t.grad_fn is None or not self._saves_detach:
            return False  # where saving dispatches nothing, every detach is the program's
        tid = self.by_impl.get(t._cdata)
        if tid is None or tid not in op.outputs or tid in self._swallowed:
            return False
        attrs = _SAVED_ATTRS.get(type(t.grad_fn))
        if attrs is None:
            attrs = _SAVED_ATTRS[type(t.grad_fn)] = sorted(a for a in dir(t.grad_fn) if a.startswith("_saved_"))
        if not any(a.startswith("_saved_result") for a in attrs):
            return False
        self._swallowed.add(tid)
        return True

    def _to_meta(self, x):
        if isinstance(x, torch.Tensor) and x.device.type != "meta":
            meta = x.to(META)
            if x.numel() <= known_values.LIMIT:  # a literal (torch.tensor([...])): its value is known
                self.known.remember(meta, x.detach().clone())
            return meta
        return x

    def _meta_backward(self, name, args):
        """Result shapes of backward kernels that torch 1.13 has no meta kernel for (their
        values are never read): convolution_backward's (grad_input, grad_weight, grad_bias)."""
        if name == "aten::convolution_backward":
            grad_out, x, weight, mask = args[0], args[1], args[2], args[-1]
            like = lambda t: torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=META)  # noqa: E731
            return (like(x) if mask[0] else None, like(weight) if mask[1] else None,
                    torch.empty(weight.shape[0], dtype=grad_out.dtype, device=META) if mask[2] else None)
        return None

    def _cpu_fallback(self, func, args, kwargs, err):
        """Runs an op with no meta kernel on zero-filled CPU tensors of the same shapes and
        returns meta tensors shaped like its results (values never matter here)."""
        if "meta" not in str(err).lower() and "overrideable" not in str(err) \
                and "backend" not in str(err).lower():
            raise err
        inputs = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor)]
        if sum(x.numel() * x.element_size() for x in inputs) > _CPU_FALLBACK_BYTES:
            raise CaptureError(f"{_op_name(func)} has no meta kernel in torch {torch.__version__} and its "
                               f"inputs are too large to run on zero-filled CPU copies{self._where(None)}")

        def to_cpu(x):
            if isinstance(x, torch.Tensor) and x.device.type == "meta":
                return torch.zeros(x.shape, dtype=x.dtype).as_strided(x.shape, x.stride()) \
                    if x.is_contiguous() else torch.zeros(x.shape, dtype=x.dtype)
            return x
        cpu_kwargs = dict(kwargs)
        if "device" in cpu_kwargs:
            cpu_kwargs["device"] = torch.device("cpu")
        result = func(*tree_map(to_cpu, args), **{k: tree_map(to_cpu, v) for k, v in cpu_kwargs.items()})
        self.rec.fallback_ops.add(_op_name(func))
        return tree_map(lambda y: torch.empty(y.shape, dtype=y.dtype, device=META)
                        if isinstance(y, torch.Tensor) else y, result)

    def _record(self, func, name, schema, args, kwargs, out):
        op = OpRec(len(self.rec.ops), name, _overload(func), self.module_path(), self.phase)
        flat_args, _ = tree_flatten((args, kwargs))
        for a in flat_args:
            if isinstance(a, torch.Tensor):
                tid = self.tensor_id(a)
                op.inputs.append(tid)
                op.input_requires_grad[tid] = op.input_requires_grad.get(tid, False) or bool(a.requires_grad)
            elif isinstance(a, (int, float, bool)) or a is None:
                op.scalars.append(a)
        for i, a in enumerate(schema.arguments):
            if i < len(args):
                value = args[i]
            elif a.name in kwargs:
                value = kwargs[a.name]
            else:
                value = getattr(a, "default_value", None)
            op.args[a.name] = self._arg_summary(value)
        outs, _ = tree_flatten(out)
        # a result sharing an input's storage is a view of it (or the input written in
        # place); the schema's alias annotations miss some (_unsafe_view), storages do not
        input_storages = {}
        for tid in op.inputs:
            input_storages.setdefault(self.storage_of.get(tid), tid)
        for o in outs:
            if not isinstance(o, torch.Tensor):
                continue
            prev = self.by_impl.get(o._cdata)
            key = storage_key(o)
            base = input_storages.get(key) if key is not None else None
            tid = self.register(o, "activation", producer=op.index)
            r = self.rec.tensors[tid]
            if base is not None:
                r.storage = self.rec.tensors[base].storage
                if prev is not None and prev in op.inputs:
                    r.inplace_of = prev
                    op.inplace = True
                else:
                    r.alias_of = base
                    op.view = True
            op.outputs.append(tid)
        self.rec.ops.append(op)
        self._pending = op
        self._pending_objects = outs  # alive until the grad_fn is read

    def _arg_summary(self, value):
        if isinstance(value, torch.Tensor):
            return ("T", self.tensor_id(value))
        if isinstance(value, (list, tuple)):
            return [self._arg_summary(v) for v in value]
        if isinstance(value, (int, float, bool, str)) or value is None:
            return value
        return str(value)

    # ---- module boundaries
    def attach(self, model):
        handles = []
        names = {id(m): n for n, m in model.named_modules()}
        for mod_name, module in model.named_modules():
            self.rec.module_types[mod_name] = [c.__name__ for c in type(module).__mro__]
            handles.append(module.register_forward_pre_hook(self._enter_hook(mod_name)))
            handles.append(module.register_forward_hook(self._exit_hook(mod_name)))
        del names
        return handles

    def _enter_hook(self, path):
        def hook(module, inputs):
            self.resolve_pending()
            self.modules.append(path)
            if self.recording:
                self.rec.module_calls.append([path, len(self.rec.ops), None])
        return hook

    def _exit_hook(self, path):
        def hook(module, inputs, output):
            self.resolve_pending()
            if self.modules and self.modules[-1] == path:
                self.modules.pop()
            if self.recording:
                for call in reversed(self.rec.module_calls):
                    if call[0] == path and call[2] is None:
                        call[2] = len(self.rec.ops)
                        break
        return hook


@contextlib.contextmanager
def no_cyclic_gc():
    import gc
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
