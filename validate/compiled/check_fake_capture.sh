#!/bin/sh
# check_fake_capture.sh: the compiled capture makes no real tensors. It captures
# validate/compiled/fake/big_linear.py (12.5 GB of fp32 parameters) with --compile under an
# 8 GB address-space limit; a capture that materialised the weights would fail (and could not
# take the shared machine down). Exit 77 (skip) when PYTHON has no torch, 1 under CI=true.
#   check_fake_capture.sh OUT_DIR PYTHON
set -u
out_dir=$1
python=${OOMCAST_VALIDATE_PYTHON:-$2}
here=$(cd "$(dirname "$0")/.." && pwd)
found=$(sh "$here/require_torch.sh" "$python")
status=$?
echo "$found"
[ $status -eq 0 ] || exit $status
mkdir -p "$out_dir" || exit 2
graph="$out_dir/big_linear.graph.yaml"
( ulimit -v 8000000 && "$python" "$here/../capture/oomcast_capture.py" "$here/compiled/fake/big_linear.py" --compile \
    --for-device cpu -o "$graph" ) || { echo "FAILED: the compiled capture of a 12.5 GB model did not fit in 8 GB"; exit 1; }
grep -q "shape: \[56000, 56000\]" "$graph" || { echo "FAILED: $graph has no 56000 x 56000 parameter"; exit 1; }
echo "captured compiled in under 8 GB of address space: $graph"
