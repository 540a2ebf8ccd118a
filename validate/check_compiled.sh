#!/bin/sh
# check_compiled.sh: one CPU validation test of a compiled model (validate/compiled_validation.cmake):
# captures validate/compiled/MODEL.py as torch.compile runs it (capture/oomcast_capture.py --compile,
# with the scenario's compile: settings; a config.json model is captured by oomcast itself), plans validate/compiled/NAME.yaml at sizes the capture did
# not run, runs the real compiled training loop on the CPU (validate/capture.py: torch.compile with
# inductor's CPU backend, every allocation recorded) and compares them: the per-phase peak error
# within TOLERANCE at most and 1% in the median. Exit 77 (skip) when PYTHON has no torch, 1 under
# CI=true (validate/require_torch.sh).
#   check_compiled.sh OOMCAST NAME OUT_DIR TOLERANCE PYTHON
set -u
oomcast=$1 name=$2 out_dir=$3 tolerance=$4
python=${OOMCAST_VALIDATE_PYTHON:-$5}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
found=$(sh "$here/require_torch.sh" "$python")
status=$?
echo "$found"
[ $status -eq 0 ] || exit $status
scenario="$here/compiled/$name.yaml"
dir="$out_dir/compiled-$name"
mkdir -p "$dir" || exit 2
# the scenario's model: MODEL.graph.yaml, captured from validate/compiled/MODEL.py with its compile: map
read_key='import json, sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
if sys.argv[2] == "device":
    device = doc.get("device")
    print("cpu" if device == "cpu" or (isinstance(device, dict) and device.get("profile") == "cpu") else "cuda")
else:
    print(doc["model"] if sys.argv[2] == "model" else json.dumps(doc.get("compile") or {}))'
graph=$("$python" -c "$read_key" "$scenario" model) || exit 2
settings=$("$python" -c "$read_key" "$scenario" compile) || exit 2
device_kind=$("$python" -c "$read_key" "$scenario" device) || exit 2
transformers=
case "$graph" in
  *.json)
    # a config.json: oomcast captures it compiled itself (scenario/hf_capture.cc, the one path a
    # family's config.json takes with compile:), with this python, into a cache of this test's own
    config="$(cd "$here/compiled/$(dirname "$graph")" && pwd)/$(basename "$graph")" || exit 2
    sed "s#^model: .*#model: $config#" "$scenario" > "$dir/$name.yaml" || exit 2
    export OOMCAST_PYTHON="$python" OOMCAST_CACHE_DIR="$dir/cache"
    transformers=--transformers
    ;;
  *)
    model="$here/compiled/${graph%.graph.yaml}.py"
    # a scenario's "# capture-sizes: --sizes KEY=A,B,C ..." line: where the capture runs instead of the model file's sizes
    sizes=$(sed -n 's/^# capture-sizes: //p' "$scenario")
    "$python" "$repo/capture/oomcast_capture.py" "$model" --compile "$settings" --for-device "$device_kind" $sizes -o "$dir/$graph" -q || exit 2
    cp "$scenario" "$dir/$name.yaml" || exit 2
    ;;
esac
OOMCAST_HOOK_DIR="$dir/hook" "$python" "$here/capture.py" "$dir/$name.yaml" $transformers -o "$dir/$name.trace" -q || exit 2
version=${found#torch }
release=$(echo "${version%% *}" | cut -d. -f1,2)
"$oomcast" compare "$dir/$name.yaml" "$dir/$name.trace" --tolerance "$tolerance" --set "allocator.torch_version=$release"
status=$?
"$oomcast" compare "$dir/$name.yaml" "$dir/$name.trace" --json --set "allocator.torch_version=$release" > "$dir/$name.compare.json"
median=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["median_abs_peak_error"])' "$dir/$name.compare.json") || exit 2
if "$python" -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= 0.01 else 1)' "$median"; then
  exit $status
fi
echo "OUTSIDE: the median per-phase peak error $median is above 1%"
exit 1
