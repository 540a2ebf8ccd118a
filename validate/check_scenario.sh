#!/bin/sh
# check_scenario.sh: one CPU validation test (registered by validate/cpu_validation.cmake):
# captures SCENARIO with real PyTorch, then `oomcast compare` with the tolerance. Exit 77
# (ctest's skip code) when /usr/bin/python3 has no torch.
#   check_scenario.sh OOMCAST SCENARIO OUT_DIR TOLERANCE
set -u
oomcast=$1 scenario=$2 out_dir=$3 tolerance=$4
python=${OOMCAST_VALIDATE_PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
if ! "$python" -c 'import torch, torchvision, yaml' >/dev/null 2>&1; then
  echo "SKIP: $python cannot import torch, torchvision and yaml;" \
       "apt-get install python3-torch python3-torchvision python3-yaml to run the CPU validation"
  exit 77
fi
mkdir -p "$out_dir" || exit 2
trace="$out_dir/$(basename "$scenario" .yaml).trace"
OOMCAST_HOOK_DIR="$out_dir/hook-$(basename "$scenario" .yaml)" "$python" "$here/capture.py" "$scenario" -o "$trace" -q || exit 2
# The prediction follows the torch that ran the capture (the scenarios name 1.13, Debian's; under
# scripts/torch2-python it is 2.6): the planner's version-dependent rules then match the capture.
release=$("$python" -c 'import torch; print(".".join(torch.__version__.split("+")[0].split(".")[:2]))') || exit 2
exec "$oomcast" compare "$scenario" "$trace" --tolerance "$tolerance" --set "allocator.torch_version=$release"
