"""The `oomcast` command a pip install puts on PATH: runs the packaged C++ executable
(oomcast/_bin/oomcast, the same binary `cmake --build` makes) with the same arguments."""
from __future__ import annotations

import os
import sys


def main() -> None:
    binary = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "oomcast")
    if not os.path.exists(binary):
        sys.exit(f"oomcast: {binary} is missing: this oomcast package was not installed from a wheel")
    os.execv(binary, [binary] + sys.argv[1:])
