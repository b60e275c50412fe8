#!/usr/bin/env bash
# Installs the Debian packages locost needs that this machine lacks (sudo only when not root).
# (groff-base renders the manual pages the main job summarizes; openssh-client, tar and grep ship
# some of them; qemu-user runs the tests on emulated CPUs, tests/CMakeLists.txt's qemu_*.)
# Usage: scripts/install-deps.sh [--with-python]   (--with-python adds python3-torch/numpy
# for regenerating reference data; neither the tests nor the main job need them)
set -euo pipefail
pkgs=(cmake ninja-build g++ pkg-config ccache
      libeigen3-dev libfftw3-dev libxsimd-dev nlohmann-json3-dev libsentencepiece-dev libpcre2-dev
      libopenblas-dev libdnnl-dev doctest-dev libbenchmark-dev libboost-context-dev time clang-format
      libcpp-httplib-dev curl python3-requests nodejs
      groff-base openssh-client tar grep qemu-user
      pybind11-dev python3-dev python3-numpy python3-pytest python3-setuptools python3-pip python3-venv python3-wheel python3-tqdm)
[[ "${1:-}" == "--with-python" ]] && pkgs+=(python3-torch python3-numpy)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# The server's client test runs the openai npm package: Debian's nodejs ships npm as a package of its
# own, while NodeSource's nodejs carries it inside (and conflicts with Debian's npm).
command -v npm >/dev/null || missing+=(npm)
if ((${#missing[@]})); then
  echo "locost: installing missing Debian packages: ${missing[*]}" >&2
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
