#!/bin/sh
# check_captured.sh: one CPU validation test of a captured model (validate/captured_validation.cmake):
# captures capture/examples/NAME.py into a graph file, plans the scenario validate/captured/NAME.yaml
# (model: NAME.graph.yaml, at sizes the capture did not run), runs the model file's real training
# loop on the CPU (validate/capture.py) and compares them with `oomcast compare`. Exit 77 (skip)
# when /usr/bin/python3 has no torch.
#   check_captured.sh OOMCAST NAME OUT_DIR TOLERANCE
set -u
oomcast=$1 name=$2 out_dir=$3 tolerance=$4
python=${OOMCAST_VALIDATE_PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
if ! "$python" -c 'import torch, torchvision, yaml' >/dev/null 2>&1; then
  echo "SKIP: $python cannot import torch, torchvision and yaml;" \
       "apt-get install python3-torch python3-torchvision python3-yaml to run the CPU validation"
  exit 77
fi
dir="$out_dir/captured-$name"
mkdir -p "$dir" || exit 2
"$python" "$repo/capture/oomcast_capture.py" "$repo/capture/examples/$name.py" -o "$dir/$name.graph.yaml" -q || exit 2
cp "$here/captured/$name.yaml" "$dir/$name.yaml" || exit 2
if "$oomcast" plan "$dir/$name.yaml" 2>&1 | grep -q "unknown key 'oomcast_graph'"; then
  echo "SKIP: this oomcast reads no graph files yet (docs/graph-format.md's reader has not landed)"
  exit 77
fi
OOMCAST_HOOK_DIR="$dir/hook" "$python" "$here/capture.py" "$dir/$name.yaml" -o "$dir/$name.trace" -q || exit 2
# The prediction follows the torch that ran the capture (the scenarios name 1.13, Debian's; under
# scripts/torch2-python it is 2.6): the planner's version-dependent rules then match the capture.
release=$("$python" -c 'import torch; print(".".join(torch.__version__.split("+")[0].split(".")[:2]))') || exit 2
exec "$oomcast" compare "$dir/$name.yaml" "$dir/$name.trace" --tolerance "$tolerance" --set "allocator.torch_version=$release"
