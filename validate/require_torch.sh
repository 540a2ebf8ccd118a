#!/bin/sh
# require_torch.sh: the gate of every test that needs torch (captures, CPU validations, the GPU
# harness's dry run). When PYTHON imports torch and yaml it prints "torch VERSION (PYTHON)", so
# the test log names the torch that ran, and exits 0. Otherwise one line and exit 77 (ctest's
# skip code), or exit 1 when CI=true: in CI the project's venv (scripts/make-venv.sh, which
# scripts/build-and-test.sh runs) must be there, so a missing one fails instead of silently
# skipping every comparison with real PyTorch. One import of torch (seconds): callers take the
# version from this line instead of importing it again.
#   require_torch.sh PYTHON
python=$1
if version=$("$python" -c 'import torch, yaml; print(torch.__version__)' 2>/dev/null); then
  echo "torch $version ($python)"
  exit 0
fi
reason="$python cannot import torch and yaml; scripts/make-venv.sh builds .venv/ (torch 2.13 CPU), or configure with -DOOMCAST_PYTHON=PYTHON"
if [ "${CI:-}" = "true" ]; then
  echo "FAIL: $reason (CI=true: the tests that need torch must run, not skip)"
  exit 1
fi
echo "SKIP: $reason"
exit 77
