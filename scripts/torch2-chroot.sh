#!/usr/bin/env bash
# torch2-chroot.sh: builds a Debian 13 (trixie) chroot with torch 2.x (python3-torch 2.6) outside
# the repo, so the capture and the CPU validations can be run under torch 2.x on a bookworm
# machine whose own python has torch 1.13 (pip is not needed: Debian packages only).
#   sudo scripts/torch2-chroot.sh [DIR]     (default: $OOMCAST_TORCH2_ROOT, else /work/trixie)
# Idempotent: an existing chroot is kept and only the missing packages are installed. Then run
# python there with scripts/torch2-python (OOMCAST_VALIDATE_PYTHON=scripts/torch2-python).
# Some tests run build/oomcast from that python, inside the chroot: the shared libraries it needs
# that trixie lacks (bookworm's sonames: libfmt.so.9, libyaml-cpp.so.0.7) are copied into the
# chroot's /usr/local/lib/oomcast-host, so run this again after the first build.
# Not part of CI: it needs root and deb.debian.org.
set -euo pipefail
root=${1:-${OOMCAST_TORCH2_ROOT:-/work/trixie}}
mirror=${OOMCAST_TORCH2_MIRROR:-http://deb.debian.org/debian}
packages=(python3-torch python3-torchvision python3-yaml gcc libc6-dev)

if [ "$(id -u)" -ne 0 ]; then
  echo "torch2-chroot: must run as root (debootstrap and chroot need it); try: sudo $0 $*" >&2
  exit 2
fi
if ! command -v curl >/dev/null 2>&1 && ! command -v wget >/dev/null 2>&1; then
  echo "torch2-chroot: needs curl or wget to check that $mirror is reachable" >&2
  exit 2
fi
probe="$mirror/dists/trixie/Release"
if ! { curl -fsI --max-time 15 "$probe" >/dev/null 2>&1 || wget -q --spider --timeout=15 "$probe" >/dev/null 2>&1; }; then
  echo "torch2-chroot: $probe is not reachable (offline?); nothing was changed" >&2
  exit 3
fi
if ! command -v debootstrap >/dev/null 2>&1; then
  echo "torch2-chroot: installing debootstrap"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap
fi

if [ ! -x "$root/usr/bin/apt-get" ] || [ ! -f "$root/etc/os-release" ] || ! grep -q trixie "$root/etc/os-release"; then
  if [ -e "$root" ] && [ -n "$(ls -A "$root" 2>/dev/null)" ] && [ ! -f "$root/debootstrap/debootstrap.log" ]; then
    echo "torch2-chroot: $root exists, is not empty and is not a trixie chroot; refusing to touch it" >&2
    exit 2
  fi
  echo "torch2-chroot: debootstrap trixie into $root (a few minutes)"
  debootstrap --variant=minbase trixie "$root" "$mirror"
fi

missing=()
for package in "${packages[@]}"; do
  chroot "$root" dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "torch2-chroot: installing ${missing[*]} in $root"
  cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
  chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  chroot "$root" apt-get clean
fi

# bookworm's libraries of build/oomcast that trixie has under no such soname
repo=$(cd "$(dirname "$0")/.." && pwd)
binary=${OOMCAST_TORCH2_HOST_BINARY:-$repo/build/oomcast}
if [ -x "$binary" ]; then
  host_libs=$root/usr/local/lib/oomcast-host
  mkdir -p "$host_libs"
  copied=()
  rm -f "$root/etc/ld.so.conf.d/oomcast-host.conf"
  known=$(chroot "$root" /sbin/ldconfig -p)
  while read -r soname path; do
    [ -n "$path" ] && [ -f "$path" ] || continue
    case $soname in libc.so*|libm.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) continue ;; esac
    if [ -f "$host_libs/$soname" ] || ! grep -q "^[[:space:]]*$soname " <<<"$known"; then
      cp -L "$path" "$host_libs/$soname"
      copied+=("$soname")
    fi
  done < <(ldd "$binary" | awk '/=> \// {print $1, $3}')
  # last in the search order (zz-): trixie's own libraries always win
  echo /usr/local/lib/oomcast-host > "$root/etc/ld.so.conf.d/zz-oomcast-host.conf"
  chroot "$root" /sbin/ldconfig
  [ ${#copied[@]} -eq 0 ] || echo "torch2-chroot: copied ${copied[*]} for $binary"
  if ! OOMCAST_TORCH2_ROOT=$root OOMCAST_TORCH2_BIND=$(dirname "$binary") "$repo/scripts/torch2-python" \
       -c 'import subprocess, sys; subprocess.run([sys.argv[1], "--version"], check=True, stdout=subprocess.DEVNULL)' "$binary"; then
    echo "torch2-chroot: $binary does not run inside $root" >&2
    exit 1
  fi
else
  echo "torch2-chroot: no $binary yet; run this again after the build so tests can run oomcast in the chroot"
fi
OOMCAST_TORCH2_ROOT=$root "$repo/scripts/torch2-python" -c 'import torch, torchvision, yaml; print("torch2-chroot: ready,", "torch", torch.__version__, "torchvision", torchvision.__version__)'
