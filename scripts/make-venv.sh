#!/usr/bin/env bash
# Builds the project's Python environment (.venv/ in the checkout, or $OOMCAST_VENV) from the
# pinned scripts/venv-requirements.txt: torch 2.13 (CPU) and the packages the capture, the CPU
# validations and the peers need. The CLI needs none of it, so the README's first command does
# not call this; the test command does. Idempotent: a venv whose stamp matches the requirements
# is kept as it is (under a second). Prints the venv's python on its last line.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${OOMCAST_VENV:-$repo/.venv}
# OOMCAST_VENV_REQUIREMENTS names another requirements file (the tests use one pip cannot satisfy).
requirements=${OOMCAST_VENV_REQUIREMENTS:-$repo/scripts/venv-requirements.txt}
stamp=$venv/.oomcast-requirements.sha256
wanted=$(sha256sum "$requirements" | cut -d' ' -f1)

if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$wanted" ]; then
  echo "make-venv: $venv is up to date"
  echo "$venv/bin/python"
  exit 0
fi
base_python=""
for candidate in ${OOMCAST_BASE_PYTHON:-} python3.11 python3; do
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import venv, ensurepip' 2>/dev/null; then
    base_python=$candidate
    break
  fi
done
if [ -z "$base_python" ]; then
  echo "make-venv: no python3 with the venv and ensurepip modules (Debian: apt-get install python3-venv)" >&2
  exit 2
fi
log=$(mktemp "${TMPDIR:-/tmp}/oomcast-make-venv.XXXXXX.log")
echo "make-venv: building $venv with $("$base_python" --version 2>&1) (log: $log)"
if ! "$base_python" -m venv --clear "$venv" >"$log" 2>&1; then
  echo "make-venv: could not create $venv: $(tail -n 1 "$log")" >&2
  exit 2
fi
if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q -r "$requirements" >>"$log" 2>&1; then
  reason=$(grep -E '^ERROR:' "$log" | head -n 1)
  echo "make-venv: pip could not install ${requirements#"$repo"/}: ${reason:-$(tail -n 1 "$log")} (full log: $log)" >&2
  exit 2
fi
echo "$wanted" > "$stamp"
rm -f "$log"
echo "make-venv: $venv ready ($("$venv/bin/python" -c 'import torch; print("torch", torch.__version__)'))"
echo "$venv/bin/python"
