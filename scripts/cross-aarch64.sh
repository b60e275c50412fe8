#!/usr/bin/env bash
# Cross-compiles locost for 64-bit ARM Linux (aarch64) with Debian's g++-aarch64-linux-gnu and
# runs the test suite's kernels and models under qemu-aarch64 (Debian's qemu-user). Installs what
# is missing: the cross compiler, qemu-user, and the arm64 versions of the dependencies through
# Debian multiarch; SentencePiece and oneDNN, whose -dev packages cannot be installed beside their
# amd64 versions, are unpacked under BUILD/arm64-extra instead (apt-get download + dpkg -x).
# Usage: scripts/cross-aarch64.sh [BUILD_DIR [DOCTEST_ARGS...]]   (default build/aarch64; further
# arguments go to the locost_tests run, e.g. --test-case='encoder*').
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(realpath -m "${1:-build/aarch64}")  # (relative: to the repository)
shift || true
SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
need=()
for p in g++-aarch64-linux-gnu qemu-user; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "locost: adding the arm64 architecture (dpkg --add-architecture arm64)" >&2
  $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -q
fi
for p in libc6:arm64 libfftw3-dev:arm64 libopenblas-dev:arm64 libpcre2-dev:arm64 libgomp1:arm64 libstdc++6:arm64; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
  echo "locost: installing for the aarch64 build: ${need[*]}" >&2
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${need[@]}"
fi
extra="$BUILD/arm64-extra"
if [[ ! -f "$extra/.complete" ]]; then
  mkdir -p "$BUILD/debs" "$extra"
  (cd "$BUILD/debs" && apt-get download libsentencepiece-dev:arm64 libsentencepiece0:arm64 libprotobuf-lite32:arm64 \
      libdnnl-dev:arm64 libdnnl2:arm64 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
  for d in "$BUILD"/debs/*.deb; do dpkg -x "$d" "$extra"; done
  touch "$extra/.complete"
fi
launcher=(); command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" \
  -DLOCOST_ARM64_EXTRA="$extra" -DLOCOST_NATIVE=OFF -DLOCOST_BUILD_BENCH=OFF -DLOCOST_PYTHON=OFF -DLOCOST_CUDA=OFF \
  -DLOCOST_SANITIZE_IO=OFF -DLOCOST_BUILD_TOOLS=OFF -DLOCOST_BUILD_EXAMPLES=OFF \
  -DLOCOST_CUDA_EMULATOR_TESTS=OFF "${launcher[@]}"
cmake --build "$BUILD" -j "$(nproc)" --target locost_tests locost_io_tests
# The tool's own tests start the tool as a program, which this machine cannot execute without
# binfmt_misc: they are left out; everything that runs in the test process runs.
export LD_LIBRARY_PATH="$extra/usr/lib/aarch64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The loader is the arm64 libc6's own (/lib/ld-linux-aarch64.so.1, Debian multiarch), not the
# cross toolchain's under /usr/aarch64-linux-gnu: qemu's -L there would pair that loader with the
# multiarch libc.so.6 (of another glibc build, found through /etc/ld.so.cache), and the first
# thread the tests start would spin for ever in glibc's stack cache.
qemu=(qemu-aarch64)
"${qemu[@]}" "$BUILD/tests/locost_tests" --source-file='*backend/*,*models/*,*layers/*,*generation/*,*ops/*' \
  --test-case-exclude='*tool*,*cuda*' "$@"
"${qemu[@]}" "$BUILD/tests/locost_io_tests"
