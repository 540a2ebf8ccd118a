# symbolic.py: turns the concrete shapes of several recordings (one per size setting) into
# shape expressions in the scenario's sizes. The runs vary one size at a time around a base
# (base, then two other values of each size), so each dimension is fitted as
#   C * s1^e1 * s2^e2 ... + K   (e in 0..3, C a fraction, K an integer)
# from how it moves with each size alone, and then checked against every run exactly.
from fractions import Fraction

from recorder import CaptureError

MAX_EXPONENT = 3


def size_plan(keys, declared):
    """[(sizes dict), ...]: the base run first, then each key at its two other values, then
    (with several keys) every key at its second value."""
    values = {k: list(declared.get(k) or DEFAULT_VALUES[k]) for k in keys}
    for k, vs in values.items():
        if len(vs) != 3 or len(set(vs)) != 3 or any(int(v) != v or v < 1 for v in vs):
            raise CaptureError(f"sizes: {k} needs three different positive integers, got {vs}")
    base = {k: int(vs[0]) for k, vs in values.items()}
    plan = [dict(base)]
    for k in keys:
        for v in values[k][1:]:
            run = dict(base)
            run[k] = int(v)
            plan.append(run)
    if len(keys) > 1:  # every size moved at once: tells a product from a sum of separate terms
        plan.append({k: int(values[k][1]) for k in keys})
    return plan


DEFAULT_VALUES = {"batch_size": [2, 3, 5], "seq_len": [16, 24, 40], "image_size": [64, 96, 160]}


def check_same_structure(recordings, plan, describe_op, describe_tensor=None):
    """Every run must record the same ops on the same tensors; only shapes may differ. The
    refusal says what differs: the op, its module, or which input, output or saved tensor."""
    base = recordings[0]
    describe_tensor = describe_tensor or (lambda rec, tid: f"tensor {tid}")
    for run, rec in zip(plan[1:], recordings[1:]):
        where = ", ".join(f"{k}={v}" for k, v in run.items())
        for i, (a, b) in enumerate(zip(base.ops, rec.ops)):
            difference = _op_difference(base, a, rec, b, describe_tensor)
            if difference:
                what, here, there = difference
                raise CaptureError(f"the program changes with the sizes: op {i} ({describe_op(base, a)}): {what} is "
                                   f"{here} at {_kw(plan[0])} but {there} at {where} (size-dependent control flow "
                                   f"or data-dependent shapes cannot be written as one graph)")
        if len(base.ops) != len(rec.ops):
            raise CaptureError(f"the program changes with the sizes: {len(base.ops)} ops at {_kw(plan[0])}, "
                               f"{len(rec.ops)} at {where} (size-dependent control flow)")
        for a, b in zip(base.tensors, rec.tensors):
            if (a.dtype, len(a.shape), a.kind) != (b.dtype, len(b.shape), b.kind):
                raise CaptureError(f"the program changes with the sizes: tensor {a.id} is {a.dtype}{list(a.shape)} "
                                   f"at {_kw(plan[0])} but {b.dtype}{list(b.shape)} at {where}")


def _op_difference(base, a, rec, b, describe_tensor):
    """(what differs, its value in the base run, in the other) between op a of the base run and
    op b of another, or None."""
    if a.op != b.op:
        return "the op", a.op, b.op
    if a.module != b.module:
        return "its module", a.module or "the top level", b.module or "the top level"
    for role, xs, ys in (("input", a.inputs, b.inputs), ("output", a.outputs, b.outputs),
                         ("saved tensor", a.saved, b.saved)):
        if len(xs) != len(ys):
            return f"the number of {role}s", len(xs), len(ys)
        for n, (x, y) in enumerate(zip(xs, ys)):
            if x != y:
                return f"{role} {n}", describe_tensor(base, x), describe_tensor(rec, y)
    return None


def _kw(sizes):
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


def fit_dimension(values, plan, keys):
    """Expression (a string, or an int when constant) for one dimension, or None."""
    base = plan[0]
    d0 = values[0]
    exps, slopes, intercepts = {}, {}, {}
    for n, k in enumerate(keys):
        (s1, d1), (s2, d2) = [(plan[1 + 2 * n + j][k], values[1 + 2 * n + j]) for j in (0, 1)]
        s0 = base[k]
        if d0 == d1 == d2:
            exps[k] = 0
            continue
        for e in range(1, MAX_EXPONENT + 1):
            slope = Fraction(d1 - d0, s1 ** e - s0 ** e)
            k0 = d0 - slope * s0 ** e
            if slope * s2 ** e + k0 == d2:
                exps[k], slopes[k], intercepts[k] = e, slope, k0
                break
        else:
            return None
    varying = [k for k in keys if exps[k]]
    if not varying:
        return int(d0)
    return _product_plus_constant(values, plan, base, exps, slopes, intercepts, varying) \
        or _product_of_affine_factors(values, plan, base, exps, slopes, intercepts, varying)


def _matches(values, plan, fn):
    return all(fn(run) == d for run, d in zip(plan, values))


def _product_plus_constant(values, plan, base, exps, slopes, intercepts, varying):
    """C * s1^e1 * s2^e2 + K: [batch_size*seq_len, 768], image_size*image_size/256+1."""
    ks = {intercepts[k] for k in varying}
    if len(ks) != 1:
        return None
    K = ks.pop()
    C = slopes[varying[0]]
    for t in varying[1:]:
        C /= Fraction(base[t]) ** exps[t]
    if K.denominator != 1:
        return None

    def value(run):
        term = C
        for k in varying:
            term *= Fraction(run[k]) ** exps[k]
        return term + K
    if not _matches(values, plan, value):
        return None
    factors = [k for k in varying for _ in range(exps[k])]
    return _render(C, factors, int(K))


def _product_of_affine_factors(values, plan, base, exps, slopes, intercepts, varying):
    """C * (q1*s1^e1 + p1) * (q2*s2^e2 + p2): batch_size*(seq_len+1) (a class token)."""
    offsets = {k: intercepts[k] / slopes[k] for k in varying}  # s^e + a_s
    scale = Fraction(values[0])
    for k in varying:
        scale /= Fraction(base[k]) ** exps[k] + offsets[k]

    def value(run):
        v = scale
        for k in varying:
            v *= Fraction(run[k]) ** exps[k] + offsets[k]
        return v
    if not _matches(values, plan, value):
        return None
    factors = []
    for k in varying:
        a = offsets[k]
        power = "*".join([k] * exps[k])
        if a == 0:
            factors.append(power)
            continue
        scale /= a.denominator
        q = a.denominator
        head = f"{q}*{power}" if q != 1 else power
        factors.append(f"({head}{'+' if a > 0 else '-'}{abs(a.numerator)})")
    return _render(scale, factors, 0)


def _render(C, factors, K):
    factors = ([str(C.numerator)] if C.numerator != 1 else []) + list(factors)
    text = "*".join(factors)
    if C.denominator != 1:
        text += f"/{C.denominator}"
    if K:
        text += f"+{K}" if K > 0 else f"-{-K}"
    return text


def symbolic_shapes(recordings, plan, keys, describe_tensor):
    """Per tensor id: a list of dims (ints or expression strings)."""
    shapes = []
    for tid, base_t in enumerate(recordings[0].tensors):
        dims = []
        for axis in range(len(base_t.shape)):
            values = [rec.tensors[tid].shape[axis] for rec in recordings]
            expr = fit_dimension(values, plan, keys)
            if expr is None:
                seen = ", ".join(f"{v} at {_kw(run)}" for v, run in zip(values, plan))
                raise CaptureError(f"cannot express dimension {axis} of {describe_tensor(tid)} in "
                                   f"{', '.join(keys)} ({seen}): a data-dependent or non-polynomial shape")
            dims.append(expr)
        shapes.append(dims)
    return shapes
