#!/usr/bin/env python3
"""check_capture_classes.py: tests of the capture on classes of code users write (issue 25),
one per ctest test (capture/capture_tests.cmake), under the venv's python (torch 2.13):

    check_capture_classes.py address_reuse       a dead tensor's storage address reused is a new tensor
    check_capture_classes.py writes_into_views   after out[..., i] = a, out requires grad in the graph
    check_capture_classes.py stated_shape        nonzero, a boolean-mask index and unique with the model
                                                 file's data_dependent_shape()
    check_capture_classes.py unmaterialised      a 4.3B-parameter model made by torch.zeros on the CPU
    check_capture_classes.py repeat_fold         identical Linear(w, w) layers fold into a valid repeat
    check_capture_classes.py checkpoint_regions  torch.utils.checkpoint in forward marks its module
    check_capture_classes.py repeat_interleave   repeat_interleave by Python ints (in __init__ and forward)
                                                 is captured; by values computed in __init__ it is refused
                                                 naming the __init__ line
    check_capture_classes.py einops_absent       without einops: a file importing it is refused at its
                                                 import line; one whose import is optional is captured
    check_capture_classes.py fused_lstm          nn.LSTM is written as the CPU's fused oneDNN layers, the
                                                 workspace sized as torch sizes it at a batch not captured

Exit 77 (skip) without torch or yaml (validate/with_python.sh fails instead under CI=true).
"""
import os
import resource
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CAPTURE = os.path.dirname(HERE)
REPO = os.path.dirname(CAPTURE)
TOOL = os.path.join(CAPTURE, "oomcast_capture.py")
CORPUS = os.path.join(REPO, "validate", "capture_corpus")
sys.path.insert(0, CAPTURE)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def capture(source_or_path, *extra):
    """(exit status, stderr, graph document or None) of the capture CLI on a model file."""
    import yaml
    with tempfile.TemporaryDirectory() as tmp:
        path = source_or_path
        if "\n" in source_or_path:
            path = os.path.join(tmp, "model.py")
            with open(path, "w") as f:
                f.write(source_or_path)
        out = os.path.join(tmp, "graph.yaml")
        proc = subprocess.run([sys.executable, TOOL, path, "-o", out, "-q", *extra], capture_output=True, text=True)
        doc = None
        if os.path.exists(out):
            with open(out) as f:
                doc = yaml.safe_load(f)
        return proc.returncode, proc.stderr, doc


def statements(body):
    for s in body:
        if "body" in s:
            yield from statements(s["body"])
        else:
            yield s


def check_address_reuse():
    """Tensors the recorder meets outside its ops (a Python scalar wrapped by autograd) are
    looked up by storage and geometry; one made where a dead one lived is not the dead one."""
    import torch
    from recorder import Recorder, Recording
    mode = Recorder(Recording())
    seen = set()
    for _ in range(200):
        t = torch.empty((), device="meta")
        tid = mode.tensor_id(t)
        if tid in seen:
            fail(f"a new 0-dim tensor was taken for the dead tensor {tid} (its storage address reused)")
        seen.add(tid)
        del t
    print(f"PASS: 200 short-lived 0-dim tensors, 200 distinct ids")


WRITES_INTO_VIEWS = '''import torch, torch.nn as nn

class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.last = nn.Linear(8, 8), nn.Linear(8, 4)

    def forward(self, x):
        h = self.first(x)
        out = torch.zeros_like(h)
        out[..., 0::2] = h[..., 1::2]
        out[..., 1::2] = -h[..., 0::2]
        return self.last(out * 2.0)

def model():
    return M()

def batch(batch_size):
    return torch.randn(batch_size, 8), torch.randint(0, 4, (batch_size,))
'''


def check_writes_into_views():
    """out = zeros_like(h); out[..., i] = f(h): autograd makes out require grad from the first
    write on, so the ops reading it afterwards pass a gradient back (to `first`'s weights)."""
    rc, err, doc = capture(WRITES_INTO_VIEWS)
    if rc != 0:
        fail(f"capture failed: {err.strip()}")
    body = list(statements(doc["forward"]))
    zeros = [s for s in body if s.get("aten") == "zeros_like"]
    if not zeros:
        fail("no zeros_like statement in the graph")
    written = {zeros[0]["outputs"][0]["name"]}
    for s in body:  # views of out (detach, slices) are out too
        for o in s.get("outputs") or []:
            if o.get("view_of") in written:
                written.add(o["name"])
    readers = [s for s in body if s is not zeros[0] and s.get("aten") not in ("copy_", "slice.Tensor", "detach")
               and set(s.get("inputs") or [s.get("x"), s.get("a"), s.get("b")]) & written]
    if not readers:
        fail("no statement reads out after the writes")
    grads = readers[0].get("grads")
    if grads is not None and all(g == "none" for g in grads):
        fail(f"{readers[0]['name']} reads out after the writes but passes no gradient: {readers[0]}")
    print(f"PASS: {readers[0]['name']} reads the written tensor with grads {grads or '(catalogue op)'}")


STATED_SHAPE = '''import torch, torch.nn as nn

EXPERTS, DIM = 4, 8

class Routed(nn.Module):
    def __init__(self):
        super().__init__()
        self.router = nn.Linear(DIM, EXPERTS)
        self.experts = nn.ModuleList([nn.Linear(DIM, DIM) for _ in range(EXPERTS)])

    def forward(self, x):
        choice = self.router(x).argmax(-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            rows = torch.nonzero(choice == e).squeeze(-1)
            out = out.index_add(0, rows, expert(x[rows]))
        return out

def data_dependent_shape(op, inputs, sizes, line):
    if op == "nonzero":  # each expert takes its share of the tokens (a capacity the router keeps)
        return (sizes["batch_size"] // EXPERTS, 1)
    return None

def model():
    return Routed()

def batch(batch_size):
    return torch.randn(batch_size, DIM), torch.randint(0, DIM, (batch_size,))
'''


def check_stated_shape():
    """nonzero's size depends on values; the model file states it as a function of the sizes,
    and the capture fits it like any other shape (batch_size/4 at batch sizes 4, 8, 12)."""
    rc, err, doc = capture(STATED_SHAPE, "--sizes", "batch_size=4,8,12")
    if rc != 0:
        fail(f"capture failed: {err.strip()}")
    shapes = [s["outputs"][0]["shape"] for s in statements(doc["forward"]) if s.get("aten") == "nonzero"]
    if len(shapes) != 4 or any(shape != ["batch_size/4", 1] for shape in shapes):
        fail(f"nonzero's shapes: {shapes}, expected four [batch_size/4, 1]")
    rc, err, _doc = capture(STATED_SHAPE.replace("def data_dependent_shape", "def unused"))
    if rc != 2 or "model.py line 15" not in err or "data_dependent_shape" not in err:
        fail(f"without data_dependent_shape(): expected exit 2 naming line 15 and the advice, got {rc}: {err}")
    rc, err, doc = capture(MASKED_AND_UNIQUE, "--sizes", "batch_size=4,8,12")
    if rc != 0:
        fail(f"a boolean-mask index and unique with stated shapes: capture failed: {err.strip()}")
    body = list(statements(doc["forward"]))
    stated = {s["aten"].split(".")[0]: [o["shape"] for o in s["outputs"]] for s in body
              if s.get("aten", "").split(".")[0] in ("index", "_unique2")}
    if stated.get("index") != [["batch_size/2", 8]] or stated.get("_unique2") != [["batch_size/4"], [0], [0]]:
        fail(f"the stated shapes of the mask index and unique: {stated}")
    print(f"PASS: nonzero stated as {shapes[0]}; refused at model.py line 15 without the function; "
          f"mask index and unique stated as {stated}")


# A boolean mask (the tokens a router keeps) and unique (the experts used): value-dependent
# sizes the model file states.
MASKED_AND_UNIQUE = '''import torch, torch.nn as nn

class Keep(nn.Module):
    def __init__(self):
        super().__init__()
        self.score, self.fc = nn.Linear(8, 1), nn.Linear(8, 8)

    def forward(self, x):
        keep = self.score(x).squeeze(-1) > 0
        experts = torch.unique(self.score(x).argmax(-1) + torch.arange(x.shape[0]) % 4)
        return self.fc(x[keep]).sum(0, keepdim=True) + experts.float().sum()

def data_dependent_shape(op, inputs, sizes, line):
    if op == "index":       # half the tokens kept
        return (sizes["batch_size"] // 2, 8)
    if op == "_unique2":    # values, inverse (not asked for), counts (not asked for)
        return [(sizes["batch_size"] // 4,), (0,), (0,)]
    return None

def model():
    return Keep()

def batch(batch_size):
    return torch.randn(batch_size, 8), torch.randint(0, 8, (1,))
'''


def check_unmaterialised():
    """torch.zeros weights on the CPU (4.3 B parameters, 17 GB of fp32) cost the capture none
    of it: the parameter count is the model's and the capture's peak memory stays small."""
    sys.path.insert(0, CORPUS)
    import huge_cpu_zeros
    rc, err, doc = capture(os.path.join(CORPUS, "huge_cpu_zeros.py"))
    if rc != 0:
        fail(f"capture failed: {err.strip()}")
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    count = 0
    for entry in doc["parameters"]:
        count += _count(entry)
    if count != huge_cpu_zeros.PARAMETERS:
        fail(f"the graph declares {count} parameters, the model has {huge_cpu_zeros.PARAMETERS}")
    if peak_mib > 2048:
        fail(f"the capture's peak resident memory was {peak_mib:.0f} MiB: something was materialised")
    print(f"PASS: {count} parameters, the capture's peak resident memory {peak_mib:.0f} MiB")


LINEAR_STACK = '''import torch, torch.nn as nn

def model():
    return nn.Sequential(*[nn.Linear(32, 32) for _ in range(LAYERS)]HEAD)

def batch(batch_size):
    return torch.randn(batch_size, 32), torch.randint(0, CLASSES, (batch_size,))
'''


def _unbound_names(doc):
    """Names the forward or outputs read before anything binds them (the repeats written out)."""
    from repeats import binds_of, expand, leaves, refs_of
    bound = {e["name"] for e in expand(doc["parameters"]) + expand(doc.get("buffers") or [])}
    bound |= {e["name"] for e in doc["inputs"]}
    missing = []
    for leaf in leaves(expand(doc["forward"])):
        missing += [n for n in refs_of(leaf) if n not in bound]
        bound.update(binds_of(leaf))
    return missing + [n for n in doc["outputs"].values() if n not in bound]


def check_repeat_fold():
    """A stack of identical Linear(32, 32) layers folds into one repeat: closed by a
    Linear(32, 4) (same statement, other weight shape: not folded in), and ending the model
    (its output is the last layer's, renamed with the repeat's local). Every name read is bound."""
    from repeats import expand, leaves
    for layers, head, classes in ((6, ", nn.Linear(32, 4)", 4), (6, "", 32)):
        source = LINEAR_STACK.replace("LAYERS", str(layers)).replace("HEAD", head).replace("CLASSES", str(classes))
        rc, err, doc = capture(source)
        if rc != 0:
            fail(f"capture failed: {err.strip()}")
        missing = _unbound_names(doc)
        if missing:
            fail(f"{layers} layers{head or ''}: names read before they are bound: {missing}")
        shapes = {e["name"]: e["shape"] for e in expand(doc["parameters"])}
        weights = [s["weight"] for s in leaves(expand(doc["forward"])) if s.get("op") == "linear"]
        expected = [f"{n}.weight" for n in range(layers + (1 if head else 0))]
        if weights != expected:
            fail(f"{layers} layers{head}: the linear ops read {weights}, expected {expected}")
        repeats = [s for s in doc["forward"] if "repeat" in s]
        if len(repeats) != 1 or repeats[0]["repeat"] != layers:
            fail(f"{layers} layers{head}: expected one repeat of {layers}, got {[s.get('repeat') for s in repeats]}")
        print(f"PASS: {layers} Linear(32, 32){head}: a repeat of {layers}, weights {[shapes[w] for w in weights][-1]} "
              f"last, outputs {doc['outputs']}")


CHECKPOINTED = '''import torch, torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.Linear(16, 16)
        self.mlp = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 16))

    def forward(self, x):
        x = x + self.attn(x)
        return x + checkpoint(self.mlp, x, use_reentrant=False)

class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(3)])
        self.head, self.tail = nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        x = checkpoint(self.head, x, use_reentrant=True)
        return checkpoint(lambda y: self.tail(y.relu()), x, use_reentrant=False)

def model():
    return M()

def batch(batch_size):
    return torch.randn(batch_size, 16, requires_grad=True), torch.randint(0, 4, (batch_size,))
'''


def check_checkpoint_regions():
    """torch.utils.checkpoint called in forward: the module it runs is marked `checkpoint:`
    with its use_reentrant (and the blocks around it are not checkpoint units, which do not
    nest); a checkpointed lambda is named in the capture's output as planned without it."""
    from repeats import expand
    rc, err, doc = capture(CHECKPOINTED)
    if rc != 0:
        fail(f"capture failed: {err.strip()}")
    marked = {}

    def walk(body, prefix):
        for s in body:
            if "module" in s:
                path = f"{prefix}.{s['module']}" if prefix else s["module"]
                if "checkpoint" in s or s.get("checkpoint_unit"):
                    marked[path] = s.get("checkpoint", "unit")
                walk(s["body"], path)
            elif "body" in s:
                walk(s["body"], prefix)
    walk(expand(doc["forward"]), "")
    expected = {"blocks.0.mlp": "non_reentrant", "blocks.1.mlp": "non_reentrant", "blocks.2.mlp": "non_reentrant",
                "head": "reentrant"}
    if marked != expected:
        fail(f"checkpointed modules {marked}, expected {expected}")
    rc, out = _capture_output(CHECKPOINTED)
    if "not one module call" not in out:
        fail(f"the capture did not say the lambda's checkpoint is planned without it: {out}")
    print(f"PASS: {marked}; the checkpointed lambda is reported")


REPEAT_INTERLEAVE = '''import torch, torch.nn as nn

class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.register_buffer("freqs", torch.arange(4).float().repeat_interleave(2, dim=-1))

    def forward(self, x):
        h = self.fc(x) * self.freqs
        h = torch.repeat_interleave(h, 2, dim=-1)
        return h.reshape(x.shape[0], 8, 2).sum(-1)

def model():
    return M()

def batch(batch_size):
    return torch.randn(batch_size, 8), torch.randint(0, 8, (batch_size,))
'''


def check_repeat_interleave():
    """repeat_interleave(t, 2, dim=-1) by a Python int has a size known from the shapes (issue 25
    item 2): captured, in __init__ and in forward. By counts drawn at random in __init__ its size
    depends on values: refused in one line naming model(), the __init__ line and what to do."""
    rc, err, doc = capture(REPEAT_INTERLEAVE)
    if rc != 0:
        fail(f"repeat_interleave by ints was refused: {err.strip()}")
    counts = REPEAT_INTERLEAVE.replace(
        'torch.arange(4).float().repeat_interleave(2, dim=-1)',
        'torch.arange(8).float().repeat_interleave(torch.randint(1, 3, (8,)))[:8]')
    rc, err, _doc = capture(counts)
    lines = [l for l in err.splitlines() if l.strip()]
    if rc != 2 or len(lines) != 1 or "while model() builds the model (model.py line 7)" not in lines[0] \
            or "data_dependent_shape" not in lines[0]:
        fail(f"counts computed in __init__: expected exit 2 and one line naming model() and line 7; got {rc}: {err}")
    print(f"PASS: repeat_interleave by ints captured; by random counts refused: {lines[0]}")


# Runs the capture CLI with `einops` unimportable, as on a machine without it.
_WITHOUT_EINOPS = """
import importlib.abc, runpy, sys
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "einops" or name.startswith("einops."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Absent())
sys.argv = sys.argv[1:]
sys.path.insert(0, __import__("os").path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
"""

OPTIONAL_EINOPS = '''import torch, torch.nn as nn
try:
    from einops import rearrange
except ImportError:  # the model runs without einops
    rearrange = None

class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.out = nn.Linear(16, 48), nn.Linear(16, 16)

    def forward(self, x):
        qkv = self.qkv(x)
        if rearrange is not None:
            q, k, v = rearrange(qkv, "b n (three h d) -> three b h n d", three=3, h=4)
        else:
            q, k, v = qkv.reshape(x.shape[0], x.shape[1], 3, 4, 4).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-1, -2)).softmax(-1) @ v
        return self.out(att.transpose(1, 2).reshape(x.shape[0], x.shape[1], 16))

def model():
    return nn.Sequential(Heads(), nn.Linear(16, 10))

def batch(batch_size, seq_len):
    return torch.randn(batch_size, seq_len, 16), torch.randint(0, 10, (batch_size, seq_len))
'''


def check_einops_absent():
    """einops/einx are optional packages: with einops installed the corpus's einops transformer
    is captured (cpu_validation.captured.einops_transformer); without it the same file is refused
    in one line at its import line, and a file whose import is optional is captured both ways
    (the same parameters)."""
    import yaml
    with tempfile.TemporaryDirectory() as tmp:
        def run(path, without):
            out = os.path.join(tmp, "g.yaml")
            if os.path.exists(out):
                os.remove(out)
            cmd = [sys.executable] + (["-c", _WITHOUT_EINOPS] if without else []) + [TOOL, path, "-o", out, "-q"]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            doc = None
            if os.path.exists(out):
                with open(out) as f:
                    doc = yaml.safe_load(f)
            return proc.returncode, proc.stderr, doc
        rc, err, doc = run(os.path.join(CORPUS, "einops_transformer.py"), True)
        lines = [l for l in err.splitlines() if l.strip()]
        if rc != 2 or len(lines) != 1 or doc is not None or "No module named 'einops'" not in lines[0] \
                or "einops_transformer.py line 7" not in lines[0]:
            fail(f"einops_transformer.py without einops: expected exit 2, one line naming line 7; got {rc}: {err}")
        optional = os.path.join(tmp, "optional.py")
        with open(optional, "w") as f:
            f.write(OPTIONAL_EINOPS)
        counts = []
        for without in (False, True):
            rc, err2, doc = run(optional, without)
            if rc != 0:
                fail(f"optional einops ({'absent' if without else 'installed'}): capture failed: {err2.strip()}")
            counts.append(sum(_count(e) for e in doc["parameters"]))
        if counts[0] != counts[1]:
            fail(f"optional einops: {counts[0]} parameters with it, {counts[1]} without")
    print(f"PASS: without einops: {lines[0]}; optional einops captured both ways ({counts[0]} parameters)")


LSTM_LM = '''import torch, torch.nn as nn

class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 24)
        self.lstm = nn.LSTM(24, 40, num_layers=2, batch_first=True)
        self.head = nn.Linear(40, 50)

    def forward(self, ids):
        out, _state = self.lstm(self.embed(ids))
        return self.head(out)

def model():
    return LM()

def batch(batch_size, seq_len):
    ids = torch.randint(0, 50, (batch_size, seq_len + 1))
    return ids[:, :-1], ids[:, 1:]
'''


def check_fused_lstm():
    """nn.LSTM on the CPU runs oneDNN's fused layer (one aten::mkldnn_rnn_layer per layer, which
    saves its workspace), not the per-step ops the meta device decomposes it into: the graph
    has one generic mkldnn_rnn_layer per layer, and its workspace, evaluated at a batch and
    length the capture did not run, has the bytes the real CPU kernel returns there."""
    import re
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    rc, err, doc = capture(LSTM_LM)
    if rc != 0:
        fail(f"capture failed: {err.strip()}")
    layers = [s for s in statements(doc["forward"]) if s.get("aten") == "mkldnn_rnn_layer"]
    if len(layers) != 2 or any(s["outputs"][3].get("dtype") != "uint8" for s in layers):
        fail(f"expected two mkldnn_rnn_layer ops with a uint8 workspace; got {layers}")
    per_step = [s.get("aten") for s in statements(doc["forward"]) if s.get("aten") in ("sigmoid", "tanh", "unsafe_chunk")]
    if per_step:
        fail(f"per-step LSTM ops left in the graph: {per_step[:4]}")
    sizes = {"batch_size": 7, "seq_len": 29}
    expr = layers[0]["outputs"][3]["shape"][0]
    planned = eval(re.sub(r"/", "//", expr), {"__builtins__": {}}, sizes)  # noqa: S307 (the file's arithmetic)
    seen = []

    class Workspaces(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if "mkldnn_rnn_layer.default" in str(func):
                seen.append(out[3].numel())
            return out
    sys.path.insert(0, CAPTURE)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "lm.py")
        with open(path, "w") as f:
            f.write(LSTM_LM)
        import runner
        user = runner.load_model_file(path)
        inputs, _target = user.batch(**sizes)
        with Workspaces():
            user.model()(inputs)
    if not seen or seen[0] != planned:
        fail(f"workspace at {sizes}: the graph says {planned} B, the CPU kernel made {seen}")
    print(f"PASS: 2 fused LSTM layers; workspace at {sizes}: {planned} B, as the CPU kernel's")


def _capture_output(source):
    """(exit status, stdout + stderr) of the capture CLI without -q."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.py")
        with open(path, "w") as f:
            f.write(source)
        proc = subprocess.run([sys.executable, TOOL, path, "-o", os.path.join(tmp, "g.yaml")],
                              capture_output=True, text=True)
        return proc.returncode, proc.stdout + proc.stderr


def _count(entry, times=1):
    if "repeat" in entry:
        return sum(_count(e, times * int(entry["repeat"])) for e in entry["body"])
    if "shape" not in entry or "tied_to" in entry or "construction_temporary" in entry:
        return 0
    n = 1
    for d in entry["shape"]:
        n *= int(d)
    return times * n


def main():
    try:
        import torch  # noqa: F401
        import yaml  # noqa: F401
    except ImportError as err:
        print(f"SKIP: {sys.executable} cannot import torch and yaml ({err})")
        return 77
    checks = {"address_reuse": check_address_reuse, "writes_into_views": check_writes_into_views,
              "stated_shape": check_stated_shape, "unmaterialised": check_unmaterialised,
              "repeat_fold": check_repeat_fold, "checkpoint_regions": check_checkpoint_regions,
              "repeat_interleave": check_repeat_interleave, "einops_absent": check_einops_absent,
              "fused_lstm": check_fused_lstm}
    if len(sys.argv) != 2 or sys.argv[1] not in checks:
        fail("usage: check_capture_classes.py " + "|".join(checks))
    checks[sys.argv[1]]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
