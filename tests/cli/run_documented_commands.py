#!/usr/bin/env python3
"""Runs every oomcast command that README.md and docs/*.md show, as a reader would paste it.

A command is a line of a fenced code block that starts with `build/oomcast`, `oomcast` or
`$ oomcast` (continued with a trailing backslash). Synopsis lines (CAPITALISED placeholders,
[optional] parts, a|b alternatives) are skipped. A command must exit 0, unless its line ends
in a comment saying `# exit N: ...`, which is the exit code it must have instead.

The commands run in a scratch directory that links every top-level entry of the source tree
and `build/` to the build directory, so the files they write (step.trace) stay out of the tree.

usage: run_documented_commands.py --oomcast BUILD/oomcast --source SOURCE_DIR
"""
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile

PLACEHOLDER = re.compile(r"(?<![\w./-])[A-Z][A-Z_]{2,}(?:\.[A-Za-z]+)?(?![\w-])")
EXPECTED_EXIT = re.compile(r"#\s*exit\s+(\d+)\b")


def documented_commands(source):
    files = [os.path.join(source, "README.md")]
    docs = os.path.join(source, "docs")
    files += sorted(os.path.join(docs, name) for name in os.listdir(docs) if name.endswith(".md"))
    for path in files:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().split("\n")
        in_code = False
        i = 0
        while i < len(lines):
            line = lines[i]
            number = i + 1
            i += 1
            if line.lstrip().startswith("```"):
                in_code = not in_code
                continue
            if not in_code:
                continue
            text = line.strip()
            if text.startswith("$ "):
                text = text[2:]
            if not (text.startswith("build/oomcast ") or text.startswith("oomcast ") or text == "build/oomcast"):
                continue
            while text.endswith("\\") and i < len(lines):
                text = text[:-1] + " " + lines[i].strip()
                i += 1
            expected = 0
            match = EXPECTED_EXIT.search(text)
            if match:
                expected = int(match.group(1))
            command = text.split(" #")[0].strip()
            if command.startswith("oomcast "):
                command = "build/" + command
            bare = re.sub(r"'[^']*'|\"[^\"]*\"", "", command)
            if PLACEHOLDER.search(bare) or "[" in bare or "|" in bare:
                continue  # a synopsis, not a command
            yield os.path.relpath(path, source), number, command, expected


def scratch_tree(source, binary_dir):
    scratch = tempfile.mkdtemp(prefix="oomcast-docs-")
    for name in os.listdir(source):
        if name.startswith("build") or name.startswith("."):
            continue
        os.symlink(os.path.join(source, name), os.path.join(scratch, name))
    os.symlink(binary_dir, os.path.join(scratch, "build"))
    return scratch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--oomcast", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    source = os.path.abspath(args.source)
    scratch = scratch_tree(source, os.path.dirname(os.path.abspath(args.oomcast)))
    environment = dict(os.environ)
    environment.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    failures = 0
    count = 0
    for where, line, command, expected in documented_commands(source):
        count += 1
        try:
            run = subprocess.run(shlex.split(command), cwd=scratch, env=environment, capture_output=True, text=True,
                                 timeout=args.timeout)
            code, tail = run.returncode, (run.stderr or run.stdout).strip().splitlines()[-3:]
        except subprocess.TimeoutExpired:
            code, tail = "timeout", []
        status = "ok" if code == expected else "FAILED"
        print(f"{status}: {where}:{line}: {command} -> exit {code} (expected {expected})")
        if code != expected:
            failures += 1
            for text in tail:
                print(f"    {text}")
    print(f"{count} documented commands, {failures} failed")
    if count == 0:
        print("no documented commands found: the extraction is broken")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
