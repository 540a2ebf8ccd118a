#!/usr/bin/env bash
# Checks that a change which should not move any prediction (a refactor, a file move) leaves
# the plan of every bundled scenario byte-identical: runs `plan --json` of each scenario with
# two oomcast binaries and compares stdout, stderr and the exit code.
# Usage: scripts/plans-identical.sh OLD_OOMCAST NEW_OOMCAST [SCENARIO.yaml...]
# (default: scenarios/*.yaml, scenarios/published/*.yaml, validate/scenarios/*.yaml).
# Prints one line per difference and a total; exits 1 when any plan differs, 2 on bad usage.
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
  scenarios=(scenarios/*.yaml scenarios/published/*.yaml validate/scenarios/*.yaml)
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
total=0 identical=0
for scenario in "${scenarios[@]}"; do
  total=$((total + 1))
  "$old" plan "$scenario" --json >"$work/old.out" 2>"$work/old.err"; old_code=$?
  "$new" plan "$scenario" --json >"$work/new.out" 2>"$work/new.err"; new_code=$?
  if [ "$old_code" != "$new_code" ]; then
    echo "DIFFERS $scenario: exit code $old_code before, $new_code after"
  elif ! cmp -s "$work/old.out" "$work/new.out"; then
    echo "DIFFERS $scenario: stdout ($(diff "$work/old.out" "$work/new.out" | grep -c '^[<>]') lines)"
  elif ! cmp -s "$work/old.err" "$work/new.err"; then
    echo "DIFFERS $scenario: stderr"
  else
    identical=$((identical + 1))
  fi
done
echo "$total scenarios, $identical identical plans (stdout, stderr and exit code of plan --json)"
[ "$identical" -eq "$total" ]
