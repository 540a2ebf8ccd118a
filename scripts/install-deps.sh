#!/usr/bin/env bash
# Installs the Debian packages oomcast needs to build, test and validate, skipping those
# already present. Uses sudo when not run as root. No torch: the CLI needs none, and the tests
# that do run under the project's venv (torch 2.13 from PyPI), which scripts/build-and-test.sh
# builds with scripts/make-venv.sh from python3-venv. With --python-package it also installs
# Python's headers (python3-dev), which only building the Python package needs (pip install .,
# and the package's tests in scripts/build-and-test.sh): the CLI and its build need none.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config zlib1g-dev
  catch2 libyaml-cpp-dev libboost-graph-dev libeigen3-dev libcli11-dev libfmt-dev nlohmann-json3-dev
  libtomlplusplus-dev                                      # torchtitan TOML configs (scenario/recipe_torchtitan.cc)
  python3 python3-yaml python3-venv                        # python tests; the venv (scripts/make-venv.sh)
  chromium                                                 # opens the HTML reports in tests (tests/html/)
)
case "${1:-}" in
  "") ;;
  --python-package) packages+=(python3-dev) ;;
  *) echo "install-deps: unknown option '$1' (the one option: --python-package)" >&2; exit 2 ;;
esac
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
