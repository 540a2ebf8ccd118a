#!/bin/sh
# check_op_facts.sh: the ctest op_facts.torch_2_13 (validate/cpu_validation.cmake). Re-measures
# every probe of validate/op_probe.py with real torch on the CPU and compares the table with the
# committed one (validate/op_facts/torch-MAJOR.MINOR-cpu.tsv), which the planner's tests read
# (planner/autocast_lists_test.cc, planner/ops/op_facts_test.cc). A difference means torch's
# kernels or autocast lists changed: regenerate the table and fix the catalogue to match. Skips
# (77) without torch or when no table exists for this torch; fails under CI=true without torch.
#   check_op_facts.sh PYTHON OUT_DIR
set -u
python=${OOMCAST_VALIDATE_PYTHON:-$1}
out_dir=$2
here=$(cd "$(dirname "$0")" && pwd)
found=$(sh "$here/require_torch.sh" "$python")
status=$?
echo "$found"
[ $status -eq 0 ] || exit $status
version=${found#torch }
release=$(echo "${version%% *}" | cut -d. -f1,2)
table="$here/op_facts/torch-$release-cpu.tsv"
if [ ! -f "$table" ]; then
  echo "SKIP: no measured table for torch $release ($table)"
  exit 77
fi
mkdir -p "$out_dir" || exit 2
OOMCAST_HOOK_DIR="$out_dir/hook" "$python" "$here/op_probe.py" --table "$out_dir/torch-$release-cpu.tsv" || exit 2
# The first line names the exact build (2.13.0+cpu); the facts are the rest. oneDNN and the bf16
# GEMMs pick their buffers by the CPU's instruction set (measured: AVX2 and AVX512 differ in the
# conv and bf16 matmul rows, and AVX512 with AVX512_BF16 in the bf16 matmul rows): on another
# capability than the table's only the autocast rows are compared, and the test says so.
tail -n +2 "$table" > "$out_dir/committed.tsv"
tail -n +2 "$out_dir/torch-$release-cpu.tsv" > "$out_dir/measured.tsv"
committed_isa=$(grep '^# cpu capability' "$out_dir/committed.tsv" | cut -d' ' -f4)
measured_isa=$(grep '^# cpu capability' "$out_dir/measured.tsv" | cut -d' ' -f4)
if [ "$committed_isa" != "$measured_isa" ]; then
  echo "NOTE: the table was measured on $committed_isa, this CPU is $measured_isa: only the autocast rows are compared"
  for f in committed measured; do
    grep '^autocast' "$out_dir/$f.tsv" > "$out_dir/$f.filtered" && mv "$out_dir/$f.filtered" "$out_dir/$f.tsv"
  done
fi
if ! diff -u "$out_dir/committed.tsv" "$out_dir/measured.tsv"; then
  echo "FAIL: torch $release on the CPU no longer does what $table says (regenerate it, then fix the catalogue)"
  exit 1
fi
echo "op facts of torch $release agree with $table"
