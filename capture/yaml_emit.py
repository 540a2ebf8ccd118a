# yaml_emit.py: writes the graph file's nested dicts and lists as YAML: top-level keys and
# statement lists in block style, each leaf statement (an op, a parameter) on one line in
# flow style, so a file reads like the program it records.
import re

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")
_RESERVED = {"true", "false", "null", "yes", "no", "on", "off", "y", "n", "~"}


def scalar(v):
    if v is True:
        return "true"
    if v is False:
        return "false"
    if v is None:
        return "null"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    s = str(v)
    if _PLAIN.match(s) and s.lower() not in _RESERVED:
        return s
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def flow(v):
    if isinstance(v, dict):
        return "{" + ", ".join(f"{scalar(k)}: {flow(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(flow(x) for x in v) + "]"
    return scalar(v)


_STATEMENT_LISTS = {"parameters", "buffers", "inputs", "forward", "body"}


def _has_body(v):
    if isinstance(v, dict):
        return "body" in v or any(_has_body(x) for x in v.values())
    if isinstance(v, (list, tuple)):
        return any(_has_body(x) for x in v)
    return False


def block(v, indent=0):
    pad = " " * indent
    lines = []
    if isinstance(v, dict):
        for k, x in v.items():
            if (k in _STATEMENT_LISTS and isinstance(x, list) and x) or (isinstance(x, dict) and _has_body(x)):
                lines.append(f"{pad}{scalar(k)}:")
                lines += block(x, indent + 2)
            else:
                lines.append(f"{pad}{scalar(k)}: {flow(x)}")
    else:
        for x in v:
            if isinstance(x, dict) and _has_body(x):
                sub = block(x, indent + 2)
                sub[0] = pad + "- " + sub[0][indent + 2:]
                lines += sub
            else:
                lines.append(f"{pad}- {flow(x)}")
    return lines


def dump(document, header_comments=()):
    return "".join(f"# {c}\n" for c in header_comments) + "\n".join(block(document)) + "\n"
