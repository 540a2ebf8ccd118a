#!/usr/bin/env bash
# Configures, builds and runs the whole test suite (ctest: Catch2 cases, golden snapshot
# replays, CLI checks, CPU reference comparisons). Extra CMake flags: $OOMCAST_CMAKE_FLAGS.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
# shellcheck disable=SC2086
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo ${OOMCAST_CMAKE_FLAGS:-}
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"
