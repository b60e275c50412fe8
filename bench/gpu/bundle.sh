#!/usr/bin/env bash
# Packs what the GPU checks (bench/gpu/run_checks.sh) need from a build directory of this machine
# into one archive for a GPU machine that has the CUDA runtime but not the Debian libraries or
# python3.11 (such as the device machines lent to this project, whose image is not Debian):
# the tool, the CUDA tests and bm_cuda_decode (stripped), the tool's data, the
# Python package, the shared libraries they name that are not the C library or CUDA's own, and,
# with --python, Debian's python3.11 (the module is built for it). Paths inside the archive are
# relative to the repository root (BUILD/...), as the tests have the build's absolute paths
# compiled in: run_checks.sh puts the archive back at the same absolute place.
#
#   bash bench/gpu/bundle.sh build/ci .gpu/bundle.tar.xz [--python]
set -euo pipefail
build=${1:?build directory}; out=${2:?archive}; python=${3:-}
cd "$(dirname "$0")/../.."
stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$build"/{bin,tests,bench} "$stage/lib"
progs=("$build/bin/locost" "$build/tests/locost_cuda_tests" "$build/bench/bm_cuda_decode")
for p in "${progs[@]}"; do
  [[ -x $p ]] || { echo "bundle.sh: $p missing (build it first)" >&2; exit 1; }
  strip -o "$stage/$p" "$p"
done
cp -r "$build/share" "$stage/$build/"
if [[ -d $build/python/locost ]]; then
  mkdir -p "$stage/$build/python"
  cp -r "$build/python/locost" "$stage/$build/python/"
  strip "$stage/$build/python/locost/"_locost*.so
  progs+=("$build/python/locost/"_locost*.so)
fi
# The libraries the programs name, but not libc's, the loader's, libstdc++/libgcc (every
# distribution has newer ones) or the CUDA toolkit's (the GPU machine's own).
for p in "${progs[@]}"; do ldd "$p"; done | awk '/=> \// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.so|/usr/local/cuda|libcu(da|blas|fft)' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
if [[ $python == --python ]]; then
  mkdir -p "$stage/python/bin" "$stage/python/lib"
  cp -L /usr/bin/python3.11 "$stage/python/bin/"
  tar -C /usr/lib --exclude='python3.11/test' --exclude='__pycache__' --exclude='python3.11/idlelib' --exclude='python3.11/tkinter' \
      --exclude='python3.11/lib2to3' --exclude='python3.11/ensurepip' --exclude='python3.11/config-3.11-x86_64-linux-gnu' \
      --exclude='python3.11/dist-packages' --exclude='python3.11/pydoc_data' --exclude='python3.11/unittest' \
      -cf - python3.11 | tar -C "$stage/python/lib" -xf -
  ldd /usr/bin/python3.11 | awk '/=> \// {print $3}' | grep -Ev '/(libc|libm|libdl|libpthread|librt)\.so' |
    while read -r lib; do cp -L "$lib" "$stage/lib/"; done
fi
mkdir -p "$(dirname "$out")"
tar -C "$stage" -cf - . | xz -T0 -9e > "$out"
echo "bundle.sh: $out $(du -h "$out" | cut -f1)"
