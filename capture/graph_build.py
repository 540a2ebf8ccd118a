# graph_build.py: turns a recording (with symbolic shapes) into the graph file's document
# (docs/graph-format.md): parameters, buffers, inputs, the forward as module statements around
# ops (catalogue ops where capture/op_map.py recognises one, generic ops otherwise), outputs.
import torch

import checkpoint_regions
import fused_rnn
from op_map import catalogue_statement

FLOATING = {"float32", "float16", "bfloat16", "float64"}
# dtypes autograd differentiates: complex too (RoPE by complex multiplication carries q's and
# k's gradients through view_as_complex and view_as_real)
DIFFERENTIABLE = FLOATING | {"complex32", "complex64", "complex128"}


def _short(op):
    return op.split("::", 1)[-1]


class GraphBuilder:
    def __init__(self, rec, shapes, keys):
        self.rec, self.shapes, self.keys = rec, shapes, keys
        self.names = {}              # tensor id -> bound name
        self._by_name = {}           # bound name -> tensor id (shape_of_name)
        self.generic = {}            # aten op -> count, for the summary
        self.catalogue = {}
        self.consumed = set()        # ops folded into a catalogue statement
        self.bound = set()           # tensor ids some statement has bound so far
        self.holds, self.frame_args = {}, {}
        self.uses = self._uses()
        self.sdpa_at = {c.start: c for c in rec.sdpa_calls if c.end > c.start}
        self.sdpa_notes = []         # SDPA calls kept as generic ops, and why
        self.checkpoint_notes = []   # torch.utils.checkpoint calls the graph file cannot mark

    # ---- names and shapes
    def name(self, tid):
        if tid not in self.names:
            self.names[tid] = f"t{tid}"
        return self.names[tid]

    def shape(self, tid):
        return list(self.shapes[tid])

    def shape_of_name(self, name):
        if len(self._by_name) != len(self.names):  # names only grow: rebuilt when they did
            self._by_name = {n: tid for tid, n in self.names.items()}
        tid = self._by_name.get(name)
        return self.shape(tid) if tid is not None else []

    def t(self, tid):
        return self.rec.tensors[tid]

    def is_scalar_constant(self, tid):
        r = self.t(tid)
        return r.kind == "constant" and r.producer < 0 and len(r.shape) == 0

    def _uses(self):
        uses = {}
        for op in self.rec.ops:
            for tid in op.inputs:
                uses.setdefault(tid, []).append(op.index)
        return uses

    # ---- top-level sections
    def parameters(self):
        out = []
        for tid in self.rec.parameters:
            r = self.t(tid)
            names = self.rec.parameter_names[tid]
            self.names[tid] = names[0]
            self.bound.add(tid)
            entry = {"name": names[0], "shape": self.shape(tid)}
            if r.dtype not in ("float32",):
                entry["dtype"] = r.dtype
            if not r.requires_grad:
                entry["requires_grad"] = False
            out.append(entry)
            for alias in names[1:]:
                out.append({"name": alias, "tied_to": names[0]})
        return out

    def buffers(self):
        out = []
        for tid in self.rec.buffers:
            r = self.t(tid)
            self.names[tid] = r.name
            self.bound.add(tid)
            out.append({"name": r.name, "shape": self.shape(tid),
                        "dtype": "param" if r.dtype in FLOATING else r.dtype})
        return out

    def inputs(self):
        out = []
        for tid in self.rec.inputs:
            r = self.t(tid)
            self.names[tid] = r.name
            self.bound.add(tid)
            out.append({"name": r.name, "shape": self.shape(tid),
                        "dtype": "param" if r.dtype in FLOATING else r.dtype})
        return out

    # ---- the forward: module calls nested around ops
    def forward(self):
        calls = [c for c in self.rec.module_calls if c[2] is not None and c[2] > c[1] and c[0] != ""]
        root = next((c for c in self.rec.module_calls if c[0] == "" and c[2] is not None), None)
        root_end = root[2] if root else len(self.rec.ops)
        module_calls = calls
        self.holds, self.frame_args, synthetic = self._python_lifetimes(calls, root_end)
        if synthetic:
            # Python functions that are not modules (a softmax written as a function) hold their
            # locals until they return: frames of their own, placed among the module calls
            calls = sorted(calls + synthetic, key=lambda c: (c[1], -c[2], c[0] is not None))
            self.holds, self.frame_args, _ = self._python_lifetimes(calls, root_end)
        for call in checkpoint_regions.unmatched_calls(self.rec, [(c[1], c[2]) for c in module_calls]):
            self.checkpoint_notes.append(f"{call.module or 'the model'}: a checkpointed function that is not one "
                                         f"module call (planned without checkpointing)")
        model, ci = self._range(0, root_end, "", calls, 0, "root")
        loss, _ = self._range(root_end, len(self.rec.ops), "", calls, ci, None)
        if self.holds.get("root") or self.frame_args.get("root"):
            model = [{"frame": [self.name(t) for t in self.frame_args.get("root", [])], "body": model}]
        return model + loss

    def _python_lifetimes(self, calls, root_end):
        """Tensors the program keeps alive past their last use until a forward returns (locals,
        arguments): {frame: [(producer op, tensor)]} for those made inside the frame and
        {frame: [tensor]} for its arguments. A frame is a module call's index or "root"."""
        last_use, saved = {}, set()
        for op in self.rec.ops:
            if op.phase not in ("forward", "loss"):
                continue
            for t in op.inputs:
                last_use[t] = max(last_use.get(t, -1), op.index)
            saved.update(op.saved)
        frames = [(n, c[1], c[2]) for n, c in enumerate(calls)] + [("root", 0, root_end)]
        holds, args, unplaced = {}, {}, {}
        for r in self.rec.tensors:
            # the death of a tensor autograd keeps (saved, or the base of a saved view) is seen
            # in the no_grad run only (autograd keeps its Python object alive); its hold matters
            # where nothing saves it: a plan under no_grad, or inside a checkpointed block
            dies_at = r.dies_at
            if dies_at is None or dies_at[0] not in ("forward", "loss"):
                dies_at = r.no_grad_dies_at
            elif r.id in saved:
                continue
            if r.producer < 0 or dies_at is None or dies_at[0] not in ("forward", "loss"):
                continue
            died, used = dies_at[1], last_use.get(r.id, r.producer)
            if died <= used + 1:
                continue  # dead after its last use: what the planner assumes
            ending = [f for f in frames if f[2] == died and f[1] <= used]
            if not ending:
                # no module returns then: a plain function's local (or a variable rebound in a
                # frame that goes on), a frame of its own ending there
                unplaced.setdefault(died, []).append(r.producer)
                continue
            # the innermost frame returning then: an argument of it, or a local made inside it
            frame = min(ending, key=lambda f: f[2] - f[1])
            if frame[1] <= r.producer < frame[2]:
                holds.setdefault(frame[0], []).append((r.producer, r.id))
            else:
                args.setdefault(frame[0], []).append(r.id)
        return holds, args, self._synthetic_frames(unplaced, calls, root_end)

    @staticmethod
    def _synthetic_frames(unplaced, calls, root_end):
        """[None, start, end] frames ending where `unplaced` tensors die ({death: [producers]}),
        each starting at its first producer, widened until it nests with the module calls and
        with each other (as the Python function frames they stand for do); a death inside a
        module call that began after the tensor was made cannot nest and is left out."""
        spans = []
        for died, producers in sorted(unplaced.items()):
            start = min(producers)
            if died > root_end or start < 0:
                continue
            spans.append([None, start, died])
        changed = True
        while changed:
            changed = False
            for span in spans:
                for other in [c for c in calls] + [x for x in spans if x is not span]:
                    # `other` holds span's start but ends inside span: widen span to contain it
                    if other[1] < span[1] < other[2] < span[2]:
                        span[1] = other[1]
                        changed = True
        ok = []
        for span in spans:
            if any(c[1] < span[2] < c[2] and c[1] > span[1] for c in calls):
                continue  # ends inside a module call it does not contain
            if any(c[1] == span[1] and c[2] == span[2] for c in calls):
                continue  # a module call already ends there
            if span not in ok:
                ok.append(span)
        return ok

    def _range(self, start, end, parent, calls, ci, frame):
        """Statements for ops [start, end) inside module `parent`; calls[ci:] are the module
        calls still to place (in entry order); `frame` the call whose holds go here."""
        body = []
        i = start
        local_names = {}
        pending = sorted(self.holds.get(frame, [])) if frame is not None else []
        while i < end:
            while ci < len(calls) and calls[ci][1] < i:
                ci += 1  # a call that starts inside an op already written (none in practice)
            if ci < len(calls) and calls[ci][1] == i and calls[ci][2] <= end:
                path, cstart, cend = calls[ci]
                me = ci
                if path is None:  # a plain function's frame (_synthetic_frames): no module
                    inner, ci = self._range(cstart, cend, parent, calls, ci + 1, me)
                    stmt = {"frame": [self.name(t) for t in self.frame_args.get(me, []) if t in self.bound],
                            "body": inner}
                    body.append(stmt)
                    pending = self._place_holds(body, pending, cend)
                    i = cend
                    continue
                inner, ci = self._range(cstart, cend, path, calls, ci + 1, me)
                rel = path[len(parent) + 1:] if parent and path.startswith(parent + ".") else path
                stmt = {"module": rel}
                stmt.update(self.module_options(path, cstart, cend))
                if self.holds.get(me) or self.frame_args.get(me):
                    stmt["frame"] = [self.name(t) for t in self.frame_args.get(me, []) if t in self.bound]
                stmt["body"] = inner
                body.append(stmt)
                pending = self._place_holds(body, pending, cend)
                i = cend
                continue
            op = self.rec.ops[i]
            if i not in self.consumed:
                stmt = catalogue_statement(self, op)
                if stmt is None:
                    stmt = self.generic_statement(op)
                    self.generic[op.op] = self.generic.get(op.op, 0) + 1
                else:
                    self.catalogue[stmt["op"]] = self.catalogue.get(stmt["op"], 0) + 1
                base = stmt.get("name") or (stmt["op"] if stmt["op"] != "generic" else _short(op.op))
                if op.phase == "loss" and parent == "":
                    base = "loss." + base
                n = local_names.get(base, 0)
                local_names[base] = n + 1
                stmt["name"] = base if n == 0 else f"{base}_{n + 1}"
                self._note_bound(stmt)
                body.append(self._ordered(stmt))
            i += 1
            pending = self._place_holds(body, pending, i)
        return body, ci

    def _note_bound(self, stmt):
        for o in stmt.get("outputs") or []:
            self.bound.add(self._tid_of(o["name"]))
        out = stmt.get("out")
        for name in (out if isinstance(out, list) else [out] if out else []):
            self.bound.add(self._tid_of(name))

    def _tid_of(self, name):
        return int(name[1:]) if name.startswith("t") and name[1:].isdigit() else name

    def _place_holds(self, body, pending, upto):
        """Appends `hold:` for the pending tensors produced before op `upto` (and bound)."""
        ready = [t for p, t in pending if p < upto]
        if ready:
            names = [self.name(t) for t in ready if t in self.bound]
            if names:
                body.append({"hold": names})
        return [(p, t) for p, t in pending if p >= upto]

    def module_options(self, path, start, end):
        return checkpoint_regions.checkpoint_options(self.rec, start, end)

    @staticmethod
    def _ordered(stmt):
        order = ["op", "name"]
        return {k: stmt[k] for k in order if k in stmt} | {k: v for k, v in stmt.items() if k not in order} \
            if hasattr(dict, "__or__") else dict([(k, stmt[k]) for k in order if k in stmt] +
                                                 [(k, v) for k, v in stmt.items() if k not in order])

    # ---- generic ops
    def tensor_inputs(self, op):
        return [tid for tid in op.inputs if not self.is_scalar_constant(tid)]

    def generic_statement(self, op):
        inputs = self.tensor_inputs(op)
        stmt = {"op": "generic", "aten": f"{_short(op.op)}.{op.overload}" if op.overload != "default"
                else _short(op.op)}
        stmt["inputs"] = [self.name(t) for t in inputs]
        float_in = [self.t(t).dtype for t in inputs if self.t(t).dtype in FLOATING]
        promoted = _promote(float_in) if float_in else None
        outputs = []
        aliased = self.t(op.outputs[0]).alias_of if op.outputs else None
        for oid in op.outputs:
            r = self.t(oid)
            entry = {"name": self.name(oid), "shape": self.shape(oid)}
            base = r.inplace_of if r.inplace_of is not None else r.alias_of
            if base is not None and self.is_scalar_constant(base):
                base = None  # lift_fresh of a literal (torch.tensor(-inf)): the literal is not in the graph
            wide = _AS_FLOAT32_WORDS.get(r.dtype)
            if wide:  # a dtype the graph format lacks, written as float32 words of the same bytes
                entry["shape"] = entry["shape"] + [wide]
            if base is not None:
                entry["view_of"] = self.name(base)
            elif wide or r.dtype != promoted:
                entry["dtype"] = "float32" if wide else r.dtype
            outputs.append(entry)
        stmt["outputs"] = outputs
        saved = [self.name(t) for t in op.saved if not self.is_scalar_constant(t) and t in self.names]
        if saved:
            stmt["saves"] = saved
        stmt["grads"] = [self.grad_rule(op, t, aliased) for t in inputs]
        if op.op == "aten::mkldnn_rnn_layer":  # oneDNN's fused LSTM layer (capture/fused_rnn.py)
            stmt = fused_rnn.layer_statement(self, op, stmt)
        return stmt

    def grad_rule(self, op, tid, aliased):
        r = self.t(tid)
        if r.dtype not in DIFFERENTIABLE or not op.input_requires_grad.get(tid, r.requires_grad):
            return "none"
        if not any(self.t(o).requires_grad for o in op.outputs):
            return "none"  # no autograd history (empty_like, comparisons, factories)
        out = self.t(op.outputs[0]) if op.outputs else None
        if op.view or op.inplace:
            first = self.tensor_inputs(op)[0]
            if tid == first and out is not None and _numel(out.shape) == _numel(r.shape):
                return "pass"
            return "new"
        if _short(op.op) in ("add", "sub") and out is not None and out.shape == r.shape \
                and out.dtype == r.dtype and (tid == self.tensor_inputs(op)[0] or _short(op.op) == "add"):
            return "pass"
        return "new"

    def outputs_section(self):
        out = {"loss": self.name(self.rec.loss)}
        if self.rec.output is not None:
            out["logits"] = self.name(self.rec.output)
        return out


# Dtypes the graph format has no name for (docs/graph-format.md lists float32, float16, bfloat16,
# int64, int32, bool, uint8), written as that many float32 words per element: complex RoPE's
# view_as_complex results, a float64 table. The bytes, which are all the planner needs of a
# generic op's output, are exact.
_AS_FLOAT32_WORDS = {"complex64": 2, "float64": 2, "complex128": 4}


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _promote(dtypes):
    result = getattr(torch, dtypes[0])
    for d in dtypes[1:]:
        result = torch.promote_types(result, getattr(torch, d))
    return str(result).replace("torch.", "")
