# repeats.py: folds runs of identical blocks (layers.0, layers.1, ... that differ only in their
# index) into the graph format's `repeat` statement, in the forward and in the parameter and
# buffer lists, so a 32- or 80-layer model's file is as long as a 1-layer one.
#
# Block k's statements are rewritten with its index as `${i+k0}` and the names it binds as
# r<R>.<n> (n in binding order). A name block k reads from block k-1 then reads the previous
# iteration's binding of the same local name (the format: names bound in one iteration are
# visible in the next); block 0 reads those from before the repeat, so an alias of each is
# bound under the local name first. Statements after the run read the last block's locals by
# their r<R>.<n> names. Any other use of a block's locals keeps the blocks written out.
import copy
import json
import re

INDEX_NAMES = ["i", "j", "k", "l", "m"]
_REF_KEYS = ("x", "weight", "bias", "a", "b", "indices", "logits", "targets", "running_mean",
             "running_var", "q", "k", "v", "mask", "cos", "sin", "from")


# ---- walking a statement's names
def map_statement(stmt, ref, bind):
    """A copy of a leaf statement with every referenced name passed through ref() and every
    bound name through bind(), in program order (reads before binds; saves may name the op's
    own outputs)."""
    s = dict(stmt)
    if "hold" in s:
        s["hold"] = [ref(n) for n in s["hold"]]
    for key in _REF_KEYS:
        if isinstance(s.get(key), str):
            s[key] = ref(s[key])
    if "inputs" in s:
        s["inputs"] = [ref(n) for n in s["inputs"]]
    own = {}
    if "outputs" in s:
        outs = []
        for o in s["outputs"]:
            o = dict(o)
            if "view_of" in o:
                o["view_of"] = ref(o["view_of"])
            new = bind(o["name"])
            own[o["name"]] = new
            o["name"] = new
            outs.append(o)
        s["outputs"] = outs
    if "out" in s:
        if isinstance(s["out"], list):
            s["out"] = [own.setdefault(n, bind(n)) for n in s["out"]]
        else:
            own[s["out"]] = bind(s["out"])
            s["out"] = own[s["out"]]
    if "saves" in s:
        s["saves"] = [own[n] if n in own else ref(n) for n in s["saves"]]
    return s


def map_tree(stmts, ref, bind, module_fn=lambda m: m):
    out = []
    for s in stmts:
        if "body" in s:
            s2 = {k: v for k, v in s.items() if k != "body"}
            if "module" in s2:
                s2["module"] = module_fn(s2["module"])
            if "frame" in s2:
                s2["frame"] = [ref(n) for n in s2["frame"]]
            s2["body"] = map_tree(s["body"], ref, bind, module_fn)
            out.append(s2)
        else:
            out.append(map_statement(s, ref, bind))
    return out


def leaves(stmts):
    for s in stmts:
        if "body" in s:
            yield from leaves(s["body"])
        else:
            yield s


def refs_of(stmt):
    names = []
    map_statement(stmt, lambda n: names.append(n) or n, lambda n: n)
    return names


def binds_of(stmt):
    names = []
    map_statement(stmt, lambda n: n, lambda n: names.append(n) or n)
    return names


# ---- the folding
def _checkpointed_inside(stmt):
    """Whether a statement is, or contains, a module the model's own code checkpoints."""
    return "checkpoint" in stmt or any(_checkpointed_inside(s) for s in stmt.get("body", []) if isinstance(s, dict))


class Folder:
    def __init__(self, leaf_bound, shape_of):
        self.next_id = 0
        self.renames = {}     # old name -> the r<R>.<n> name it is bound or read as
        self.leaf_bound = leaf_bound
        self.shape_of = shape_of

    def fold(self, stmts, prefix, depth, later_refs):
        """stmts: a statement list inside module path `prefix`; later_refs(name) -> True when a
        statement outside this list reads name."""
        out = []
        i = 0
        while i < len(stmts):
            run = self._run_at(stmts, i)
            if run and depth < len(INDEX_NAMES):
                n = len(run[0])
                outside = _refs_of_list(stmts[:i]) | _refs_of_list(stmts[i + n:])
                read_elsewhere = lambda name, o=outside: name in o or later_refs(name)  # noqa: E731
                folded = self._try_fold(stmts[i:i + n], run, prefix, depth, read_elsewhere)
                if folded is not None:
                    for s in folded:
                        if "repeat" in s:
                            blk = s["body"][0]
                            blk["body"] = self.fold(blk["body"], _join(prefix, blk["module"]), depth + 1,
                                                    read_elsewhere)
                    out += folded
                    i += n
                    continue
            s = stmts[i]
            if "body" in s:
                outside = _refs_of_list(stmts[:i]) | _refs_of_list(stmts[i + 1:])
                s = dict(s)
                s["body"] = self.fold(s["body"], _join(prefix, s["module"]) if "module" in s else prefix,
                                      depth, lambda name, o=outside: name in o or later_refs(name))
            out.append(s)
            i += 1
        return out

    @staticmethod
    def _run_at(stmts, i):
        """([statements], base, start index) of the longest run of module statements
        BASE.n, BASE.n+1, ... starting at i, at least two long."""
        m = _indexed(stmts[i])
        if m is None:
            return None
        base, n0 = m
        n = 1
        while i + n < len(stmts) and _indexed(stmts[i + n]) == (base, n0 + n):
            n += 1
        return (stmts[i:i + n], base, n0) if n >= 2 else None

    def _try_fold(self, blocks, run, prefix, depth, read_later):
        _, base, n0 = run
        index = INDEX_NAMES[depth]
        # the longest run of identical blocks: the first may differ (a downsample), and the last
        # (a stack of Linear(w, w) closed by a Linear(w, classes) in the same Sequential)
        spans = [(start, end) for end in (len(blocks), len(blocks) - 1) for start in range(0, end - 1)]
        for start, end in spans:
            after = _refs_of_list(blocks[end:])
            read_elsewhere = lambda name, a=after: name in a or read_later(name)  # noqa: E731
            folded = self._fold_blocks(blocks[start:end], base, n0 + start, prefix, index, read_elsewhere)
            if folded is not None:
                out = list(blocks[:start]) + folded + list(blocks[end:])
                if depth == 0:  # the blocks of an outermost run are what checkpointing wraps
                    for s in out:
                        for blk in (s["body"] if "repeat" in s else [s] if "module" in s else []):
                            if _checkpointed_inside(blk):
                                continue  # the model checkpoints it (or a part): units do not nest
                            blk["checkpoint_unit"] = True
                            blk["body"] = blk.pop("body")  # keep body last
                return out
        return None

    def _fold_blocks(self, blocks, base, n0, prefix, index, read_later):
        rid = self.next_id
        local = f"r{rid}"
        template_rel = f"{base}${{{index}+{n0}}}" if n0 else f"{base}${{{index}}}"
        canon, locals_, prevs, signatures = [], [], [], []
        prev_locals = {}
        for k, blk in enumerate(blocks):
            full = _join(prefix, blk["module"])
            templ = _join(prefix, template_rel)
            c = _canonical(blk, full, templ, template_rel, local, prev_locals)
            if c is None:
                return None
            stmt, lmap, prev_used, templated = c
            canon.append(stmt)
            locals_.append(lmap)
            prevs.append(prev_used)
            prev_locals = lmap
            # what the statements do not spell: the shapes of the parameters they read and of
            # what catalogue ops bind (Linear(w, w) and Linear(w, 4) are the same statement)
            signatures.append(json.dumps([[t, self.shape_of(name)] for t, name in templated] +
                                         [self.shape_of(name) for name in lmap], sort_keys=True))
        reference = json.dumps(canon[1], sort_keys=True)
        if any(json.dumps(c, sort_keys=True) != reference for c in canon[2:]):
            return None
        if any(signature != signatures[0] for signature in signatures[1:]):
            return None
        aliases = _block0_aliases(canon[0], canon[1], local)
        if aliases is None:
            return None
        # a block's locals may be read only by the next block, or (the last block's) after the run
        for k, lmap in enumerate(locals_[:-1]):
            later = set()
            for blk in blocks[k + 2:]:
                for leaf in leaves([blk]):
                    later.update(refs_of(leaf))
            if any(name in later or read_later(name) for name in lmap):
                return None
        self.next_id += 1
        for name, n in locals_[-1].items():
            self.renames[name] = f"{local}.{n}"
        body_refs = set()
        for leaf in leaves([canon[1]]):
            body_refs.update(refs_of(leaf))
        out = []
        for n, outside in sorted(aliases.items()):
            if outside in self.leaf_bound and not read_later(outside) and outside not in body_refs \
                    and outside not in self.renames:
                self.renames[outside] = f"{local}.{n}"  # bind it under the local name directly
                continue
            out.append({"op": "generic", "name": f"{local}_in.{n}", "aten": "alias", "inputs": [outside],
                        "outputs": [{"name": f"{local}.{n}", "shape": self.shape_of(outside), "view_of": outside}],
                        "grads": ["pass"]})
        out.append({"repeat": len(blocks), "index": index, "body": [canon[1]]})
        return out


def _canonical(block, full, templ, template_rel, local, prev_locals):
    """The block's statement with its index templated and its bound names made local."""
    lmap = {}
    prev_used = set()
    bad = []
    templated = []  # (templated name, the block's own name) of parameters and buffers it reads

    def ref(name):
        if name in lmap:
            return f"{local}.{lmap[name]}"
        if name in prev_locals:
            n = prev_locals[name]
            if n < len(lmap):   # this block already rebound that local: the old value is gone
                bad.append(name)
            prev_used.add(n)
            return f"{local}.{n}"
        if name.startswith(full + "."):
            templated.append((templ + name[len(full):], name))
            return templ + name[len(full):]
        return name

    def bind(name):
        lmap[name] = len(lmap)
        return f"{local}.{lmap[name]}"
    rel_len = len(block["module"])

    def module_fn(m):
        return m
    stmt = {k: v for k, v in block.items() if k != "body"}
    stmt["module"] = template_rel
    if "frame" in stmt:
        stmt["frame"] = [ref(n) for n in stmt["frame"]]
    stmt["body"] = map_tree(block["body"], ref, bind, module_fn)
    del rel_len
    return None if bad else (stmt, lmap, prev_used, templated)


def _block0_aliases(c0, c1, local):
    """{n: outside name}: where block 0 reads a name from before the run and block 1 reads
    the previous block's local n; None when the blocks differ in anything else."""
    aliases = {}
    pattern = re.compile(re.escape(local) + r"\.(\d+)$")

    def walk(a, b):
        if isinstance(a, dict) and isinstance(b, dict):
            return a.keys() == b.keys() and all(walk(a[k], b[k]) for k in a)
        if isinstance(a, list) and isinstance(b, list):
            return len(a) == len(b) and all(walk(x, y) for x, y in zip(a, b))
        if a == b:
            return True
        if isinstance(a, str) and isinstance(b, str):
            m = pattern.match(b)
            if m and not pattern.match(a):
                n = int(m.group(1))
                if aliases.setdefault(n, a) == a:
                    return True
        return False
    return aliases if walk(c0, c1) else None


def _indexed(stmt):
    """(base, n) for a module statement whose path ends in an integer component."""
    if "module" not in stmt or "body" not in stmt:
        return None
    m = re.fullmatch(r"(.*?)(\d+)", str(stmt["module"]))
    if not m or (m.group(1) and m.group(1)[-1].isdigit()):
        return None
    return (m.group(1), int(m.group(2)))


def _join(prefix, rel):
    return f"{prefix}.{rel}" if prefix else rel


def _refs_of_list(stmts):
    names = set()
    for leaf in leaves(stmts):
        names.update(refs_of(leaf))
    return names


def fold_repeats(forward, doc, shape_of):
    """The forward with repeats folded; doc's parameters, buffers and outputs updated.
    shape_of(name) gives a bound name's shape (for the aliases bound before a repeat)."""
    bound = set()
    for leaf in leaves(forward):
        bound.update(binds_of(leaf))
    folder = Folder(bound, shape_of)
    outputs = set((doc.get("outputs") or {}).values())
    folded = folder.fold(forward, "", 0, lambda n: n in outputs)
    # names are unique, so one rename pass over everything (bodies included) puts each
    # renamed binding and each read after a repeat under its local name
    def resolve(n):
        seen = set()
        while n in folder.renames and n not in seen:
            seen.add(n)
            n = folder.renames[n]
        return n
    folded = map_tree(folded, resolve, resolve)
    if "outputs" in doc:
        doc["outputs"] = {k: resolve(v) for k, v in doc["outputs"].items()}
    doc["parameters"] = fold_list(doc["parameters"], 0)
    if doc.get("buffers"):
        doc["buffers"] = fold_list(doc["buffers"], 0)
    return folded


# ---- parameter and buffer lists
def fold_list(entries, depth, prefix_len=0):
    """Folds runs of entries named P<n>.rest, P<n+1>.rest, ... (identical but for n), trying
    each integer component of the first entry's name as the index."""
    if depth >= len(INDEX_NAMES):
        return entries
    out = []
    i = 0
    while i < len(entries):
        for base, n0 in _entry_splits(entries[i], prefix_len):
            blocks, j, n = [], i, n0
            while True:
                blk = []
                while j < len(entries) and _in_block(entries[j], base, n):
                    blk.append(entries[j])
                    j += 1
                if not blk:
                    break
                blocks.append(blk)
                n += 1
            if len(blocks) < 2:
                continue
            folded = _fold_entry_blocks(blocks, base, n0, depth)
            if folded is not None:
                out += folded
                i = j
                break
        else:
            out.append(entries[i])
            i += 1
    return out


def _entry_splits(entry, prefix_len):
    """(base, n) for each integer component of the name after prefix_len: "layer1.0.conv.w"
    gives ("layer", 1) and ("layer1.", 0)."""
    name = entry.get("name")
    if not isinstance(name, str):
        return []
    out = []
    for m in re.finditer(r"(?:(?<=[._])|^)(\d+)(?=\.)", name[prefix_len:]):
        out.append((name[:prefix_len + m.start()], int(m.group(1))))
    for m in re.finditer(r"(?<=[A-Za-z])(\d+)(?=\.)", name[prefix_len:]):
        out.append((name[:prefix_len + m.start()], int(m.group(1))))
    return sorted(out, key=lambda bn: len(bn[0]))


def _in_block(entry, base, n):
    name = entry.get("name")
    return isinstance(name, str) and name.startswith(f"{base}{n}.")


def _fold_entry_blocks(blocks, base, n0, depth):
    """[leading unfolded entries..., {repeat}] or None when no tail of >= 2 blocks is identical."""
    index = INDEX_NAMES[depth]

    def templ(blk, n, expr):
        src, dst = f"{base}{n}.", f"{base}${{{expr}}}."
        out = []
        for e in blk:
            e = dict(e)
            for key in ("name", "tied_to"):
                if isinstance(e.get(key), str) and e[key].startswith(src):
                    e[key] = dst + e[key][len(src):]
            out.append(e)
        return out
    for start in range(0, len(blocks) - 1):
        first = n0 + start
        expr = index if first == 0 else f"{index}+{first}"
        canon = [templ(b, first + k, expr) for k, b in enumerate(blocks[start:])]
        if all(c == canon[0] for c in canon[1:]):
            body = fold_list(canon[0], depth + 1, len(f"{base}${{{expr}}}."))
            return [e for b in blocks[:start] for e in b] + [{"repeat": len(canon), "index": index, "body": body}]
    return None


def expand(stmts, env=None):
    """The statements with every repeat written out (for tests and checks)."""
    env = dict(env or {})
    out = []
    for s in stmts:
        if "repeat" in s:
            for n in range(int(s["repeat"])):
                inner = dict(env)
                inner[s.get("index", "_")] = n
                out += expand(s["body"], inner)
        elif "body" in s:
            s2 = {k: _subst(v, env) for k, v in s.items() if k != "body"}
            s2["body"] = expand(s["body"], env)
            out.append(s2)
        else:
            out.append(_subst(s, env))
    return out


def _subst(value, env):
    if isinstance(value, str):
        return re.sub(r"\$\{([^}]*)\}", lambda m: str(eval(m.group(1), {"__builtins__": {}}, env)), value)  # noqa: S307
    if isinstance(value, list):
        return [_subst(v, env) for v in value]
    if isinstance(value, dict):
        return {k: _subst(v, env) for k, v in value.items()}
    return value


__all__ = ["fold_repeats", "fold_list", "expand", "copy"]
