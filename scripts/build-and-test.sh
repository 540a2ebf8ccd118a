#!/usr/bin/env bash
# Configures, builds and runs the whole test suite (ctest: Catch2 cases, golden snapshot
# replays, CLI checks, CPU reference comparisons). It first builds the project's Python
# environment (scripts/make-venv.sh: .venv/ with torch 2.13 CPU, transformers, peft,
# accelerate; fast when already there) and points the tests that need torch at its python
# (OOMCAST_PYTHON). Extra CMake flags: $OOMCAST_CMAKE_FLAGS.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
venv_output=$(scripts/make-venv.sh)   # its errors (one line, exit 2) go to stderr
sed '$d' <<< "$venv_output"
python=$(tail -n 1 <<< "$venv_output")
echo "build-and-test: the captures and CPU validations run under torch $("$python" -c 'import torch; print(torch.__version__)') ($python)"
# shellcheck disable=SC2086
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DOOMCAST_PYTHON=$python" ${OOMCAST_CMAKE_FLAGS:-}
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"
