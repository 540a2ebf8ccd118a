#!/usr/bin/env python3
"""check_capture.py: the capture's tests, one per ctest test (capture/capture_tests.cmake), run
with the venv's python (torch 2.13):

    .venv/bin/python capture/tests/check_capture.py example NAME   # capture examples/NAME.py
    .venv/bin/python capture/tests/check_capture.py bad CASE       # a bad model file: one line, exit 2
    .venv/bin/python capture/tests/check_capture.py preset PRESET OOMCAST  # a captured family plans as its preset
    .venv/bin/python capture/tests/check_capture.py construction CASE  # model()'s temporaries (tied, template, short_lived)
    .venv/bin/python capture/tests/check_capture.py sdpa causal OOMCAST  # SDPA captured as `attention`

An example passes when its graph file (1) binds every name before it is used and names a loss,
(2) counts the parameters PyTorch counts, and (3) has shapes that, evaluated at sizes the
capture never ran (batch_size 7, seq_len 20, image_size 128 / the file's declared sizes times
something), equal the shapes of a fresh recording at those sizes. Exit 77 (skip) when this
python has no torch or yaml (validate/with_python.sh, which ctest runs it through, fails instead
under CI=true).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CAPTURE = os.path.dirname(HERE)
TOOL = os.path.join(CAPTURE, "oomcast_capture.py")
# sizes never used by a capture's runs (DEFAULT_VALUES are 2,3,5 / 16,24,40 / 64,96,160)
CHECK_SIZES = {"batch_size": 7, "seq_len": 20, "image_size": 128}


def skip_without_torch():
    try:
        import torch  # noqa: F401
        import yaml  # noqa: F401
    except ImportError as err:
        print(f"SKIP: {sys.executable} cannot import torch and yaml ({err}); scripts/make-venv.sh builds .venv/")
        sys.exit(77)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run_capture(model, out, *extra):
    proc = subprocess.run([sys.executable, TOOL, model, "-o", out, *extra], capture_output=True, text=True)
    return proc.returncode, proc.stdout, proc.stderr


def evaluate(expr, sizes):
    if isinstance(expr, int):
        return expr
    text = re.sub(r"\$\{[^}]*\}", "0", str(expr)).replace("/", "//")
    return int(eval(text, {"__builtins__": {}}, dict(sizes)))  # noqa: S307 (the file's own arithmetic)


def walk(statements, visit):
    for s in statements:
        if "body" in s:
            if s.get("frame"):
                visit({"name": s.get("module", "frame"), "inputs": s["frame"]})
            walk(s["body"], visit)
        else:
            visit(s)


def check_names(doc):
    """Every tensor reference is bound earlier (parameters, buffers, inputs, op outputs)."""
    bound = set()
    for section in ("parameters", "buffers", "inputs"):
        for entry in doc.get(section) or []:
            if "construction_temporary" not in entry:
                bound.add(entry["name"])
    refs = {"x", "weight", "bias", "a", "b", "indices", "logits", "targets", "running_mean",
            "running_var", "q", "k", "v", "mask", "cos", "sin", "from"}

    def visit(s):
        used = [s[k] for k in refs if k in s and isinstance(s[k], str)]
        used += list(s.get("inputs") or []) + list(s.get("hold") or [])
        own = {o["name"] for o in s.get("outputs") or []}
        used += [n for n in s.get("saves") or [] if n not in own]  # an op may save its own outputs
        for name in used:
            if name not in bound:
                fail(f"op {s.get('name')} uses {name} before anything binds it")
        if s.get("op") == "generic":
            for o in s["outputs"]:
                bound.add(o["name"])
        elif "out" in s:
            for name in (s["out"] if isinstance(s["out"], list) else [s["out"]]):
                bound.add(name)
    walk(doc["forward"], visit)
    loss = (doc.get("outputs") or {}).get("loss")
    if loss not in bound:
        fail(f"outputs.loss {loss!r} is not bound")


def check_example(name):
    import torch
    import yaml
    sys.path.insert(0, CAPTURE)
    import runner
    path = os.path.join(CAPTURE, "examples", name + ".py")
    needs = getattr(runner.load_model_file(path), "needs_torch_feature", None)
    if needs and not _torch_has(needs):
        print(f"SKIP: {name} needs {needs}, which torch {torch.__version__} lacks")
        sys.exit(77)
    docs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for flag in ("--no-repeat", None):
            graph = os.path.join(tmp, name + ".graph.yaml")
            rc, _, err = run_capture(path, graph, *([flag] if flag else []))
            if rc != 0:
                fail(f"capture {flag or ''} exited {rc}: {err.strip()}")
            with open(graph) as f:
                docs[flag] = yaml.safe_load(f)
                f.seek(0)
                lines = len(f.read().splitlines())
    doc, folded = docs["--no-repeat"], docs[None]
    for d in (doc, folded):
        if d.get("oomcast_graph") != 1:
            fail("no oomcast_graph: 1")
    check_names(doc)
    # (1b) the file with repeats folded is the same program once its repeats are written out
    import repeats
    if normalized(doc, repeats) != normalized(folded, repeats):
        fail("the file with repeats folded differs from the file without, once expanded")
    nrepeat = json.dumps(folded).count('"repeat"')
    # (2) the parameter count PyTorch gives
    user = runner.load_model_file(path)
    torch.manual_seed(0)
    from recorder import Recorder, Recording
    with Recorder(Recording()):  # on the meta device: a 6.7B model needs no memory
        expected = sum(p.numel() for p in user.model().parameters())
    counted = sum(_numel([evaluate(d, {}) for d in p["shape"]]) for p in doc["parameters"]
                  if "tied_to" not in p and "construction_temporary" not in p)
    if counted != expected:
        fail(f"the graph file has {counted} parameters, PyTorch counts {expected}")
    # (2b) the model file's optimizer(), when it has one, is the file's optimizer: section
    if callable(getattr(user, "optimizer", None)):
        with Recorder(Recording()):
            opt = user.optimizer(user.model().parameters())
        want = type(opt).__name__.lower()
        got = (folded.get("optimizer") or {}).get("type")
        if got != want:
            fail(f"the model file builds torch.optim.{type(opt).__name__}; the graph file's optimizer is {got}")
        if opt.defaults.get("foreach") is False and folded["optimizer"].get("impl") != "single_tensor":
            fail(f"optimizer(foreach=False) is written as impl {folded['optimizer'].get('impl')}")
    # (3) shapes at sizes the capture did not run
    keys = runner.size_keys(user)
    declared = getattr(user, "sizes", None) or {}
    sizes = {k: (2 * max(declared[k]) if k in declared else CHECK_SIZES[k]) for k in keys}
    rec = runner.record(user, path, sizes)
    checked = 0
    shapes = {}
    for entry in doc["inputs"]:
        shapes[entry["name"]] = entry["shape"]

    def visit(s):
        for o in s.get("outputs") or []:
            if isinstance(o, dict) and "shape" in o:
                shapes[o["name"]] = o["shape"]
    walk(doc["forward"], visit)
    by_name = {r.name: r for r in rec.tensors if r.name}
    for tname, shape in shapes.items():
        m = re.fullmatch(r"t(\d+)", tname)
        r = rec.tensors[int(m.group(1))] if m else by_name.get(tname)
        if r is None:
            continue
        want = [evaluate(d, sizes) for d in shape]
        if list(r.shape) != want:
            fail(f"{tname}: the file says {shape} = {want} at {sizes}, PyTorch makes {list(r.shape)}")
        checked += 1
    print(f"PASS: {name}: {counted} parameters (PyTorch: {expected}); {checked} shapes match a fresh "
          f"run at {sizes}; {nrepeat} repeats fold it to {lines} lines, the same program expanded")


def _torch_has(dotted):
    import importlib
    module, _, attr = dotted.rpartition(".")
    try:
        return hasattr(importlib.import_module(module), attr)
    except ImportError:
        return False


def check_sdpa(oomcast):
    """examples/sdpa_causal.py, captured under torch 2.x, writes each F.scaled_dot_product_attention
    call as one causal `attention` op, so the scenario's backend applies: planned on a100-80gb in
    amp_bf16 at seq_len 2048, sdpa_math keeps each layer's fp32 s x s probabilities for the
    backward and flash keeps none, so math plans at least that much higher."""
    import torch
    import yaml
    if not _torch_has("torch.nn.functional.scaled_dot_product_attention"):
        print(f"SKIP: torch {torch.__version__} has no F.scaled_dot_product_attention")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        graph = os.path.join(tmp, "sdpa_causal.graph.yaml")
        rc, _, err = run_capture(os.path.join(CAPTURE, "examples", "sdpa_causal.py"), graph, "--no-repeat")
        if rc != 0:
            fail(f"capture exited {rc}: {err.strip()}")
        with open(graph) as f:
            doc = yaml.safe_load(f)
        ops = []
        walk(doc["forward"], ops.append)
        attention = [s for s in ops if s.get("op") == "attention"]
        leftovers = sorted({s["aten"] for s in ops if s.get("aten", "").split(".")[0] in
                            ("bmm", "_safe_softmax", "softmax", "_softmax", "baddbmm", "tril", "masked_fill")})
        if len(attention) != 2 or not all(s.get("causal") is True for s in attention) or leftovers:
            fail(f"expected 2 causal attention ops and no math-backend ops; got {attention}, generic {leftovers}")
        peaks = {}
        batch, seq, heads, layers = 4, 2048, 4, 2
        for backend in ("flash", "sdpa_math"):
            scenario = os.path.join(tmp, backend + ".yaml")
            with open(scenario, "w") as f:
                f.write(f"model: {graph}\nbatch_size: {batch}\nseq_len: {seq}\ndevice: a100-80gb\n"
                        f"precision: amp_bf16\nattention: {backend}\n")
            peaks[backend] = plan_peak(oomcast, scenario)
    probabilities = layers * batch * heads * seq * seq * 4
    gap = peaks["sdpa_math"] - peaks["flash"]
    if gap < probabilities:
        fail(f"sdpa_math plans {peaks['sdpa_math']} B, flash {peaks['flash']} B: {gap} B apart, less than the "
             f"{probabilities} B of fp32 probabilities math saves")
    print(f"PASS: sdpa_causal: 2 causal attention ops; a100-80gb amp_bf16 b{batch} s{seq}: sdpa_math "
          f"{peaks['sdpa_math']} B, flash {peaks['flash']} B ({gap / probabilities:.2f}x the saved probabilities)")


def normalized(doc, repeats):
    """The document with repeats expanded, aliases bound before a repeat dropped and every
    bound name replaced by its binding's position: two spellings of one program compare equal."""
    names, counter = {}, [0]

    def ref(n):
        return names.get(n, n)

    def bind(n):
        counter[0] += 1
        names[n] = f"v{counter[0]}"
        return names[n]

    def walk(stmts):
        out = []
        for s in stmts:
            if "body" in s:
                s2 = {k: v for k, v in s.items() if k not in ("body", "checkpoint_unit")}
                if "frame" in s2:
                    s2["frame"] = [ref(n) for n in s2["frame"]]
                s2["body"] = walk(s["body"])
                out.append(s2)
            elif s.get("aten") == "alias":
                names[s["outputs"][0]["name"]] = ref(s["inputs"][0])
            else:
                s2 = repeats.map_statement(s, ref, bind)
                s2.pop("name", None) if s2.get("op") == "generic" and s2.get("name", "").startswith("r") else None
                out.append(s2)
        return out
    return {"parameters": repeats.expand(doc["parameters"]), "buffers": repeats.expand(doc.get("buffers") or []),
            "forward": walk(repeats.expand(doc["forward"])),
            "outputs": {k: ref(v) for k, v in doc["outputs"].items()}}


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


BAD = {
    "no_model": ("import torch\n\ndef batch(batch_size):\n    return torch.zeros(batch_size, 4), None\n",
                 "defines no model()"),
    "forward_fails": ("import torch, torch.nn as nn\n\ndef model():\n    return nn.Linear(4, 3)\n\n"
                      "def batch(batch_size):\n    return torch.zeros(batch_size, 5), torch.zeros(batch_size, dtype=torch.long)\n",
                      "the forward failed"),
    "data_dependent": ("import torch, torch.nn as nn\n\nclass M(nn.Module):\n    def __init__(self):\n"
                       "        super().__init__()\n        self.fc = nn.Linear(4, 3)\n\n    def forward(self, x):\n"
                       "        return self.fc(x[x.sum(-1) > 0])\n\ndef model():\n    return M()\n\n"
                       "def batch(batch_size):\n    return torch.randn(batch_size, 4), torch.zeros(batch_size, dtype=torch.long)\n",
                       "data-dependent shape: aten::index in the model's forward (data_dependent.py line 9)"),
    # a value-dependent op in __init__: the refusal names model() and the __init__ line
    "data_dependent_init": ("import torch, torch.nn as nn\n\nclass M(nn.Module):\n    def __init__(self):\n"
                            "        super().__init__()\n        self.fc = nn.Linear(4, 3)\n"
                            "        self.register_buffer('rows', (torch.randn(4) > 0).nonzero())\n\n"
                            "    def forward(self, x):\n        return self.fc(x)\n\ndef model():\n    return M()\n\n"
                            "def batch(batch_size):\n    return torch.randn(batch_size, 4), torch.zeros(batch_size, dtype=torch.long)\n",
                            "aten::nonzero while model() builds the model (data_dependent_init.py line 7)"),
    # a Python loop that never returns: the time limit ends it (--timeout)
    "loops_forever": ("import torch, torch.nn as nn\n\nclass M(nn.Module):\n    def __init__(self):\n"
                      "        super().__init__()\n        self.fc = nn.Linear(4, 3)\n\n    def forward(self, x):\n"
                      "        while True:\n            pass\n\ndef model():\n    return M()\n\n"
                      "def batch(batch_size):\n    return torch.randn(batch_size, 4), torch.zeros(batch_size, dtype=torch.long)\n",
                      "did not finish within 20 s (loops_forever.py line ", "--timeout", "20"),
    # a loop of tensor ops that never ends: the op cap ends it (--max-ops)
    "loops_over_ops": ("import torch, torch.nn as nn\n\nclass M(nn.Module):\n    def __init__(self):\n"
                       "        super().__init__()\n        self.fc = nn.Linear(4, 3)\n\n    def forward(self, x):\n"
                       "        while x.shape[0] > 0:\n            x = x * 1.0\n        return self.fc(x)\n\n"
                       "def model():\n    return M()\n\n"
                       "def batch(batch_size):\n    return torch.randn(batch_size, 4), torch.zeros(batch_size, dtype=torch.long)\n",
                       "more than 5000 tensor ops in one run in the model's forward (loops_over_ops.py line 10)",
                       "--max-ops", "5000"),
    # memory outside torch (numpy, a bytearray) beyond the machine's RAM: the address-space limit
    "more_memory_than_the_machine": ("import os, torch, torch.nn as nn\n\n"
                                     "def model():\n"
                                     "    table = bytearray(4 * os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE'))\n"
                                     "    return nn.Linear(4, 3)\n\n"
                                     "def batch(batch_size):\n    return torch.randn(batch_size, 4), torch.zeros(batch_size, dtype=torch.long)\n",
                                     "(more_memory_than_the_machine.py line 4)"),
    # control flow on a size: the refusal says which input of which op differs
    "size_dependent_program": ("import torch, torch.nn as nn\n\nclass M(nn.Module):\n    def __init__(self):\n"
                               "        super().__init__()\n        self.a, self.b = nn.Linear(4, 3), nn.Linear(4, 3)\n\n"
                               "    def forward(self, x):\n        return (self.a if x.shape[0] == 2 else self.b)(x)\n\n"
                               "def model():\n    return M()\n\n"
                               "def batch(batch_size):\n    return torch.randn(batch_size, 4), torch.zeros(batch_size, dtype=torch.long)\n",
                               "op 0 (aten::t in a): its module is a at batch_size=2 but b at batch_size=3"),
    # a model file importing a package this python lacks (einops where it is not installed)
    "missing_package": ("import torch, torch.nn as nn\nfrom oomcast_no_such_package import rearrange\n\n"
                        "def model():\n    return nn.Linear(4, 3)\n\n"
                        "def batch(batch_size):\n    return torch.randn(batch_size, 4), torch.zeros(batch_size, dtype=torch.long)\n",
                        "importing it failed: ModuleNotFoundError: No module named 'oomcast_no_such_package' "
                        "(missing_package.py line 2)"),
}


def check_bad(case):
    source, expected, *options = BAD[case]
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, case + ".py")
        with open(model, "w") as f:
            f.write(source)
        rc, out, err = run_capture(model, os.path.join(tmp, "out.yaml"), *options)
        wrote = os.path.exists(os.path.join(tmp, "out.yaml"))
    lines = [l for l in err.splitlines() if l.strip()]
    if rc != 2 or len(lines) != 1 or expected not in lines[0] or wrote:
        fail(f"{case}: expected exit 2 and one line containing {expected!r} (and no file); got exit {rc}, "
             f"{'a file, ' if wrote else ''}stderr {err!r}")
    print(f"PASS: {case}: exit 2, {lines[0]}")


def plan_peak(oomcast, scenario):
    proc = subprocess.run([oomcast, "plan", scenario, "--json"], capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        fail(f"oomcast plan {scenario} exited {proc.returncode}: {proc.stderr.strip()}")
    return json.loads(proc.stdout)["peak_allocated_bytes"]


def check_preset(preset, oomcast):
    """A validate/models.py family built from a preset's dims, captured, plans with the same
    peak as the preset (cpu device, fp32 and amp_bf16) within 0.5%. Both are planned with the
    rules of the torch running the capture (1.13 or 2.x), since the graph records what it ran."""
    import torch
    import yaml
    release = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    with open(os.path.join(os.path.dirname(CAPTURE), "models", preset + ".yaml")) as f:
        family = yaml.safe_load(f)["family"]
    # torch 2.x's nn.MultiheadAttention (ViT, the encoder) always calls SDPA, and on the meta
    # device the capture runs on SDPA takes its math backend (capture/README.md): the preset is
    # planned with that backend too. 1.13's MultiheadAttention is bmm and softmax either way.
    attention = "sdpa_math" if family in ("vit", "transformer_encoder") and not release.startswith("1.") else "eager"
    size = {"resnet": "image_size: 64\n", "vit": "", "mlp": ""}.get(family, "seq_len: 64\n")
    with tempfile.TemporaryDirectory() as tmp:
        graph = os.path.join(tmp, preset + ".graph.yaml")
        env = dict(os.environ, OOMCAST_FAMILY_PRESET=preset)
        proc = subprocess.run([sys.executable, TOOL, os.path.join(HERE, "family_model.py"), "-o", graph, "-q"],
                              capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            fail(f"capture exited {proc.returncode}: {proc.stderr.strip()}")
        report = []
        for precision in ("fp32", "amp_bf16"):
            peaks = []
            for model in (preset, graph):
                scenario = os.path.join(tmp, "s.yaml")
                with open(scenario, "w") as f:
                    f.write(f"model: {model}\nbatch_size: 4\n{size}device: cpu\nprecision: {precision}\n"
                            f"attention: {attention}\nallocator: {{torch_version: \"{release}\"}}\n")
                peaks.append(plan_peak(oomcast, scenario))
            err = (peaks[1] - peaks[0]) / peaks[0]
            if abs(err) > 0.005:
                fail(f"{preset} {precision}: the captured graph plans a peak of {peaks[1]} B, the preset "
                     f"{peaks[0]} B ({100 * err:+.2f}%)")
            report.append(f"{precision} {peaks[0]} B vs {peaks[1]} B ({100 * err:+.3f}%)")
    print(f"PASS: {preset} captured from validate/models.py plans as the preset: " + "; ".join(report))


def _construction_of(build):
    """The temporaries construction.py finds while build() runs (on the meta device)."""
    sys.path.insert(0, CAPTURE)
    from construction import constructing
    from recorder import Recorder, Recording
    mode = Recorder(Recording())
    with mode:
        with constructing(mode) as tracker:
            built = build()
        return tracker.finish(list(built.parameters()), list(built.buffers()))


def check_construction(case):
    """construction.py on small modules whose constructor temporaries are known by hand."""
    import torch.nn as nn

    class Tied(nn.Module):  # nanoGPT's order: the embedding's own weight dies at the tie
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(100, 16)
            self.ln = nn.LayerNorm(16)
            self.lm_head = nn.Linear(16, 100, bias=False)
            self.wte.weight = self.lm_head.weight

    class Template(nn.Module):  # the template layer is a local of __init__: alive until it returns
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(50, 32)
            layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, num_layers=2)
            self.head = nn.Linear(32, 3)

    class ShortLived(nn.Module):  # randn(...) / 4 frees the randn before the next parameter
        def __init__(self):
            super().__init__()
            self.a = nn.Parameter(torch.randn(8, 8) / 4)
            self.big = nn.Linear(64, 64)

    import torch
    if case == "tied":
        temps = _construction_of(Tied)
        if [(t["shape"], t["after"]) for t in temps] != [([100, 16], 0)]:
            fail(f"tied: expected the embedding's replaced [100, 16] weight, allocated first; got {temps}")
    elif case == "template":
        temps = _construction_of(Template)
        numel = sum(_numel(t["shape"]) for t in temps)
        layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
        want = sum(p.numel() for p in layer.parameters())
        if numel != want or any(t["after"] != 1 for t in temps):
            fail(f"template: expected one layer's {want} elements after embed.weight; got {numel}: {temps}")
    elif case == "short_lived":
        temps = _construction_of(ShortLived)
        if temps:
            fail(f"short_lived: a temporary freed before the construction peak was written: {temps}")
    else:
        fail(f"no construction case {case}")
    print(f"PASS: construction {case}: {temps}")


def main():
    skip_without_torch()
    kind, name = sys.argv[1], sys.argv[2]
    if kind == "example":
        check_example(name)
    elif kind == "bad":
        check_bad(name)
    elif kind == "preset":
        check_preset(name, sys.argv[3])
    elif kind == "construction":
        check_construction(name)
    elif kind == "sdpa":
        check_sdpa(sys.argv[3])
    else:
        fail("usage: check_capture.py example NAME | bad CASE")
    return 0


if __name__ == "__main__":
    sys.exit(main())
