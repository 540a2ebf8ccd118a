# compiled_capture.py: the graph file of a model as torch.compile runs it (oomcast_capture.py
# --compile). Dynamo traces the model (and the loss, with scope loss); inductor's own pipeline
# (torch._inductor.compile_fx.compile_fx: its decompositions, joint-graph passes and the min-cut
# partitioner, min_cut_rematerialization_partition(compiler="inductor")) splits every graph into
# a forward and a backward; this module takes the place of inductor's code generation
# (`inner_compile`), records the two graphs on their fake tensors and runs them eagerly. No C++
# is compiled, so a capture takes seconds.
#
# What a graph file gets per compiled graph (docs/graph-format.md#compiled-graphs):
# - its forward as the kernels that allocate, one generic op each, in graph order: the outputs of
#   extern kernels (mm, addmm, bmm, convolution, SDPA: inductor calls ATen for them) and of the
#   fused pointwise/reduction kernels whose result leaves the kernel (a graph output, a saved
#   tensor, an extern kernel's input). Everything else is an intermediate of a fused kernel
#   and never allocated. This is a model of inductor's fusion (its scheduler runs only with
#   code generation), stated in capture/README.md, not inductor's own buffer list;
# - one generic op for the graph's autograd node (AOTAutograd's CompiledFunction): its inputs
#   the graph's primals, its saves what the partitioner saved (the forward's extra outputs), its
#   outputs views of the kernels' user-visible outputs, and its backward as a backward_program:
#   the backward graph's kernels in order, each saved tensor and the incoming gradient dropped
#   after its last use, the inputs' gradients allocated where the backward makes them.
# Graph breaks give several graphs, each partitioned alone; a tensor crossing a break is an
# ordinary (eager) tensor between them.
import os

import torch
import torch._functorch.config  # noqa: F401  (activation_memory_budget)

import compiled_layout
import runner
import symbolic
from recorder import CaptureError, storage_key

# ATen ops inductor lowers to views (no buffer): their result is their base's storage.
VIEW_OPS = {"view", "_unsafe_view", "reshape", "permute", "t", "transpose", "expand", "unsqueeze", "squeeze",
            "slice", "select", "alias", "as_strided", "split", "split_with_sizes", "unbind", "detach",
            "_reshape_alias", "diagonal", "unflatten", "narrow", "view_as_real", "view_as_complex",
            "chunk", "squeeze_copy"}
# ATen ops inductor calls as extern kernels (ATen allocates their outputs; their inputs must be
# realized): torch/_inductor/lowering.py (make_fallback, mm/bmm/addmm lowerings to extern_kernels)
# and torch/_inductor/kernel/mm.py, torch 2.13.
EXTERN_OPS = {"mm", "addmm", "bmm", "baddbmm", "convolution", "convolution_backward",
              "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention_for_cpu_backward",
              "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward",
              "_scaled_dot_product_efficient_attention", "_scaled_dot_product_efficient_attention_backward",
              "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_cudnn_attention_backward",
              "_flash_attention_forward", "_flash_attention_backward", "_efficient_attention_forward",
              "_efficient_attention_backward", "native_group_norm_backward", "_fused_rms_norm",
              "_fused_rms_norm_backward", "_embedding_bag", "_cdist_forward", "sort", "topk",
              "_linalg_svd", "linalg_qr", "_weight_int8pack_mm"}

_DTYPES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16", torch.int64: "int64",
           torch.int32: "int32", torch.bool: "bool", torch.uint8: "uint8"}


class Dim(int):
    """A dimension measured in one run; fitted across runs into an expression."""


def _aten_name(node):
    target = node.target
    name = getattr(target, "__name__", str(target))
    overload = getattr(target, "_overloadpacket", None)
    if overload is not None:
        name = overload.__name__
    return name.split(".")[0]


def _val(node):
    return node.meta.get("val") if hasattr(node, "meta") else None


def _is_tensor(node):
    return isinstance(_val(node), torch.Tensor)


class GraphRecord:
    """One graph as inner_compile saw it, and the tensors of its first call."""

    def __init__(self, gm, is_backward, graph_id):
        self.gm = gm
        self.is_backward = is_backward
        self.graph_id = graph_id
        self.args = None  # the forward's first call: the tensors its placeholders were bound to
        self.outputs = None  # ... and what it returned


class CompileSettings:
    def __init__(self, mode="default", fullgraph=False, dynamic="false", scopes=("model",),
                 activation_memory_budget=1.0, for_device="cuda"):
        self.mode, self.fullgraph, self.dynamic = mode, fullgraph, dynamic
        self.for_device = for_device  # inductor's layout decisions differ by device (compiled_layout.py)
        self.scopes = list(scopes)
        self.activation_memory_budget = activation_memory_budget

    def compile_kwargs(self):
        dynamic = {"false": False, "true": True, "auto": None}[self.dynamic]
        return dict(fullgraph=self.fullgraph, dynamic=dynamic)

    def document(self, graphs, breaks):
        doc = {"mode": self.mode, "fullgraph": self.fullgraph, "dynamic": self.dynamic, "scope": self.scopes,
               "activation_memory_budget": self.activation_memory_budget, "graphs": graphs,
               "graph_breaks": breaks, "for_device": self.for_device}
        return doc


def _backend(records):
    from torch._functorch.aot_autograd import make_boxed_func
    from torch._inductor.compile_fx import compile_fx

    def inner(gm, example_inputs, **kwargs):
        record = GraphRecord(gm, bool(kwargs.get("is_backward")), kwargs.get("graph_id"))
        records.append(record)

        def call(*args):
            first = record.args is None
            if first:
                record.args = list(args)
            outs = gm(*args)
            if first:
                record.outputs = list(outs)
            return outs
        return make_boxed_func(call)

    def backend(gm, example_inputs):
        return compile_fx(gm, example_inputs, inner_compile=inner)
    return backend


def run_compiled_step(user, path, sizes, settings):
    """Compiles and runs one training step at `sizes`; returns (model, batch, records, output,
    loss). Every tensor of the step is a FakeTensor (shapes and storages, no data: a billion
    parameters cost nothing); dynamo traces on that same fake mode."""
    import torch._dynamo
    from torch._subclasses.fake_tensor import FakeTensorMode
    torch._dynamo.reset()
    torch._functorch.config.enable_autograd_cache = False  # every graph through inner_compile
    torch._inductor.config.fx_graph_cache = False
    torch.manual_seed(0)
    # allow_non_fake_inputs: a constant the model file made at import time is read as it is
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    with fake:
        try:
            model = user.model()
            inputs, target = user.batch(**sizes)
        except Exception as err:
            raise CaptureError(f"{path}: model() or batch() failed on fake tensors: {runner._one_line(err)}"
                               f"{runner._where(err, path)}")
    model.train()
    records = []
    kwargs = settings.compile_kwargs()
    user_loss = getattr(user, "loss", None)
    if "loss" not in settings.scopes and user_loss is not None:
        raise CaptureError(f"{path}: defines its own loss(); beside a compiled model it must be compiled too "
                           "(scope: [model, loss]); an eager custom loss is not captured with --compile")
    loss_fn = user_loss or runner.default_loss
    compiled = torch.compile(model, backend=_backend(records), **kwargs)
    compiled_loss = torch.compile(loss_fn, backend=_backend(records), **kwargs) if "loss" in settings.scopes else loss_fn
    try:
        with fake, torch._functorch.config.patch(activation_memory_budget=settings.activation_memory_budget):
            out = runner._call_model(compiled, inputs)
            loss = compiled_loss(out, target)
            loss.backward()
    except CaptureError:
        raise
    except Exception as err:
        raise CaptureError(f"{path}: torch.compile could not run the step: {runner._one_line(err)}"
                           f"{runner._where(err, path)}")
    return model, (inputs, target), records, out, loss


# ---------------------------------------------------------------- materialisation model

class Partition:
    """The materialised buffers of one graph: which nodes allocate, and every node's buffer
    (the materialised node or placeholder whose storage it is, or None inside a fused kernel)."""

    def __init__(self, gm, outputs_kept):
        self.nodes = [n for n in gm.graph.nodes]
        self.output_node = next(n for n in self.nodes if n.op == "output")
        self.base = {}
        self.materialised = []
        needs = set()
        if outputs_kept:
            needs |= {id(self._view_root(a)) for a in self.output_node.args[0] if hasattr(a, "op")}
        for node in self.nodes:
            if node.op == "call_function" and _aten_name(node) in EXTERN_OPS:
                needs |= {id(self._view_root(a)) for a in node.all_input_nodes}
        for node in self.nodes:
            if node.op == "placeholder":
                self.base[node] = node
            elif node.op != "call_function":
                continue
            elif _aten_name(node) == "getitem":
                parent = node.args[0]
                if _aten_name(parent) in EXTERN_OPS:
                    self._materialise(node)
                elif self.base.get(parent) is None and id(node) in needs:
                    self._materialise(node)
                else:
                    self.base[node] = self.base.get(parent)
            elif not _is_tensor(node):
                self.base[node] = None
            elif _aten_name(node) in VIEW_OPS:
                self.base[node] = self.base.get(self._view_root(node))
            elif _aten_name(node) in EXTERN_OPS or id(node) in needs:
                self._materialise(node)
            else:
                self.base[node] = None

    def _view_root(self, node):
        while node.op == "call_function" and _aten_name(node) in VIEW_OPS and hasattr(node.args[0], "op"):
            node = node.args[0]
        return node

    def _materialise(self, node):
        self.base[node] = node
        self.materialised.append(node)

    def reads(self):
        """Per materialised node (and the output): the buffers (materialised nodes or
        placeholders) its kernel reads, through views and fused intermediates."""
        cache = {}

        def sources(node):
            if node in cache:
                return cache[node]
            base = self.base.get(node)
            if base is not None:
                out = {base}
            else:
                out = set()
                for arg in node.all_input_nodes:
                    out |= sources(arg)
            cache[node] = out
            return out
        result = {}
        for node in self.materialised + [self.output_node]:
            got = set()
            for arg in node.all_input_nodes:
                got |= sources(arg)
            got.discard(node)
            result[node] = got
        return result


def _nbytes_shape(node):
    val = _val(node)
    return [Dim(int(d)) for d in val.shape], _DTYPES.get(val.dtype, "float32")


def _last_uses(order, reads):
    last = {}
    for position, node in enumerate(order):
        for source in reads.get(node, ()):
            last[source] = position
    return last


# ---------------------------------------------------------------- one run as statements

class Namer:
    def __init__(self):
        self.by_storage = {}

    def add(self, tensor, name):
        self.by_storage.setdefault(storage_key(tensor), name)

    def name_of(self, tensor):
        return self.by_storage.get(storage_key(tensor))


def describe_run(user, path, sizes, settings):
    """The graph file's sections at one size, with dimensions as Dim (fitted later)."""
    model, (inputs, target), records, out, loss = run_compiled_step(user, path, sizes, settings)
    forwards = [r for r in records if not r.is_backward]
    backwards = [r for r in records if r.is_backward]
    if not forwards:
        raise CaptureError(f"{path}: torch.compile compiled no graph (nothing to capture)")
    if len(backwards) != len(forwards):
        raise CaptureError(f"{path}: {len(forwards)} forward graphs but {len(backwards)} backward graphs "
                           "(a graph with no input requiring grad is not captured yet)")
    by_id = {r.graph_id: r for r in backwards}
    namer = Namer()
    parameters = []
    for name, p in model.named_parameters():
        shape = [int(d) for d in p.shape]
        entry = {"name": name, "shape": shape}
        if p.dtype != torch.float32:
            entry["dtype"] = _DTYPES[p.dtype]
        if not p.requires_grad:
            entry["requires_grad"] = False
        parameters.append(entry)
        namer.add(p, name)
    buffers = []
    for name, b in model.named_buffers():
        buffers.append({"name": name, "shape": [int(d) for d in b.shape], "dtype": _DTYPES[b.dtype]})
        namer.add(b, name)
    input_decls = []
    for name, tensor in runner._named_tensors("inputs", inputs) + runner._named_tensors("target", target):
        dtype = "param" if tensor.is_floating_point() else _DTYPES[tensor.dtype]
        input_decls.append({"name": name, "shape": [Dim(int(d)) for d in tensor.shape], "dtype": dtype})
        namer.add(tensor, name)
    forward = []
    for k, record in enumerate(forwards):
        backward = by_id.get(record.graph_id) if record.graph_id in by_id else backwards[len(backwards) - 1 - k]
        forward += _graph_statements(k, record, backward, namer, path, settings.for_device)
    if "loss" not in settings.scopes:
        forward += _eager_default_loss(out, target, namer)
    loss_name = namer.name_of(loss) if "loss" in settings.scopes else "loss.value"
    if loss_name is None:
        raise CaptureError(f"{path}: the loss is not an output of a compiled graph")
    outputs = {"loss": loss_name}
    logits = runner._first_tensor(out)
    if logits is not None and namer.name_of(logits):
        outputs["logits"] = namer.name_of(logits)
    breaks = sum(1 for r in forwards[1:]) - (1 if "loss" in settings.scopes else 0)
    return {"parameters": parameters, "buffers": buffers, "inputs": input_decls, "forward": forward,
            "outputs": outputs, "graphs": len(forwards), "graph_breaks": max(breaks, 0)}


def _eager_default_loss(out, target, namer):
    """runner.default_loss run eagerly after a compiled model: reshape(-1, V) and cross-entropy,
    as the eager capture writes it."""
    logits = runner._first_tensor(out)
    name, target_name = namer.name_of(logits), namer.name_of(target)
    flat = [Dim(int(logits.numel() // logits.shape[-1])), Dim(int(logits.shape[-1]))]
    statements = [
        {"op": "generic", "name": "loss.view", "aten": "view", "inputs": [name],
         "outputs": [{"name": "loss.logits_view", "shape": flat, "view_of": name}], "grads": ["pass"]},
        {"op": "generic", "name": "loss.target_view", "aten": "view", "inputs": [target_name],
         "outputs": [{"name": "loss.target_flat", "shape": [Dim(int(target.numel()))], "view_of": target_name}],
         "grads": ["none"]},
        {"op": "cross_entropy", "name": "loss.cross_entropy", "logits": "loss.logits_view",
         "targets": "loss.target_flat", "out": "loss.value"},
    ]
    return statements


def _graph_statements(k, record, backward, namer, path, device_kind):
    if record.args is None:
        raise CaptureError(f"{path}: compiled graph {k} never ran")
    prefix = f"compiled.g{k}"
    gm = record.gm
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    names = {}
    for node, value in zip(placeholders, record.args):
        if isinstance(value, torch.Tensor):
            known = namer.name_of(value)
            if known is None:
                raise CaptureError(f"{path}: compiled graph {k}'s input {node.name} is a tensor made outside the "
                                   "captured step (eager code between graphs is not captured yet)")
            names[node] = known
    bw_placeholders = [n for n in backward.gm.graph.nodes if n.op == "placeholder"]
    saved_names = [n.name for n in bw_placeholders if not n.name.startswith("tangents")]
    tangents = [n for n in bw_placeholders if n.name.startswith("tangents")]
    fw_out = [a for a in next(n for n in gm.graph.nodes if n.op == "output").args[0]]
    n_user = len(fw_out) - len(saved_names)
    partition = Partition(gm, outputs_kept=True)
    reads = partition.reads()
    order = partition.materialised
    copies = compiled_layout.channels_last_copies(gm, partition._view_root) \
        if compiled_layout.decides_channels_last(gm, device_kind) else {}
    copy_names = {}  # placeholder -> its channels-last copy, once made (the convolutions read it)
    statements = []
    for node in order:
        shape, dtype = _nbytes_shape(node)
        buffer = f"{prefix}.{node.name}"
        names[node] = buffer
        uses_copy = compiled_layout.is_convolution(node)
        # the weight's copy is made first, then the input's (the order the allocation hook records)
        for root in (partition._view_root(a) for a in node.args[1::-1] if uses_copy and hasattr(a, "op")):
            if root in copies and root not in copy_names:
                copy_names[root] = f"{prefix}.{names[root]}.channels_last"
                copy_shape, copy_dtype = _nbytes_shape(root)
                statements.append({"op": "generic", "name": copy_names[root], "aten": "clone", "inputs": [names[root]],
                                   "outputs": [{"name": copy_names[root], "shape": copy_shape, "dtype": copy_dtype}],
                                   "grads": ["none"]})
        sources = sorted(reads[node], key=lambda s: partition.nodes.index(s))
        inputs = [copy_names.get(s, names[s]) if uses_copy else names[s] for s in sources if s in names]
        statements.append({"op": "generic", "name": f"{prefix}.{node.name}", "aten": _aten_name(node),
                           "inputs": inputs, "outputs": [{"name": buffer, "shape": shape, "dtype": dtype}],
                           "grads": ["none"] * len(inputs)})
    # the autograd node: primals in, user outputs (views of the kernels' buffers) out
    primal_names = [names[p] for p in placeholders if p in names]
    user_outputs = []
    for i, node in enumerate(fw_out[:n_user]):
        base = partition.base.get(node) if hasattr(node, "op") else None
        if base is None:
            raise CaptureError(f"{path}: compiled graph {k}'s output {i} is not a buffer the capture can name")
        shape, _ = _nbytes_shape(node)
        out_name = f"{prefix}.out{i}"
        user_outputs.append({"name": out_name, "shape": shape, "view_of": names[base]})
    saves = []
    fw_by_name = {n.name: n for n in partition.nodes}
    for s in saved_names:
        node = fw_by_name.get(s)
        if node is None or not _is_tensor(node):
            continue
        base = partition.base.get(node)
        saves.append(copy_names.get(base, names[base]) if base is not None else None)
    program = _backward_program(backward, saved_names, saves, placeholders, names, prefix)
    saves_list = [s for s in dict.fromkeys(x for x in saves if x is not None)]
    # the node takes the forward's outputs, the user's (its outputs are views of them) and the
    # saved tensors, from the kernels that made them: they live at least until it runs
    output_bases = [o["view_of"] for o in user_outputs] + saves_list
    output_bases = [b for b in output_bases if b not in primal_names]
    statements.append({"op": "generic", "name": prefix, "aten": "compiled_function", "kind": "other",
                       "inputs": primal_names + list(dict.fromkeys(output_bases)), "outputs": user_outputs,
                       "saves": saves_list,
                       "backward_program": program})
    runtime_outputs = []  # the runtime's user outputs are named after the node's outputs
    for i in range(n_user):
        runtime_outputs.append(f"{prefix}.out{i}")
    record.user_output_names = runtime_outputs
    # what the step's Python code got back from this graph: name it so later graphs and the
    # loss find it (the compiled function's outputs share the kernels' storages)
    for i, node in enumerate(fw_out[:n_user]):
        base = partition.base.get(node)
        namer.by_storage[_storage_of(record, node, i)] = f"{prefix}.out{i}"
    return statements


def _storage_of(record, node, index):
    """The storage identity of the forward's output `index` in its first call."""
    return storage_key(record.outputs[index])


def _backward_program(backward, saved_names, saves, fw_placeholders, names, prefix):
    """The backward graph as steps: its kernels' buffers (alloc at the kernel, free after the
    last kernel reading them), saved tensors and the incoming gradients released after their last
    use, the primals' gradients allocated where the graph computes them."""
    gm = backward.gm
    partition = Partition(gm, outputs_kept=True)
    reads = partition.reads()
    order = partition.materialised
    output = partition.output_node
    grads = list(output.args[0])
    primal_of_grad = {}
    named_primals = [p for p in fw_placeholders if p in names]
    for i, grad in enumerate(grads):
        if grad is None or i >= len(fw_placeholders) or fw_placeholders[i] not in names:
            continue
        base = partition.base.get(grad)
        if base is not None:
            primal_of_grad.setdefault(base, []).append(names[fw_placeholders[i]])
    del named_primals
    placeholders = [n for n in partition.nodes if n.op == "placeholder"]
    saved_name_of = {}
    for node, save in zip([p for p in placeholders if not p.name.startswith("tangents")], saves):
        saved_name_of[node] = save
    last = _last_uses(order + [output], reads)
    steps = []
    released = set()

    index = {node: i for i, node in enumerate(partition.nodes)}

    def release_dead(position):
        dead = sorted((s for s, at in last.items() if at == position and s not in released), key=index.get)
        for source in dead:
            if source.op == "placeholder":
                released.add(source)
                if source.name.startswith("tangents"):
                    if all(t in released for t in placeholders if t.name.startswith("tangents")):
                        steps.append({"release": "grad_output"})
                elif saved_name_of.get(source):
                    steps.append({"release": saved_name_of[source]})
            elif source not in primal_of_grad:
                released.add(source)
                steps.append({"free": f"{prefix}.bw.{source.name}"})
    for position, node in enumerate(order):
        if node in primal_of_grad:
            for primal in primal_of_grad[node]:
                steps.append({"grad": primal})
        else:
            shape, dtype = _nbytes_shape(node)
            steps.append({"alloc": f"{prefix}.bw.{node.name}", "shape": shape, "dtype": dtype})
        release_dead(position)
    # a gradient that is one of the graph's inputs as it is (an incoming gradient passed
    # through): planned as a new tensor when the graph returns
    for base, primals in primal_of_grad.items():
        if base.op == "placeholder":
            steps += [{"grad": primal} for primal in primals]
    release_dead(len(order))
    # buffers still alive when the graph returns (not gradients) are freed with it
    for node in order:
        if node not in primal_of_grad and node not in released:
            released.add(node)
            steps.append({"free": f"{prefix}.bw.{node.name}"})
    return steps


# ---------------------------------------------------------------- the graph file

def _fit(runs, plan, keys, where="graph"):
    """runs[0]'s structure with every Dim fitted across the runs into an expression."""
    first = runs[0]
    if isinstance(first, Dim):
        expr = symbolic.fit_dimension([int(r) for r in runs], plan, keys)
        if expr is None:
            seen = ", ".join(f"{int(v)} at {symbolic._kw(p)}" for v, p in zip(runs, plan))
            raise CaptureError(f"cannot express {where} in {', '.join(keys)} ({seen})")
        return expr
    if isinstance(first, dict):
        if any(not isinstance(r, dict) or list(r) != list(first) for r in runs):
            raise CaptureError(f"the compiled program changes with the sizes at {where} (the partitioner or "
                               "the fusion decided differently at another size)")
        return {k: _fit([r[k] for r in runs], plan, keys, f"{where}.{k}") for k in first}
    if isinstance(first, list):
        if any(not isinstance(r, list) or len(r) != len(first) for r in runs):
            raise CaptureError(f"the compiled program changes with the sizes at {where} ({len(first)} entries at "
                               f"{symbolic._kw(plan[0])}, {[len(r) for r in runs]} across the runs)")
        return [_fit([r[i] for r in runs], plan, keys, f"{where}[{i}]") for i in range(len(first))]
    if any(r != first for r in runs):
        raise CaptureError(f"the compiled program changes with the sizes at {where}: "
                           f"{[r for r in runs]} (the partitioner or the fusion decided differently)")
    return first


def capture(model_path, declared_sizes, settings, log=lambda s: None):
    """(document, summary) of the model file as torch.compile runs it; raises CaptureError."""
    import time
    user = runner.load_model_file(model_path)
    keys = runner.size_keys(user)
    if "batch_size" not in keys:
        raise CaptureError(f"{model_path}: batch() takes no batch_size keyword argument")
    # The optimizer scope adds nothing to capture: the planner writes the compiled step (its
    # temporaries fused away) from the graph file's parameters.
    unsupported = [s for s in settings.scopes if s not in ("model", "loss", "optimizer")]
    if unsupported or "model" not in settings.scopes:
        raise CaptureError(f"compile scope {settings.scopes}: the compiled capture compiles the model, and "
                           "optionally the loss and the optimizer step (scope [model], [model, loss], "
                           "[model, optimizer]); blocks are not captured yet")
    if settings.mode not in ("default", "max-autotune-no-cudagraphs"):
        raise CaptureError(f"compile mode {settings.mode!r}: the compiled capture runs on the CPU, where "
                           "cudagraph modes (reduce-overhead, max-autotune) do not apply")
    declared = dict(getattr(user, "sizes", None) or {})
    declared.update(declared_sizes or {})
    plan = symbolic.size_plan(keys, declared)
    t0 = time.time()
    runs = [describe_run(user, model_path, sizes, settings) for sizes in plan]
    fitted = _fit(runs, plan, keys)
    release = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    doc = {"oomcast_graph": 1, "name": os.path.splitext(os.path.basename(model_path))[0], "torch_version": release,
           "compiled": settings.document(fitted["graphs"], fitted["graph_breaks"])}
    size_defaults = {k: {"default": plan[0][k]} for k in keys if k != "batch_size"}
    if size_defaults:
        doc["sizes"] = size_defaults
    doc["parameters"] = fitted["parameters"]
    if fitted["buffers"]:
        doc["buffers"] = fitted["buffers"]
    doc["inputs"] = fitted["inputs"]
    doc["forward"] = fitted["forward"]
    doc["outputs"] = fitted["outputs"]
    optimizer, optimizer_note = runner.read_optimizer(user, model_path)
    if optimizer:
        doc["optimizer"] = optimizer
    kernels = sum(1 for s in fitted["forward"] if s.get("aten") not in ("compiled_function", None))
    params = 0
    for p in fitted["parameters"]:
        n = 1
        for d in p["shape"]:
            n *= int(d)
        params += n
    summary = {"parameters": params, "ops": kernels, "runs": len(plan), "run_seconds": time.time() - t0,
               "generic": {}, "catalogue": {}, "sizes": keys, "sdpa_notes": [], "fallback": [],
               "optimizer": optimizer, "optimizer_note": optimizer_note,
               "graphs": fitted["graphs"], "graph_breaks": fitted["graph_breaks"]}
    return doc, summary


def settings_from_text(text):
    """--compile's SETTINGS: the scenario's compile: map as YAML (docs/scenario-format.md#compile)."""
    import yaml
    try:
        value = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as err:
        raise CaptureError(f"--compile {text!r}: not a YAML map ({err.problem})")
    if value is None or value is True:
        value = {}
    if not isinstance(value, dict):
        raise CaptureError(f"--compile {text!r}: a map such as '{{scope: [model, loss]}}'")
    known = {"mode", "fullgraph", "dynamic", "scope", "activation_memory_budget"}
    unknown = sorted(set(value) - known)
    if unknown:
        raise CaptureError(f"--compile: unknown key {unknown[0]!r} ({', '.join(sorted(known))})")
    scope = value.get("scope", ["model"])
    scope = [scope] if isinstance(scope, str) else list(scope)
    dynamic = value.get("dynamic", "false")
    dynamic = {False: "false", True: "true", None: "auto"}.get(dynamic, str(dynamic))
    if dynamic != "false":
        raise CaptureError("--compile: dynamic other than false is not captured yet (each size is compiled "
                           "static and the shapes fitted across sizes)")
    budget = float(value.get("activation_memory_budget", 1.0))
    if not 0.0 <= budget <= 1.0:
        raise CaptureError(f"--compile: activation_memory_budget {budget} is outside 0 .. 1")
    if "activation_memory_budget" in value and not hasattr(torch._functorch.config, "activation_memory_budget"):
        raise CaptureError(f"--compile: torch {torch.__version__} has no activation_memory_budget (2.4+)")
    return CompileSettings(mode=str(value.get("mode", "default")), fullgraph=bool(value.get("fullgraph", False)),
                           dynamic=dynamic, scopes=sorted(scope, key=["model", "blocks", "loss", "optimizer"].index
                                                          if all(s in ("model", "blocks", "loss", "optimizer")
                                                                 for s in scope) else str),
                           activation_memory_budget=budget)
