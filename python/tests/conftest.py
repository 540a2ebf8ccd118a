"""Shared fixtures of the Python package's tests: the CLI binary the results are compared with
(OOMCAST_CLI, set by ctest: python/python_tests.cmake) and the source tree they read."""
from __future__ import annotations

import json
import os
import subprocess
from typing import Any, Dict, List, Tuple

import pytest

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture(scope="session")
def cli_path() -> str:
    path = os.environ.get("OOMCAST_CLI", os.path.join(SOURCE, "build", "oomcast"))
    if not os.path.exists(path):
        pytest.fail(f"no oomcast binary at {path} (set OOMCAST_CLI)")
    return path


@pytest.fixture(scope="session")
def cli(cli_path: str):
    """cli(*args) -> (exit code, stdout) of the oomcast binary, run from the source tree."""
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTORCH_CUDA_ALLOC_CONF", "OOMCAST_PROGRESS")}

    def run(*args: str) -> Tuple[int, str]:
        done = subprocess.run([cli_path, *args], cwd=SOURCE, env=environment, capture_output=True, text=True)
        return done.returncode, done.stdout
    return run


@pytest.fixture(scope="session")
def cli_json(cli):
    def run(*args: str) -> Dict[str, Any]:
        code, out = cli(*args, "--json")
        assert code in (0, 1), out
        return json.loads(out)
    return run


@pytest.fixture(autouse=True)
def in_source_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    """The API is called with the same relative paths the CLI gets."""
    monkeypatch.chdir(SOURCE)
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)


def without(document: Dict[str, Any], keys: List[str]) -> Dict[str, Any]:
    """The document without the keys that are timings or names, not predictions."""
    return {k: v for k, v in document.items() if k not in keys}
