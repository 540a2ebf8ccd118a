#!/bin/sh
# build_hook.sh: compiles alloc_hook.c into the LD_PRELOAD libraries capture.py uses.
#   validate/build_hook.sh [OUTDIR]   (default: validate/build)
# Produces alloc_hook.so (posix_memalign + free only) and alloc_hook_survey.so (also counts
# malloc/calloc/realloc/aligned_alloc/memalign/valloc, for capture.py --survey).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-"$here/build"}
mkdir -p "$out"
cc=${CC:-cc}
flags="-O2 -fPIC -shared -Wall -Wextra -std=gnu11"
$cc $flags -o "$out/alloc_hook.so.tmp" "$here/alloc_hook.c" -lpthread
$cc $flags -DHOOK_SURVEY -o "$out/alloc_hook_survey.so.tmp" "$here/alloc_hook.c" -lpthread
mv "$out/alloc_hook.so.tmp" "$out/alloc_hook.so"
mv "$out/alloc_hook_survey.so.tmp" "$out/alloc_hook_survey.so"
echo "$out/alloc_hook.so"
