#!/bin/sh
# check_scenario.sh: one CPU validation test (registered by validate/cpu_validation.cmake):
# captures SCENARIO with real PyTorch, then `oomcast compare` with the tolerance, under PYTHON
# (the venv's torch 2.13) or $OOMCAST_VALIDATE_PYTHON. Exit 77 (ctest's skip code) when that
# python has no torch, 1 under CI=true (validate/require_torch.sh).
#   check_scenario.sh OOMCAST SCENARIO OUT_DIR TOLERANCE PYTHON
set -u
oomcast=$1 scenario=$2 out_dir=$3 tolerance=$4
python=${OOMCAST_VALIDATE_PYTHON:-$5}
here=$(cd "$(dirname "$0")" && pwd)
found=$(sh "$here/require_torch.sh" "$python")
status=$?
echo "$found"
[ $status -eq 0 ] || exit $status
mkdir -p "$out_dir" || exit 2
trace="$out_dir/$(basename "$scenario" .yaml).trace"
OOMCAST_HOOK_DIR="$out_dir/hook-$(basename "$scenario" .yaml)" "$python" "$here/capture.py" "$scenario" -o "$trace" -q || exit 2
# The prediction follows the torch that ran the capture (the scenarios name 2.13, the venv's; under
# OOMCAST_VALIDATE_PYTHON=/usr/bin/python3 it is Debian's 1.13): the planner's version-dependent
# facts then match the capture.
version=${found#torch }
release=$(echo "${version%% *}" | cut -d. -f1,2)
exec "$oomcast" compare "$scenario" "$trace" --tolerance "$tolerance" --set "allocator.torch_version=$release"
