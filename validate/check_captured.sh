#!/bin/sh
# check_captured.sh: one CPU validation test of a captured model (validate/captured_validation.cmake):
# captures capture/examples/NAME.py (or validate/capture_corpus/NAME.py, whose scenario is
# validate/capture_corpus/NAME.yaml) into a graph file, checks that it counts the parameters
# PyTorch counts (validate/count_parameters.py), plans the scenario validate/captured/NAME.yaml
# (model: NAME.graph.yaml, at sizes the capture did not run), runs the model file's real training
# loop on the CPU (validate/capture.py) and compares them with `oomcast compare`, under PYTHON
# (the venv's torch 2.13) or $OOMCAST_VALIDATE_PYTHON. Exit 77 (skip) when that python has no
# torch, 1 under CI=true (validate/require_torch.sh).
#   check_captured.sh OOMCAST NAME OUT_DIR TOLERANCE PYTHON
set -u
oomcast=$1 name=$2 out_dir=$3 tolerance=$4
python=${OOMCAST_VALIDATE_PYTHON:-$5}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
found=$(sh "$here/require_torch.sh" "$python")
status=$?
echo "$found"
[ $status -eq 0 ] || exit $status
dir="$out_dir/captured-$name"
mkdir -p "$dir" || exit 2
model="$repo/capture/examples/$name.py" scenario="$here/captured/$name.yaml"
if [ ! -f "$model" ]; then
  model="$here/capture_corpus/$name.py" scenario="$here/capture_corpus/$name.yaml"
fi
"$python" "$repo/capture/oomcast_capture.py" "$model" -o "$dir/$name.graph.yaml" -q || exit 2
"$python" "$here/count_parameters.py" "$model" "$dir/$name.graph.yaml" || exit 1
cp "$scenario" "$dir/$name.yaml" || exit 2
if "$oomcast" plan "$dir/$name.yaml" 2>&1 | grep -q "unknown key 'oomcast_graph'"; then
  echo "SKIP: this oomcast reads no graph files yet (docs/graph-format.md's reader has not landed)"
  exit 77
fi
OOMCAST_HOOK_DIR="$dir/hook" "$python" "$here/capture.py" "$dir/$name.yaml" -o "$dir/$name.trace" -q || exit 2
# The prediction follows the torch that ran the capture (the scenarios name 2.13, the venv's; under
# OOMCAST_VALIDATE_PYTHON=/usr/bin/python3 it is Debian's 1.13): the planner's version-dependent
# facts then match the capture.
version=${found#torch }
release=$(echo "${version%% *}" | cut -d. -f1,2)
exec "$oomcast" compare "$dir/$name.yaml" "$dir/$name.trace" --tolerance "$tolerance" --set "allocator.torch_version=$release"
