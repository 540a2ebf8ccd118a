#!/bin/sh
# with_python.sh: runs the capture tests' python: $OOMCAST_VALIDATE_PYTHON when set (as
# validate/check_scenario.sh does, e.g. scripts/torch2-python for torch 2.x), else DEFAULT.
#   with_python.sh DEFAULT SCRIPT ARGS...
default=$1
shift
exec "${OOMCAST_VALIDATE_PYTHON:-$default}" "$@"
