#!/bin/sh
# Runs the real cuda_replay binary once on TRACE: without a GPU it must exit 77 with its
# one-line reason (ctest then counts the test as skipped); with one it must exit 0 with an
# exact segment replay. Any other exit (a crash, a CUDA error) fails.
# usage: check_cuda_replay.sh CUDA_REPLAY TRACE
replay=$1
trace=$2
err=$(mktemp)
"$replay" "$trace" --segments 2>"$err"
code=$?
cat "$err"
if [ "$code" -eq 77 ]; then
  if grep -q "cuda_replay: no usable CUDA GPU: .*nothing was run" "$err"; then
    echo "no GPU here: the no-GPU path is checked (clean message, exit 77), the replay is not"
    rm -f "$err"; exit 77
  fi
  echo "FAIL: exit 77 without the no-GPU message"; rm -f "$err"; exit 1
elif [ "$code" -eq 0 ]; then
  if grep -q "segments: .*every probe exact" "$err"; then rm -f "$err"; exit 0; fi
  echo "FAIL: the segment replay did not match the prediction at every probe"; rm -f "$err"; exit 1
fi
echo "FAIL: cuda_replay exited $code"
rm -f "$err"
exit 1
