#!/usr/bin/env bash
# make_device_kit.sh: packs what validate/run_gpu_checks.sh needs on a GPU machine that cannot
# build oomcast (no yaml-cpp, fmt, Boost, CLI11 there): the oomcast and cuda_replay binaries of
# BUILD_DIR (default build/, stripped) and the shared libraries oomcast needs beyond glibc, into
# validate/device_kit/ (git-ignored; carry it to the machine). bin/oomcast is a wrapper that
# puts the kit's lib/ first on LD_LIBRARY_PATH for oomcast alone (not for python or torch).
#
#   bash validate/make_device_kit.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:-$(dirname "$here")/build}
kit=$here/device_kit
for binary in oomcast cuda_replay; do
  if [ ! -x "$build/$binary" ]; then
    echo "make_device_kit: $build/$binary is missing; build first (cmake --build build; cuda_replay needs nvcc)" >&2
    exit 2
  fi
done
rm -rf "$kit"
mkdir -p "$kit/bin" "$kit/lib"
cp "$build/oomcast" "$kit/bin/oomcast.bin"
cp "$build/cuda_replay" "$kit/bin/cuda_replay"
strip "$kit/bin/oomcast.bin" "$kit/bin/cuda_replay"
# Every library oomcast loads except glibc's own (the GPU machine's glibc is newer).
ldd "$build/oomcast" | awk '/=> \// {print $3}' | while read -r library; do
  case $(basename "$library") in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libresolv.so*) ;;
    *) cp -L "$library" "$kit/lib/" ;;
  esac
done
cat > "$kit/bin/oomcast" <<'WRAPPER'
#!/bin/sh
# oomcast with the kit's libraries (validate/make_device_kit.sh).
kit_bin=$(cd "$(dirname "$0")" && pwd)
LD_LIBRARY_PATH="$kit_bin/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$kit_bin/oomcast.bin" "$@"
WRAPPER
chmod +x "$kit/bin/oomcast"
"$kit/bin/oomcast" --help > /dev/null
du -sh "$kit"
ls -l "$kit/bin" "$kit/lib"
