#!/usr/bin/env bash
# run_gpu_checks.sh: every GPU check in one bounded command (under 8 minutes on one GPU).
#   1. the CUDA context, measured twice per CUDA_MODULE_LOADING value (lazy, eager): by
#      cuda_replay --context (a bare CUDA process) and by torch (init + a matmul);
#   1b. validate/record_snapshots.py: small real snapshots with expandable segments, side
#      streams and record_stream, CUDA graph pools and MemPool, replayed by `oomcast replay`
#      (they come back in recordings/, to be committed to tests/data/);
#   2. cuda_replay --segments --raw on the planner's trace of each tiny scenario: the
#      simulator's own cudaMalloc/cudaFree decisions acted out, cudaMemGetInfo along the way;
#   3. validate/gpu_harness.py on each scenario of validate/gpu_scenarios.txt: the real
#      training loop on the GPU, per-phase allocated/reserved/device usage against
#      `oomcast plan`, its memory snapshot replayed by `oomcast replay`.
# It writes, in the output folder (--out DIR, else $OUT when the device tool runs it, else
# validate/results/): <gpu>-<date>.csv (the results; commit it as validate/results/), 
# <gpu>-<date>-extra.tar.gz (context.csv, cuda_replay.csv, per-scenario JSON and logs, the
# small gzipped snapshots, the recordings), recordings/ (the snapshots of step 1b, gzipped),
# summary.txt and log.txt. Every step has its own time limit and the
# whole run a budget (--budget S, default 420): scenarios not started in time are listed.
#
#   bash validate/run_gpu_checks.sh [--out DIR] [--budget SECONDS] [--dry-run]
#
# Binaries: $OOMCAST / $CUDA_REPLAY, else validate/device_kit/bin/ (made by
# validate/make_device_kit.sh on a machine with the build dependencies and carried along),
# else build/, else built here (cmake; cuda_replay alone also with plain nvcc).
# --dry-run: no GPU needed; checks the script's own plumbing (binaries found, harness dry
# runs of two scenarios, the packing) and writes to a temporary folder unless --out is given.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
cd "$repo" || exit 2
start=$(date +%s)
budget=420
dry_run=0
out_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out_dir=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "run_gpu_checks: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if [ -z "$out_dir" ]; then
  if [ "$dry_run" = 1 ]; then out_dir=$(mktemp -d /tmp/gpu-checks-dry.XXXXXX)
  elif [ -n "${OUT:-}" ]; then out_dir=$OUT
  else out_dir=$here/results
  fi
fi
mkdir -p "$out_dir" || exit 2
work=$(mktemp -d /tmp/gpu-checks.XXXXXX)
log=$work/log.txt
: > "$log"
say() { echo "$*" | tee -a "$log"; }
elapsed() { echo $(( $(date +%s) - start )); }
# step LIMIT NAME COMMAND...: runs one step under its own time limit, cut to what is left of
# the budget (a step with under 10 s left is not started), its output in the log.
step() {
  local limit=$1 name=$2; shift 2
  local left=$(( budget - $(elapsed) ))
  if [ "$left" -lt 10 ]; then
    echo "$name: not started (budget)" >> "$work/steps.txt"
    skipped="$skipped [$name]"
    say "[$(elapsed)s] $name: not started (budget ${budget}s spent)"
    return 1
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local began=$(date +%s)
  timeout -k 5 "$limit" "$@" < /dev/null >> "$log" 2>&1
  local code=$?
  local took=$(( $(date +%s) - began ))
  if [ $code -eq 124 ] || [ $code -eq 137 ]; then code="timeout(${limit}s)"; fi
  echo "$name: exit $code, ${took}s" >> "$work/steps.txt"
  say "[$(elapsed)s] $name: exit $code (${took}s)"
  [ "$code" = 0 ]
}

python=${PYTHON:-python3}
skipped=""
# the dry run on a machine with the project's venv (scripts/make-venv.sh): its torch 2.13 CPU
[ "$dry_run" = 1 ] && [ -x "$repo/.venv/bin/python" ] && python=${PYTHON:-$repo/.venv/bin/python}

# ---- binaries --------------------------------------------------------------------------
kit=$here/device_kit/bin
oomcast=${OOMCAST:-}
if [ -z "$oomcast" ]; then
  for candidate in "$kit/oomcast" "$repo/build/oomcast"; do
    if [ -x "$candidate" ] && "$candidate" --help > /dev/null 2>&1; then oomcast=$candidate; break; fi
  done
fi
# A dry run builds nothing: it checks the plumbing with what is there.
if [ -z "$oomcast" ] && [ "$dry_run" = 0 ] && command -v cmake > /dev/null; then
  step 300 "build oomcast (cmake)" sh -c "cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DOOMCAST_BUILD_TESTS=OFF -DOOMCAST_BUILD_BENCH=OFF && cmake --build build-gpu --target oomcast cuda_replay" &&
    oomcast=$repo/build-gpu/oomcast
fi
replay=${CUDA_REPLAY:-}
if [ -z "$replay" ]; then
  for candidate in "$kit/cuda_replay" "$repo/build/cuda_replay" "$repo/build-gpu/cuda_replay"; do
    if [ -x "$candidate" ]; then replay=$candidate; break; fi
  done
fi
if [ -z "$replay" ] && [ "$dry_run" = 0 ] && command -v nvcc > /dev/null; then
  # Plain nvcc: cuda_replay needs only validate/, sim/ and base/ (standard library and zlib).
  sources=$(ls validate/device_replay_plan.cc validate/device_replay_run.cc validate/cuda_replay_cli.cc \
            sim/*.cc base/*.cc | grep -v '_test\.cc$')
  step 240 "build cuda_replay (nvcc)" nvcc -std=c++20 -O2 -I. -arch=native -o "$work/cuda_replay" \
    validate/cuda_replay.cu $sources -lz -ldl && replay=$work/cuda_replay
fi
say "oomcast: ${oomcast:-NONE (predictions will be made later by validate/check_gpu_results.py)}"
say "cuda_replay: ${replay:-NONE (cuda_replay checks skipped)}"
oomcast_arg=${oomcast:-/nonexistent/oomcast}

# ---- the machine -----------------------------------------------------------------------
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -4
  else
    echo "nvidia-smi: not installed here"
  fi
  "$python" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'available', torch.cuda.is_available())" 2>&1
  nvcc --version 2>&1 | tail -1
} > "$work/env.txt"
cat "$work/env.txt" >> "$log"
gpu_name=$( (nvidia-smi --query-gpu=name --format=csv,noheader || true) 2>/dev/null | head -1)
[ "$dry_run" = 1 ] && gpu_name="dry-run"
[ -z "$gpu_name" ] && gpu_name="unknown-gpu"
# "NVIDIA H200" -> h200
gpu_slug=$(echo "$gpu_name" | tr 'A-Z' 'a-z' | sed -e 's/nvidia//; s/geforce//; s/[^a-z0-9]\+/-/g; s/^-//; s/-$//')
stamp=$(date -u +%Y-%m-%d)
name=$gpu_slug-$stamp
say "GPU: $gpu_name -> results $name.csv"

# ---- 1. the CUDA context ----------------------------------------------------------------
context_csv=$work/context.csv
echo "source,module_loading,context_bytes,method,detail" > "$context_csv"
# torch's own context: what a torch process holds outside the allocator after CUDA init,
# and after its first matmul (cuBLAS loaded). Appends one CSV row to argv[1].
cat > "$work/torch_context.py" <<'PROBE'
import os, sys, torch
torch.cuda.init(); torch.empty(1, device="cuda"); torch.cuda.synchronize()
free, total = torch.cuda.mem_get_info()
outside = total - free - torch.cuda.memory_reserved()
a = torch.randn(256, 256, device="cuda"); (a @ a).sum().item(); torch.cuda.synchronize()
free2, _ = torch.cuda.mem_get_info()
after_matmul = total - free2 - torch.cuda.memory_reserved()
process = ""
try:
    import pynvml
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
        if p.pid == os.getpid():
            process = f" nvml_process_minus_reserved={p.usedGpuMemory - torch.cuda.memory_reserved()}"
except Exception as error:
    process = f" nvml=unavailable({type(error).__name__})"
loading = os.environ.get("CUDA_MODULE_LOADING", "").lower()
with open(sys.argv[1], "a") as f:
    f.write(f"torch {torch.__version__},{loading},{outside},mem_get_info_used_minus_reserved,"
            f"after_first_matmul={after_matmul}{process}\n")
PROBE
if [ "$dry_run" = 0 ]; then
  for loading in LAZY EAGER; do
    if [ -n "$replay" ]; then
      step 30 "cuda_replay --context ($loading)" env CUDA_MODULE_LOADING=$loading \
        "$replay" --context --csv "$work/context-$loading.csv"
      tail -n +2 "$work/context-$loading.csv" 2>/dev/null | awk -F, -v l="$loading" \
        '{print "cuda_replay," tolower(l) "," $7 "," $8 ",gpu=" $2 " runtime=" $4 " driver=" $5}' >> "$context_csv"
    fi
    step 90 "torch context ($loading)" env CUDA_MODULE_LOADING=$loading "$python" "$work/torch_context.py" \
      "$context_csv"
  done
fi

# ---- 1b. real snapshots of expandable segments, side streams, graph pools, MemPool ----------
# validate/record_snapshots.py: one small recording each, in its own process, replayed at once
# by oomcast replay; the gzipped pickles come back in recordings/ for tests/data/.
recordings=$work/recordings
mkdir -p "$recordings"
if [ "$dry_run" = 1 ]; then
  step 60 "record snapshots (dry run)" "$python" "$here/record_snapshots.py" --out "$recordings" --dry-run \
    --oomcast "$oomcast_arg" || true
else
  step 150 "record snapshots" "$python" "$here/record_snapshots.py" --out "$recordings" --timeout 60 \
    --oomcast "$oomcast_arg" || true
fi

# ---- 2. cuda_replay on the planner's traces ---------------------------------------------
replay_csv=$work/cuda_replay.csv
if [ -n "$replay" ] && [ -n "$oomcast" ] && [ "$dry_run" = 0 ]; then
  for scenario in validate/scenarios/gpt2-tiny-adamw.yaml validate/scenarios/resnet18-tiny-adamw.yaml \
                  validate/scenarios/llama-tiny-amp-ckpt.yaml scenarios/gpt2-small-b8-amp-bf16.yaml; do
    base=$(basename "$scenario" .yaml)
    trace=$work/$base.trace
    step 60 "plan --emit-trace $base" "$oomcast" plan "$scenario" --set device=h200 --emit-trace "$trace"
    [ -s "$trace" ] || continue
    if step 60 "cuda_replay $base" "$replay" "$trace" --segments --raw --csv "$work/replay-$base.csv"; then :; fi
    if [ -s "$work/replay-$base.csv" ]; then
      if [ ! -s "$replay_csv" ]; then head -1 "$work/replay-$base.csv" | sed 's/^/scenario,/' > "$replay_csv"; fi
      tail -n +2 "$work/replay-$base.csv" | sed "s|^|$base,|" >> "$replay_csv"
    fi
    rm -f "$trace"
  done
fi

# ---- 3. the harness on every scenario ----------------------------------------------------
results=$work/$name.csv
snapshots=$work/snapshots
mkdir -p "$snapshots"
dry_flag=""
scenario_list=$(grep -v '^#' "$here/gpu_scenarios.txt" | grep -v '^[[:space:]]*$')
if [ "$dry_run" = 1 ]; then
  dry_flag="--dry-run"
  scenario_list=$(printf 'validate/scenarios/gpt2-tiny-adamw.yaml 120\nvalidate/scenarios/mlp-adam-zero.yaml 120\n')
fi
while read -r scenario limit; do
  [ -z "$scenario" ] && continue
  base=$(basename "$scenario" .yaml)
  step "$limit" "harness $base" "$python" "$here/gpu_harness.py" "$scenario" --out "$snapshots" --csv "$results" \
    --oomcast "$oomcast_arg" --snapshot-max-mib 2 $dry_flag || true
done <<< "$scenario_list"

# ---- summary and packing -----------------------------------------------------------------
summary=$work/summary.txt
{
  echo "run_gpu_checks on $gpu_name, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(elapsed)s of ${budget}s"
  cat "$work/env.txt"
  echo
  echo "steps:"; sed 's/^/  /' "$work/steps.txt" 2>/dev/null
  [ -n "$skipped" ] && echo "not started (budget):$skipped"
  true
  echo
  echo "CUDA context (bytes):"; sed 's/^/  /' "$context_csv"
  if [ -s "$replay_csv" ]; then
    echo; echo "cuda_replay summaries:"; grep -h "cuda_replay: " "$log" | sed 's/^/  /'
  fi
  echo; echo "recorded snapshots (validate/record_snapshots.py):"
  if [ -s "$recordings/summary.csv" ]; then sed 's/^/  /' "$recordings/summary.csv"; else echo "  none"; fi
  echo; echo "harness, predicted vs measured per phase (as recorded in the CSV):"
  if [ -s "$results" ]; then
    timeout -k 5 30 "$python" "$here/check_gpu_results.py" --table "$results" 2>&1 | head -300 | sed 's/^/  /'
  else
    echo "  no results written"
  fi
  echo; echo "snapshot replays (oomcast replay must reproduce every segment decision):"
  grep -h "^oomcast replay" "$log" | sed 's/^/  /'
  if [ -s "$results" ]; then
    echo; echo "checking the results against the current planner (validate/check_gpu_results.py):"
    if [ -n "$oomcast" ]; then
      timeout -k 5 60 "$python" "$here/check_gpu_results.py" "$results" --oomcast "$oomcast" 2>&1 | tail -40 |
        sed 's/^/  /'
    else
      echo "  skipped: no oomcast binary here; run it after committing the CSV"
    fi
  fi
} > "$summary" 2>&1
[ -s "$results" ] && cp "$results" "$out_dir/$name.csv"
tar -C "$work" -czf "$out_dir/$name-extra.tar.gz" --exclude='*.trace' env.txt steps.txt context.csv \
  $( [ -s "$replay_csv" ] && echo cuda_replay.csv ) snapshots recordings 2>> "$log"
if ls "$recordings"/*.pickle.gz > /dev/null 2>&1 || [ -s "$recordings/summary.csv" ]; then
  mkdir -p "$out_dir/recordings" && cp "$recordings"/* "$out_dir/recordings/"
fi
cp "$summary" "$out_dir/summary.txt"
cp "$log" "$out_dir/log.txt"
cat "$summary"
echo
echo "run_gpu_checks: wrote $(ls "$out_dir" | tr '\n' ' ')in $out_dir"
rm -rf "$work"
if [ ! -s "$out_dir/$name.csv" ]; then
  if ! "$python" -c "import torch" 2> /dev/null; then
    echo "run_gpu_checks: $python has no torch: no harness ran (skipped)"
    exit 77
  fi
  echo "run_gpu_checks: no results were written"
  exit 1
fi
exit 0
