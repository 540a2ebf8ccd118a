#!/bin/sh
# with_python.sh: runs a test that needs torch with PYTHON (the venv's, OOMCAST_PYTHON in CMake),
# or $OOMCAST_VALIDATE_PYTHON when set at test time (another torch, e.g. Debian's /usr/bin/python3
# with torch 1.13). Skips (77), or fails under CI=true, when that python has no torch
# (validate/require_torch.sh).
#   with_python.sh PYTHON SCRIPT ARGS...
python=${OOMCAST_VALIDATE_PYTHON:-$1}
shift
sh "$(dirname "$0")/require_torch.sh" "$python" || exit $?
exec "$python" "$@"
