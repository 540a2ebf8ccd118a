#!/usr/bin/env bash
# Configures, builds and runs the whole test suite (ctest: Catch2 cases, golden snapshot
# replays, CLI checks, CPU reference comparisons). It first builds the project's Python
# environment (scripts/make-venv.sh: .venv/ with torch 2.13 CPU, transformers, peft,
# accelerate; fast when already there) and points the tests that need torch at its python
# (OOMCAST_PYTHON). The Python package (python/, its tests) is built when that python has its
# headers (Debian: python3-dev, `scripts/install-deps.sh --python-package`); without them it is
# left out with a note, or fails under CI=true. Extra CMake flags: $OOMCAST_CMAKE_FLAGS.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
venv_output=$(scripts/make-venv.sh)   # its errors (one line, exit 2) go to stderr
sed '$d' <<< "$venv_output"
python=$(tail -n 1 <<< "$venv_output")
echo "build-and-test: the captures and CPU validations run under torch $("$python" -c 'import torch; print(torch.__version__)') ($python)"
headers=$("$python" -c 'import os, sysconfig; print(os.path.join(sysconfig.get_paths()["include"], "Python.h"))')
if [ -f "$headers" ]; then
  python_package=ON
else
  python_package=OFF
  echo "build-and-test: $headers is missing: the Python package and its tests are left out (scripts/install-deps.sh --python-package installs python3-dev)"
  [ "${CI:-}" != "true" ] || { echo "build-and-test: CI=true: the Python package must be built" >&2; exit 1; }
fi
# shellcheck disable=SC2086
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DOOMCAST_PYTHON=$python" \
  "-DOOMCAST_BUILD_PYTHON=$python_package" ${OOMCAST_CMAKE_FLAGS:-}
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"
