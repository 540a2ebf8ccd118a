#!/usr/bin/python3
# capture.py: runs a scenario's training loop for real on the CPU with the LD_PRELOAD hook of
# alloc_hook.c and writes every c10 tensor allocation and free, in order, with phase marks, in
# oomcast's trace format (alloc/free/mark). This is the ground truth the planner is judged by.
#
#   /usr/bin/python3 validate/capture.py CONFIG.yaml -o trace.txt [--set key=value ...]
#
# CONFIG is YAML or JSON with the planner's scenario keys (README.md lists them). The script
# builds the hook when needed and re-executes itself with LD_PRELOAD set.
import argparse
import ctypes
import gc
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
_ENV_MARK = "OOMCAST_CAPTURE_HOOK"


# ---------------------------------------------------------------- the hook library

def libc_tag():
    """The C library this python runs on ("glibc-2.36"): the hook is built per C library, so a
    chroot with another glibc (e.g. a Debian 13 one) never preloads a hook the host built, nor
    the host one the chroot built, when both share the repo and the test output folders."""
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError, AttributeError):
        version = ""
    return version.replace(" ", "-") or "libc-unknown"


def hook_library(survey):
    """Path of the built hook (validate/build/<libc>, or a temporary directory when that is not
    writable); builds it when missing or older than alloc_hook.c."""
    name = "alloc_hook_survey.so" if survey else "alloc_hook.so"
    src = os.path.join(HERE, "alloc_hook.c")
    dirs = [os.path.join(d, libc_tag()) for d in (os.environ.get("OOMCAST_HOOK_DIR"), os.path.join(HERE, "build")) if d]
    for out in dirs + [None]:
        if out is None:
            out = tempfile.mkdtemp(prefix="oomcast-hook-")
        lib = os.path.join(out, name)
        if os.path.exists(lib) and os.path.getmtime(lib) >= os.path.getmtime(src):
            return lib
        try:
            os.makedirs(out, exist_ok=True)
            subprocess.run(["sh", os.path.join(HERE, "build_hook.sh"), out], check=True,
                           stdout=subprocess.DEVNULL)
            return lib
        except (OSError, subprocess.CalledProcessError):
            continue
    raise RuntimeError("could not build validate/alloc_hook.c (is a C compiler installed?)")


def ensure_preloaded(survey):
    """Re-executes this script with the hook in LD_PRELOAD unless it is already loaded."""
    if os.environ.get(_ENV_MARK):
        return
    env = dict(os.environ)
    env[_ENV_MARK] = "1"
    env.setdefault("PYTHONHASHSEED", "0")  # set iteration order of str keys, run to run
    lib = hook_library(survey)
    env["LD_PRELOAD"] = lib + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    # Turn address-space randomisation off for the child (as `setarch -R` does): some frees come
    # in pointer-hash order (the autocast cache is a hash map keyed by TensorImpl*), so with ASLR
    # their order would change from run to run. Ignored where the kernel refuses.
    try:
        libc = ctypes.CDLL(None)
        current = libc.personality(0xFFFFFFFF)
        if current != -1:
            libc.personality(current | 0x0040000)  # ADDR_NO_RANDOMIZE
    except (OSError, AttributeError):
        pass
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


class _Event(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_uint64), ("ptr", ctypes.c_uint64), ("size", ctypes.c_uint64)]


class Hook:
    """ctypes view of the preloaded alloc_hook.c."""
    ALLOC, FREE, MARK = 1, 2, 3

    def __init__(self):
        self.lib = ctypes.CDLL(None)
        if not hasattr(self.lib, "hook_is_active"):
            raise RuntimeError("alloc_hook.so is not preloaded (run through capture.py)")
        self.lib.hook_start.argtypes = [ctypes.c_int]
        self.lib.hook_mark.argtypes = [ctypes.c_uint64]
        for f in ("hook_event_count", "hook_dropped", "hook_live"):
            getattr(self.lib, f).restype = ctypes.c_uint64
        self.lib.hook_events.restype = ctypes.POINTER(_Event)
        self.labels = []

    def start(self, filter_caller=True):
        if self.lib.hook_start(1 if filter_caller else 0) == 0 and filter_caller:
            raise RuntimeError("libc10.so is not mapped: import torch before starting the hook")

    def stop(self):
        self.lib.hook_stop()

    def mark(self, label):
        self.labels.append(label)
        self.lib.hook_mark(len(self.labels) - 1)

    def events(self):
        n = self.lib.hook_event_count()
        if self.lib.hook_dropped():
            raise RuntimeError(f"hook dropped {self.lib.hook_dropped()} events (buffer or pointer set full)")
        arr = ctypes.cast(self.lib.hook_events(), ctypes.POINTER(_Event * n)).contents if n else []
        return [(e.kind, e.ptr, e.size) for e in arr]

    def survey(self):
        buf = (ctypes.c_uint64 * 64)()
        n = self.lib.hook_survey(buf)
        names = ["malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc", "memalign", "valloc"]
        rows = [(names[r], buf[r * 4], buf[r * 4 + 1], buf[r * 4 + 2], buf[r * 4 + 3]) for r in range(n)]
        return rows, (buf[n * 4], buf[n * 4 + 1], buf[n * 4 + 2], buf[n * 4 + 3]) if n else None


def write_trace(path, events, labels, header):
    """Writes the events in the trace format; ids are t<counter> in allocation order."""
    live, next_id = {}, 0
    lines = ["# " + h for h in header]
    for kind, ptr, size in events:
        if kind == Hook.ALLOC:
            live[ptr] = f"t{next_id}"
            next_id += 1
            lines.append(f"alloc {live[ptr]} {size}")
        elif kind == Hook.FREE:
            lines.append(f"free {live.pop(ptr)}")
        else:
            lines.append(f"mark {labels[ptr]}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return next_id


# ---------------------------------------------------------------- configuration

def load_config(path, overrides):
    """Reads YAML/JSON (optionally under a top-level 'scenario' key) and applies --set a.b=v."""
    with open(path) as f:
        text = f.read()
    if path.endswith(".json"):
        cfg = json.loads(text)
    else:
        import yaml
        cfg = yaml.safe_load(text)
    cfg = cfg.get("scenario", cfg)
    for item in overrides:
        key, _, value = item.partition("=")
        try:
            import yaml
            value = yaml.safe_load(value)
        except Exception:
            pass
        node = cfg
        parts = key.split(".")
        for p in parts[:-1]:
            if not isinstance(node.get(p), dict):
                node[p] = {} if p not in node or not isinstance(node[p], str) else {"mode": node[p]}
            node = node[p]
        node[parts[-1]] = value
    cfg["_dir"] = os.path.dirname(os.path.abspath(path))
    return cfg


def _model_file(ref, base_dir):
    """A preset name (models/NAME.yaml) or a model file path relative to the scenario."""
    is_path = "/" in ref or ref.endswith((".yaml", ".yml", ".json"))
    path = os.path.join(base_dir, ref) if is_path else os.path.join(REPO, "models", ref + ".yaml")
    if not os.path.isfile(path):
        raise ValueError(f"model {ref!r}: no such {'file' if is_path else 'preset (models/' + ref + '.yaml)'}")
    import yaml
    with open(path) as f:
        doc = yaml.safe_load(f)
    doc = doc.get("model", doc) if isinstance(doc.get("model"), dict) else doc
    doc.setdefault("name", os.path.splitext(os.path.basename(path))[0])
    return doc


def _hf_config(ref, base_dir):
    """(path, dict) when `ref` names a config.json file or a folder holding one, else None."""
    path = os.path.join(base_dir, ref)
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    if not path.endswith(".json") or not os.path.isfile(path):
        return None
    with open(path) as f:
        return path, json.load(f)


def resolve_model(ref, base_dir, transformers=False):
    """(name, family, dims, options) from the scenario's `model`: a preset name, a model file
    path, or a map {preset|path, DIMENSION: int, SWITCH: value} (docs/scenario-format.md).
    A map with `family` and `dims` (a model file written inline) is accepted too."""
    overrides = {}
    if isinstance(ref, dict) and ("preset" in ref or "path" in ref):
        overrides = {k: v for k, v in ref.items() if k not in ("preset", "path")}
        ref = ref.get("preset") or ref["path"]
    if isinstance(ref, str) and ref.endswith((".yaml", ".yml")):
        import graph_models
        source = graph_models.graph_source(os.path.join(base_dir, ref))
        if source:  # a captured graph file: the real run is the model file it came from
            return os.path.basename(ref), "graph", {"source": source}, {}
    hf_config = _hf_config(ref, base_dir) if isinstance(ref, str) else None
    if hf_config is not None and transformers:  # transformers' own class, as a captured graph's source
        return os.path.basename(os.path.dirname(hf_config[0])), "graph", {"source": hf_config[0]}, {}
    if hf_config is not None:  # a Hugging Face config.json (or its folder): validate/hf_models.py
        # transformers_version names the release whose code validate/hf_models.py mirrors (4.x:
        # per-expert MoE modules, Gemma scaling inputs_embeds in the model); it changes nothing here.
        overrides.pop("transformers_version", None)
        if overrides:
            raise ValueError("a config.json model takes no overrides in the capture: edit the config")
        return os.path.basename(os.path.dirname(hf_config[0])), "hf", hf_config[1], {}
    model = _model_file(ref, base_dir) if isinstance(ref, str) else dict(ref)
    dims = dict(model.get("dims", {}) or {})
    options = {k: v for k, v in (model.get("options", {}) or {}).items()}
    for k, v in overrides.items():  # integers are dimensions, anything else a switch
        if isinstance(v, int) and not isinstance(v, bool):
            dims[k] = v
        else:
            options[k] = v
    family = model.get("family") or model.get("name")
    return model.get("name", family), family, dims, options


def _mode(value, default):
    if isinstance(value, dict):
        value = value.get("mode", default)
    return default if value is None else str(value)


def _dropout(value):
    if isinstance(value, dict):
        ps = {float(v) for v in value.values()}
        if len(ps) > 1:
            raise ValueError(f"dropout {value}: the models use one probability for every site")
        return ps.pop() if ps else 0.0
    return float(value or 0.0)


def make_optimizer(torch, params, cfg, named=None):
    kind = str(cfg.get("type", "adamw")).lower()
    import jobs
    if kind == "muon":
        return jobs.MuonWithAdamW(torch, named if named is not None else [(str(i), p) for i, p in enumerate(params)], cfg,
                                  lambda rest: make_optimizer(torch, rest, dict(cfg, type="adamw")))
    if kind == "anyprecision_adamw":
        return jobs.AnyPrecisionAdamW([p for p in params if p.requires_grad], cfg)
    impl = str(cfg.get("impl", "single_tensor")).lower()
    if impl == "fused":
        raise ValueError("optimizer impl 'fused' has no CPU kernel in torch 1.13 (CUDA only)")
    foreach = impl == "foreach"  # on CPU, 1.13 runs _foreach_* through the per-tensor fallback
    lr = float(cfg.get("lr", 1e-3))
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=float(cfg.get("momentum", 0.0)),
                               weight_decay=float(cfg.get("weight_decay", 0.0)), foreach=foreach)
    betas = tuple(cfg.get("betas", (0.9, 0.999)))
    cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}.get(kind)
    if cls is None:
        raise ValueError(f"optimizer {kind!r}: the capture supports sgd, adam and adamw")
    wd = float(cfg.get("weight_decay", 0.01 if kind == "adamw" else 0.0))
    return cls(params, lr=lr, betas=betas, weight_decay=wd, foreach=foreach,
               amsgrad=bool(cfg.get("amsgrad", False)))


class OptimizerInBackward:
    """optimizer.in_backward, as torchtune's optimizer_in_bwd builds it: one optimizer per
    trainable parameter, stepped (then zero_grad(set_to_none=True)) from the parameter's
    post-accumulate-grad hook; the loop's step() and zero_grad() have nothing left to do."""

    def __init__(self, torch, params, cfg):
        self.optimizers = {}
        for p in params:
            if not p.requires_grad:
                continue
            self.optimizers[p] = make_optimizer(torch, [p], cfg)
            p.register_post_accumulate_grad_hook(self._step)

    def _step(self, param):
        optimizer = self.optimizers[param]
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def step(self):
        pass

    def zero_grad(self, set_to_none=True):
        pass


# ---------------------------------------------------------------- the training loop

def loop_settings(cfg):
    """The scenario's training_loop and eval keys (docs/scenario-format.md) as the loop runs
    them: (set_to_none, zero_first, caller-held outputs, keep_losses, eval_on, eval_batches,
    eval_no_grad, eval_keep). The GPU harness reads them the same way."""
    loop = cfg.get("training_loop", {}) or {}
    set_to_none = str(loop.get("zero_grad", "set_to_none")) == "set_to_none"
    zero_first = str(loop.get("zero_grad_position", "after_step")) == "before_forward"
    held = set(loop.get("caller_held_outputs", ["loss"]))
    keep_losses = bool(loop.get("keep_losses_across_iterations", False))
    ev = cfg.get("eval") or {}
    if ev is True:
        ev = {"enabled": True}
    eval_on, eval_batches = bool(ev.get("enabled", True)) if ev else False, int(ev.get("batches", 1))
    eval_no_grad = bool(ev.get("no_grad", True))
    eval_keep = bool(ev.get("accumulate_loss_without_item", False))
    return set_to_none, zero_first, held, keep_losses, eval_on, eval_batches, eval_no_grad, eval_keep


def run(cfg, hook, log, prepare_model=None):
    """Runs the configured loop with recording on; returns the sizes of things worth checking.
    `prepare_model(model)` returns the model the loop trains (tensor_parallel_capture.py
    parallelizes it there)."""
    import contextlib
    import random
    import torch
    import models
    import jobs
    import activation_offload

    seed = int(cfg.get("seed", 0))
    torch.manual_seed(seed)
    random.seed(seed)
    torch.set_num_threads(1)

    name, family, dims, options = resolve_model(cfg["model"], cfg["_dir"], bool(cfg.get("_transformers")))
    batch, accum = int(cfg.get("batch_size", 1)), int(cfg.get("grad_accum_steps", 1))
    seq = int(cfg.get("seq_len") or cfg.get("image_size") or 0)
    iters = int(cfg.get("iterations", 3))  # the planner's default
    precision = _mode(cfg.get("precision"), "fp32")
    ckpt = _mode(cfg.get("checkpointing"), "none")
    if ckpt not in ("none", "full"):
        raise ValueError(f"checkpointing {ckpt!r}: the capture supports none and full")
    ckpt_cfg = cfg.get("checkpointing")
    models.CHECKPOINT_REENTRANT = bool(ckpt_cfg.get("reentrant", True)) if isinstance(ckpt_cfg, dict) else True
    models.LOSS_CHUNKS = int((cfg.get("loss") or {}).get("chunks", 1))
    attention = str(cfg.get("attention", "eager"))
    if attention != "eager":
        # torch 1.13 has no F.scaled_dot_product_attention: every model runs eager attention
        raise ValueError(f"attention {attention!r}: the torch 1.13 CPU capture runs only 'eager'")
    device = _mode(cfg.get("device"), "cpu") if not isinstance(cfg.get("device"), dict) \
        else str(cfg["device"].get("profile", "cpu"))
    if device != "cpu":
        raise ValueError(f"device {device!r}: a CPU capture needs a scenario with device: cpu")
    (set_to_none, zero_first, held, keep_losses,
     eval_on, eval_batches, eval_no_grad, eval_keep) = loop_settings(cfg)
    if precision == "amp_bf16":
        autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16)  # noqa: E731
    elif precision in ("fp32", "pure_bf16"):
        autocast = contextlib.nullcontext
    else:
        raise ValueError(f"precision {precision!r}: the CPU capture supports fp32, amp_bf16, pure_bf16")
    gen = torch.Generator().manual_seed(seed + 1)

    gc.collect()
    gc.disable()  # cyclic GC would free at arbitrary points; autograd graphs have no cycles here
    t_setup = time.time()
    hook.start(filter_caller=not cfg.get("_no_caller_filter"))
    hook.mark("setup")
    # `loading` (docs/scenario-format.md#job): built at its dtype (the default dtype set while
    # the modules are constructed), or built in fp32 and then converted with .to(dtype).
    weights = cfg.get("weights") or {}
    weights = weights.get("format") if isinstance(weights, dict) else weights
    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(str(weights)) or \
        (torch.bfloat16 if precision == "pure_bf16" else None)
    loading = cfg.get("loading") or "on_device"
    loading = loading.get("method", "on_device") if isinstance(loading, dict) else str(loading)
    if half is not None and loading != "fp32_then_cast":
        torch.set_default_dtype(half)
    if family == "graph":
        import graph_models
        model = graph_models.build(dims["source"], checkpointing=(ckpt == "full"), compile_settings=cfg.get("compile"))
        make_batch = lambda family, dims, b, s, g: graph_models.make_batch(model, b, s)  # noqa: E731
    elif family == "hf":
        import hf_models
        worst = str((cfg.get("moe") or {}).get("imbalance", "worst")) == "worst"
        model = hf_models.build(dims, dropout=_dropout(cfg.get("dropout", 0.0)), use_checkpoint=(ckpt == "full"),
                                moe_force_expert=0 if worst else None)
        make_batch = models.make_batch
    else:
        model = models.build_model(family, dims, options, dropout=_dropout(cfg.get("dropout", 0.0)),
                                   attention=attention, checkpointing=(ckpt == "full"))
        make_batch = lambda family, dims, b, s, g: models.make_batch(family, dims, b, s, g, options=options)  # noqa: E731
    torch.set_default_dtype(torch.float32)
    if half is not None and loading == "fp32_then_cast":
        model = model.to(half)
    if prepare_model is not None:
        model = prepare_model(model)
    model.train()
    job = jobs.job_settings(cfg, iters)
    if cfg.get("training"):
        jobs.set_trainable(model, cfg["training"])
    if jobs.wants_input_require_grads(cfg, ckpt == "full"):
        jobs.enable_input_require_grads(model)
    offloading = activation_offload.context(model, cfg)  # activation_offloading (nullcontext when off)
    opt_cfg = cfg.get("optimizer") or {}
    opt_cfg = {"type": opt_cfg} if isinstance(opt_cfg, str) else opt_cfg
    if job[0] != "train":
        opt = None
    elif opt_cfg.get("in_backward"):
        opt = OptimizerInBackward(torch, model.parameters(), opt_cfg)
    else:
        opt = make_optimizer(torch, model.parameters(), opt_cfg, named=list(model.named_parameters()))
        if family == "graph" and cfg.get("compile"):  # graph_models was imported above
            if "optimizer" in graph_models.compile_scopes(cfg["compile"]):
                # compile scope optimizer: optimizer.step wrapped in torch.compile, as recipes write it
                opt.step = graph_models.compiled(opt.step, cfg["compile"])
    nparams = sum(p.numel() for p in model.parameters())
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    buffer_bytes = sum(b.numel() * b.element_size() for b in model.buffers())

    losses, eval_losses = [], []

    def evaluate():  # a function, like nanoGPT's estimate_loss: its locals die when it returns
        model.eval()
        with (torch.no_grad() if eval_no_grad else contextlib.nullcontext()):
            for _ in range(eval_batches):
                ex, ey = make_batch(family, dims, batch, seq, gen)
                with autocast():
                    if "logits" in held:  # the eval loop binds what the training loop binds
                        elogits, el = model(ex, ey)  # noqa: F841 (lives until rebound)
                    else:
                        el = model(ex, ey)[1]
                eval_losses.append(el if eval_keep else el.item())
        model.train()

    logits = loss = None
    # The loop computes the loss itself (a plain cross-entropy over the logits): families whose
    # own loss is exactly that.
    loss_outside = bool((cfg.get("training_loop") or {}).get("loss_outside_model", False))
    if loss_outside and family not in ("mlp", "resnet", "vit", "gpt2"):
        raise ValueError(f"training_loop.loss_outside_model: the capture computes a plain cross-entropy, not {family}'s loss")
    setup_s = time.time() - t_setup
    t0 = time.time()
    if job[0] == "generate":
        jobs.run_generate_job(cfg, hook, model, dims, batch, gen)
        losses.append(0.0)
        iters = 0
    elif job[0] != "train":
        jobs.run_forward_job(cfg, hook, model, lambda: make_batch(family, dims, batch, seq, gen), autocast, job)
        losses.append(0.0)
        iters = 0
    for it in range(iters):
        if zero_first:
            hook.mark(f"iter{it}/zero_grad")
            opt.zero_grad(set_to_none=set_to_none)
        for k in range(accum):
            prefix = f"iter{it}/" if accum == 1 else f"iter{it}/mb{k}/"  # the planner's labels
            hook.mark(prefix + "forward")
            x, y = make_batch(family, dims, batch, seq, gen)
            # the loop variables (x, y, logits, loss) live until they are rebound, as in any
            # `for x, y in loader:` loop; outputs not in caller_held_outputs are dropped at once
            if loss_outside:
                # `out = model(x); loss = criterion(out, y)`: rebinding `logits` frees the last
                # step's before the loss runs (training_loop.loss_outside_model)
                with autocast(), offloading():
                    logits = model(x)[0]
                    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
                if "logits" not in held:
                    logits = None
            else:
                with autocast(), offloading():
                    if "logits" in held:
                        logits, loss = model(x, y)
                    else:
                        loss = model(x, y)[1]
            if accum > 1:
                loss = loss / accum
            hook.mark(prefix + "backward")
            loss.backward()
            losses.append(loss if keep_losses else loss.item())
            if "loss" not in held:
                loss = None
        hook.mark(f"iter{it}/optimizer")
        opt.step()
        if not zero_first:
            hook.mark(f"iter{it}/zero_grad")
            opt.zero_grad(set_to_none=set_to_none)
        if eval_on:
            hook.mark(f"iter{it}/eval")
            evaluate()
    hook.mark("teardown")  # after it: frees as run() returns and its locals die
    hook.stop()
    loop_s = time.time() - t0
    gc.enable()
    log(f"model {name} ({family}): {nparams} parameters, {param_bytes} parameter bytes, "
        f"{buffer_bytes} buffer bytes; setup {setup_s:.2f}s, loop {loop_s:.2f}s; last loss "
        f"{[l for l in losses if l is not None][-1]}")
    return dict(name=name, family=family, parameters=nparams, parameter_bytes=param_bytes,
                buffer_bytes=buffer_bytes, setup_seconds=setup_s, loop_seconds=loop_s)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("config", help="capture config (YAML or JSON, scenario keys)")
    ap.add_argument("-o", "--output", required=True, help="trace file to write")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a config key (dotted path), e.g. --set optimizer.type=sgd")
    ap.add_argument("--survey", action="store_true",
                    help="also count malloc/calloc/realloc/aligned_alloc/memalign calls >= 4 KiB")
    ap.add_argument("--no-caller-filter", action="store_true",
                    help="record every 64-byte-aligned posix_memalign, not only libc10.so's")
    ap.add_argument("--transformers", action="store_true",
                    help="run a config.json model through transformers' own class (capture/hf_model.py), "
                         "and a generate job through its model.generate(), instead of validate/hf_models.py")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)
    t_start = time.time()
    ensure_preloaded(args.survey)
    sys.path.insert(0, HERE)
    cfg = load_config(args.config, args.set)
    cfg["_no_caller_filter"] = args.no_caller_filter
    cfg["_transformers"] = args.transformers
    log = (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr))
    import torch
    hook = Hook()
    info = run(cfg, hook, log)
    events = hook.events()
    header = [f"oomcast CPU capture of {args.config} (torch {torch.__version__}, validate/capture.py)",
              "config: " + json.dumps({k: v for k, v in cfg.items() if not k.startswith("_")},
                                      sort_keys=True),
              f"parameters: {info['parameters']}  parameter_bytes: {info['parameter_bytes']}  "
              f"buffer_bytes: {info['buffer_bytes']}"]
    n = write_trace(args.output, events, hook.labels, header)
    if args.survey:
        rows, align = hook.survey()
        print("routine          calls(other)  bytes(other)  calls(libc10)  bytes(libc10)   [>= 4096 B]")
        for r in rows:
            print(f"{r[0]:15s} {r[1]:13d} {r[2]:13d} {r[3]:14d} {r[4]:14d}")
        if align:
            print(f"posix_memalign >= 4096 B: alignment != 64: {align[0]} calls {align[1]} B; "
                  f"alignment 64: {align[2]} calls {align[3]} B")
    log(f"wrote {args.output}: {len(events)} events, {n} allocations; total {time.time() - t_start:.2f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
