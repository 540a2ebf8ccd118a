#!/bin/sh
# check_tensor_parallel.sh: one CPU tensor-parallel validation (registered by
# validate/tensor_parallel_validation.cmake): runs SCENARIO on its ranks with real DTensor TP
# over gloo (validate/tensor_parallel_capture.py), then `oomcast compare` of every rank's
# trace with the plan of that rank, within TOLERANCE. Exit 77 without torch, 1 under CI=true.
# OOMCAST_MESH_CAPTURE names another per-rank capture (validate/pipeline_parallel_capture.py).
#   check_tensor_parallel.sh OOMCAST SCENARIO OUT_DIR TOLERANCE PYTHON
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
capture=${OOMCAST_MESH_CAPTURE:-tensor_parallel_capture.py}
OOMCAST_HOOK_DIR="$out_dir/hook-tp" "$python" "$here/$capture" "$scenario" -o "$trace" || exit 2
version=${found#torch }
release=$(echo "${version%% *}" | cut -d. -f1,2)
worst=0
for rank_trace in "$trace".rank*; do
  echo "== $(basename "$rank_trace")"
  # A pipeline capture's rank is its stage: compare it with that stage's plan.
  stage=""
  [ "$capture" = pipeline_parallel_capture.py ] && stage="--set parallel.pipeline_planned_stage=${rank_trace##*.rank}"
  "$oomcast" compare "$scenario" "$rank_trace" --tolerance "$tolerance" --set "allocator.torch_version=$release" $stage
  code=$?
  [ $code -gt $worst ] && worst=$code
done
exit $worst
