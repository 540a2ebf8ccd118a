#!/usr/bin/env python3
"""Runs README.md's pip block as a reader would paste it, in a scratch copy of the tree, then
checks the venv it made: its `import oomcast` is the installed wheel (typed: py.typed and the extension's _core.pyi), the README's Python block
runs, a sweep without pandas is a list, bad input is oomcast.InputError, and its `oomcast`
command plans from another folder. Prints the seconds `pip install .` took.

The scratch tree links every top-level entry of the source but build/ and dot-entries, so the
block's `build/venv` and scikit-build-core's `build/wheel-*` land in the scratch folder.

usage: run_readme_pip_block.py SOURCE_DIR SCRATCH_DIR
"""
import os
import re
import shutil
import subprocess
import sys
import time

CHECKS = r'''
import os
import sys
import oomcast
assert oomcast.__file__.startswith(sys.prefix), oomcast.__file__  # the installed package, not python/
for typed in ("py.typed", "_core.pyi"):  # typed, down to the extension's stub
    assert os.path.isfile(os.path.join(os.path.dirname(oomcast.__file__), typed)), f"the wheel has no {typed}"
rows = oomcast.sweep({"model": "gpt2", "batch_size": 2, "seq_len": 128, "device": "a100-80gb"}, {"batch_size": [1, 2]})
assert isinstance(rows, list) and [r["batch_size"] for r in rows] == ["1", "2"] and all(r["fits"] for r in rows), rows
try:
    oomcast.plan("scenarios/gpt2-small-b8-amp-bf16.yaml", batch_szie=3)
    raise SystemExit("no InputError for a mistyped key")
except oomcast.InputError as error:
    assert error.key == "batch_szie", error.key
print("readme pip block: the installed package plans, sweeps into a list, raises InputError")
'''


def readme_blocks(source):
    """(the sh block that runs `pip install .`, the python block after it)."""
    text = open(os.path.join(source, "README.md"), encoding="utf-8").read()
    blocks = re.findall(r"```(\w+)\n(.*?)```", text, re.S)
    for index, (language, body) in enumerate(blocks):
        if language == "sh" and "pip install ." in body:
            following = blocks[index + 1] if index + 1 < len(blocks) else ("", "")
            if following[0] != "python":
                raise SystemExit("README.md: no python block after the pip block")
            return body.strip(), following[1]
    raise SystemExit("README.md: no sh block with `pip install .`")


def main():
    source, scratch = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    for name in os.listdir(source):
        if not (name.startswith("build") or name.startswith(".")):
            os.symlink(os.path.join(source, name), os.path.join(scratch, name))
    command, python_block = readme_blocks(source)
    start = time.perf_counter()
    subprocess.run(["sh", "-c", command], cwd=scratch, check=True)
    print(f"readme pip block: `{command}` took {time.perf_counter() - start:.0f} s", flush=True)
    python = os.path.join(scratch, "build", "venv", "bin", "python")
    subprocess.run([python, "-c", python_block], cwd=scratch, check=True)
    subprocess.run([python, "-c", CHECKS], cwd=scratch, check=True)
    elsewhere = subprocess.run([os.path.join(scratch, "build", "venv", "bin", "oomcast"), "plan",
                                os.path.join(scratch, "scenarios", "gpt2-tiny-cpu.yaml")], cwd="/",
                               capture_output=True, text=True)
    if elsewhere.returncode != 0 or "fits" not in elsewhere.stdout:
        raise SystemExit(f"the venv's oomcast command failed outside the tree: {elsewhere.stderr.strip()}")
    print("readme pip block: ok")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
