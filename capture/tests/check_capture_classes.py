#!/usr/bin/env python3
"""check_capture_classes.py: tests of the capture on classes of code users write (issue 25),
one per ctest test (capture/capture_tests.cmake), under the venv's python (torch 2.13):

    check_capture_classes.py address_reuse       a dead tensor's storage address reused is a new tensor
    check_capture_classes.py writes_into_views   after out[..., i] = a, out requires grad in the graph
    check_capture_classes.py stated_shape        nonzero with the model file's data_dependent_shape()
    check_capture_classes.py unmaterialised      a 4.3B-parameter model made by torch.zeros on the CPU
    check_capture_classes.py repeat_fold         identical Linear(w, w) layers fold into a valid repeat
    check_capture_classes.py checkpoint_regions  torch.utils.checkpoint in forward marks its module

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
    print(f"PASS: nonzero stated as {shapes[0]}; refused at model.py line 15 without the function")


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
              "repeat_fold": check_repeat_fold, "checkpoint_regions": check_checkpoint_regions}
    if len(sys.argv) != 2 or sys.argv[1] not in checks:
        fail("usage: check_capture_classes.py " + "|".join(checks))
    checks[sys.argv[1]]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
