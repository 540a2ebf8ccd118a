#!/usr/bin/python3
"""oomcast_capture.py: runs a model file's real PyTorch code (model(), batch(**sizes), loss,
backward) and writes its layer graph as an oomcast graph file (docs/graph-format.md).

    /usr/bin/python3 capture/oomcast_capture.py MODEL.py -o GRAPH.yaml [--sizes KEY=A,B,C ...]

MODEL.py defines model() (the nn.Module, requires_grad set as it is trained), batch(**sizes)
(returns (inputs, target); its keyword arguments are scenario sizes: batch_size, seq_len,
image_size) and optionally loss(output, target) (default: cross-entropy over the last
dimension), optimizer(parameters) (written as the graph file's `optimizer:`) and
`sizes = {"image_size": [64, 96, 128]}` (the three values the capture runs each size at).
capture/README.md says what is captured and the limits.
"""
import argparse
import contextlib
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def parse_sizes(items):
    out = {}
    for item in items:
        key, _, values = item.partition("=")
        try:
            out[key] = [int(v) for v in values.split(",")]
        except ValueError:
            raise SystemExit(f"oomcast_capture: --sizes {item}: expected KEY=A,B,C with integers")
    return out


def capture(model_path, declared_sizes=None, repeats=True, log=lambda s: None, max_ops=None,
            user=None):
    """(document, summary) for the model file; raises CaptureError on bad input. `user`, when
    given, stands for the imported file (model(), batch(), optional loss/optimizer/sizes), and
    model_path only names it: oomcast.capture() passes a live module that way."""
    import runner
    import symbolic
    from graph_build import GraphBuilder
    from recorder import CaptureError
    from repeats import fold_repeats

    user = user or runner.load_model_file(model_path)
    keys = runner.size_keys(user)
    if "batch_size" not in keys:
        raise CaptureError(f"{model_path}: batch() takes no batch_size keyword argument")
    if "seq_len" in keys and "image_size" in keys:
        raise CaptureError(f"{model_path}: batch() takes both seq_len and image_size; a graph file has one of them")
    declared = dict(getattr(user, "sizes", None) or {})
    declared.update(declared_sizes or {})
    plan = symbolic.size_plan(keys, declared)
    recordings = []
    t0 = time.time()
    for sizes in plan:
        recordings.append(runner.record(user, model_path, sizes, max_ops=max_ops or runner.MAX_OPS))
    run_s = time.time() - t0
    base = recordings[0]
    symbolic.check_same_structure(recordings, plan, _describe_op, _describe_tensor)
    runner.record_lifetimes(user, model_path, plan[0], base, max_ops=max_ops or runner.MAX_OPS)
    shapes = symbolic.symbolic_shapes(recordings, plan, keys, lambda tid: _describe_tensor(base, tid))
    builder = GraphBuilder(base, shapes, keys)
    import torch
    # the release the recording ran under: a scenario that names none plans it, one that names
    # another is warned (docs/graph-format.md, torch_version)
    release = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    doc = {"oomcast_graph": 1, "name": os.path.splitext(os.path.basename(model_path))[0], "torch_version": release}
    size_defaults = {k: {"default": plan[0][k]} for k in keys if k != "batch_size"}
    if size_defaults:
        doc["sizes"] = size_defaults
    doc["parameters"] = builder.parameters()
    buffers = builder.buffers()
    if buffers:
        doc["buffers"] = buffers
    doc["inputs"] = builder.inputs()
    forward = builder.forward()
    # outputs before folding: fold_repeats renames them with the locals they name
    doc["outputs"] = builder.outputs_section()
    if repeats:
        forward = fold_repeats(forward, doc, builder.shape_of_name)
    doc["forward"] = forward
    doc["outputs"] = doc.pop("outputs")  # written after the forward
    _insert_construction_temporaries(doc, base.construction_temporaries)
    optimizer, optimizer_note = runner.read_optimizer(user, model_path)
    if optimizer:
        doc["optimizer"] = optimizer
    params = sum(_numel(base.tensors[t].shape) for t in base.parameters)
    summary = {"parameters": params, "ops": len(base.ops), "runs": len(plan), "run_seconds": run_s,
               "generic": builder.generic, "catalogue": builder.catalogue, "sizes": keys,
               "sdpa_notes": builder.sdpa_notes, "checkpoint_notes": builder.checkpoint_notes,
               "fallback": sorted(set().union(*(r.fallback_ops for r in recordings))),
               "optimizer": optimizer, "optimizer_note": optimizer_note}
    return doc, summary


def _declared_count(entries, dims):
    """How many parameters (in model.parameters() order) a parameters: list declares."""
    count = 0
    for entry in entries:
        if "repeat" in entry:
            times = entry["repeat"]
            times = dims.get(times, 0) if isinstance(times, str) else int(times)
            count += times * _declared_count(entry["body"], dims)
        elif "name" in entry and "tied_to" not in entry:
            count += 1
    return count


def _insert_construction_temporaries(doc, temporaries):
    """Writes model()'s temporaries (construction.py) into parameters: at their place in the
    parameter order; one that falls inside a repeat goes after it."""
    if not temporaries:
        return
    dims = doc.get("dims") or {}
    out, declared, pending = [], 0, sorted(temporaries, key=lambda t: t["after"])

    def flush(upto):
        while pending and pending[0]["after"] <= upto:
            t = pending.pop(0)
            entry = {"construction_temporary": t["name"], "shape": t["shape"]}
            entry["dtype"] = "param" if t["dtype"] == "float32" else t["dtype"]
            out.append(entry)

    for entry in doc["parameters"]:
        flush(declared)
        out.append(entry)
        declared += _declared_count([entry], dims)
    flush(float("inf"))
    doc["parameters"] = out


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _describe_op(rec, op):
    return f"{op.op} in {op.module or 'the top level'}"


def _describe_tensor(rec, tid):
    r = rec.tensors[tid]
    if r.name:
        return f"{r.kind} {r.name}"
    if r.producer >= 0:
        op = rec.ops[r.producer]
        return f"the output of {op.op} in {op.module or 'the top level'} (op {op.index})"
    return f"tensor {tid}"


# A model file runs arbitrary code: the capture bounds its time (SIGALRM) and its memory (the
# address space, to the machine's RAM), so that a model that never returns, or asks for more
# memory than there is, ends in one line and exit 2 rather than a hang or the OOM killer.
DEFAULT_TIMEOUT_S = 1800.0


@contextlib.contextmanager
def bounded(timeout_s, model_path):
    import resource
    import signal

    from recorder import CaptureError

    def expired(_signum, frame):
        target, line = os.path.abspath(model_path), None
        while frame is not None and line is None:
            if os.path.abspath(frame.f_code.co_filename) == target:
                line = frame.f_lineno
            frame = frame.f_back
        where = f" ({os.path.basename(model_path)} line {line})" if line else ""
        raise CaptureError(f"the capture did not finish within {timeout_s:g} s{where} (a loop "
                           f"that never ends? --timeout raises the limit)")

    previous = signal.signal(signal.SIGALRM, expired) if timeout_s and timeout_s > 0 else None
    if previous is not None:
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
    limits = resource.getrlimit(resource.RLIMIT_AS)
    ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if limits[0] == resource.RLIM_INFINITY or limits[0] > ram:
        try:
            resource.setrlimit(resource.RLIMIT_AS, (ram, limits[1]))
        except (ValueError, OSError):
            pass
    try:
        yield
    except MemoryError:
        raise CaptureError(f"the model asked for more memory than this machine has ({ram / 2**30:.0f} GiB); "
                           f"nothing the capture records needs real memory: a tensor made outside torch "
                           f"(numpy, from_numpy) or a Python object that large?")
    finally:
        if previous is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        try:
            resource.setrlimit(resource.RLIMIT_AS, limits)
        except (ValueError, OSError):
            pass


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="the model file (defines model() and batch(**sizes))")
    ap.add_argument("-o", "--output", required=True, help="graph file to write (YAML)")
    ap.add_argument("--sizes", action="append", default=[], metavar="KEY=A,B,C",
                    help="the three values a size is captured at (default batch_size=2,3,5 "
                         "seq_len=16,24,40 image_size=64,96,160)")
    ap.add_argument("--no-repeat", action="store_true", help="write every block out (no repeat folding)")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                    help=f"give up after this many seconds (a model that never returns; default {DEFAULT_TIMEOUT_S:.0f})")
    ap.add_argument("--max-ops", type=int, default=None, metavar="N",
                    help="give up on a run after N tensor ops (a loop that never ends; default 2,000,000)")
    ap.add_argument("--compile", nargs="?", const="{}", metavar="SETTINGS",
                    help="capture the model as torch.compile runs it (capture/compiled_capture.py); SETTINGS is "
                         "the scenario's compile: map, e.g. '{scope: [model, loss], activation_memory_budget: 0.5}'")
    ap.add_argument("--for-device", choices=("cuda", "cpu"), default="cuda",
                    help="with --compile: the device kind the plan is for (inductor's channels-last layout "
                         "decisions differ; capture/compiled_layout.py). Default cuda")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)
    if os.path.exists(args.output) and os.path.exists(args.model) and os.path.samefile(args.output, args.model):
        print(f"oomcast_capture: error: -o {args.output} would overwrite the input file {args.model}; "
              "choose another path", file=sys.stderr)
        return 2
    log = (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr))
    t0 = time.time()
    try:
        import torch  # noqa: F401
    except ImportError:
        print("oomcast_capture: error: this python has no torch (use the venv's: scripts/make-venv.sh, then .venv/bin/python)",
              file=sys.stderr)
        return 2
    from recorder import CaptureError
    import yaml_emit
    try:
        with bounded(args.timeout, args.model):
            if args.compile is not None:
                import compiled_capture
                settings = compiled_capture.settings_from_text(args.compile)
                settings.for_device = args.for_device
                doc, summary = compiled_capture.capture(args.model, parse_sizes(args.sizes), settings, log=log)
            else:
                doc, summary = capture(args.model, parse_sizes(args.sizes), repeats=not args.no_repeat, log=log,
                                       max_ops=args.max_ops)
    except CaptureError as err:
        text = str(err) if str(err).startswith(args.model) else f"{args.model}: {err}"
        print(f"oomcast_capture: error: {text}", file=sys.stderr)
        return 2
    import torch
    header = [f"oomcast graph file captured from {os.path.basename(args.model)} by capture/oomcast_capture.py "
              f"(torch {torch.__version__})",
              "source: " + os.path.relpath(os.path.abspath(args.model), os.path.dirname(os.path.abspath(args.output))),
              f"parameters: {summary['parameters']}; sizes: {', '.join(summary['sizes'])}; "
              f"generic ops: {', '.join(f'{k} x{v}' for k, v in sorted(summary['generic'].items())) or 'none'}"]
    text = yaml_emit.dump(doc, header)
    try:
        with open(args.output, "w") as f:
            f.write(text)
    except OSError as err:
        print(f"oomcast_capture: error: cannot write {args.output}: {err.strerror}", file=sys.stderr)
        return 2
    log(f"{args.model}: {summary['parameters']} parameters, {summary['ops']} ops recorded in "
        f"{summary['runs']} runs ({summary['run_seconds']:.2f}s); wrote {args.output} "
        f"({len(text.splitlines())} lines) in {time.time() - t0:.2f}s")
    if summary["catalogue"]:
        log("catalogue ops: " + ", ".join(f"{k} x{v}" for k, v in sorted(summary["catalogue"].items())))
    if summary["generic"]:
        log("generic ops (no catalogue op; written with their recorded sizes and saves): " +
            ", ".join(f"{k} x{v}" for k, v in sorted(summary["generic"].items())))
    for note in sorted(set(summary["sdpa_notes"])):
        log(f"scaled_dot_product_attention kept as generic ops (the attention op would not be exact): {note}")
    for note in sorted(set(summary.get("checkpoint_notes", []))):
        log(f"torch.utils.checkpoint not marked in the graph file: {note}")
    if summary["optimizer"]:
        log("optimizer (the model file's optimizer(); a scenario's optimizer: overrides it): " +
            ", ".join(f"{k} {v}" for k, v in summary["optimizer"].items()))
    if summary["optimizer_note"]:
        log(summary["optimizer_note"])
    if summary["fallback"]:
        log("ran on CPU copies (no meta kernel in this torch): " + ", ".join(summary["fallback"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
