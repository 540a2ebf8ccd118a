#!/usr/bin/env bash
# Checks that a speed-up which should not move any answer leaves the doctor's, the search's and
# the sweep's answers identical: runs `whatif --json`, `search --json --fit` and a small
# `sweep --json` of each scenario with two oomcast binaries and compares stdout (without the
# "seconds" lines, which time the run), stderr and the exit code. The plan's counterpart is
# scripts/plans-identical.sh.
# Usage: scripts/answers-identical.sh OLD_OOMCAST NEW_OOMCAST [SCENARIO.yaml...]
# (default: scenarios/*.yaml). Prints one line per difference and a total; exits 1 when any
# answer differs, 2 on bad usage.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
  echo "usage: $0 OLD_OOMCAST NEW_OOMCAST [SCENARIO.yaml...] (both must be executables)" >&2
  exit 2
fi
old=$1 new=$2
shift 2
if [ $# -gt 0 ]; then
  scenarios=("$@")
else
  scenarios=(scenarios/*.yaml)
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
total=0 identical=0
compare() {  # compare LABEL ARGS...: runs both binaries with ARGS
  local label=$1
  shift
  total=$((total + 1))
  "$old" "$@" 2>"$work/old.err" | grep -v '"seconds":' >"$work/old.out"; local old_code=${PIPESTATUS[0]}
  "$new" "$@" 2>"$work/new.err" | grep -v '"seconds":' >"$work/new.out"; local new_code=${PIPESTATUS[0]}
  if [ "$old_code" != "$new_code" ]; then
    echo "DIFFERS $label: exit code $old_code before, $new_code after"
  elif ! cmp -s "$work/old.out" "$work/new.out"; then
    echo "DIFFERS $label: stdout ($(diff "$work/old.out" "$work/new.out" | grep -c '^[<>]') lines)"
  elif ! cmp -s "$work/old.err" "$work/new.err"; then
    echo "DIFFERS $label: stderr"
  else
    identical=$((identical + 1))
  fi
}
for scenario in "${scenarios[@]}"; do
  compare "whatif $scenario" whatif "$scenario" --json
  compare "search $scenario" search "$scenario" --json --fit --max 4096
  compare "sweep $scenario" sweep "$scenario" --json --grid "batch_size=1,2,4" "iterations=2,3"
done
echo "$total answers, $identical identical (stdout without timings, stderr and exit code of whatif, search, sweep)"
[ "$identical" -eq "$total" ]
