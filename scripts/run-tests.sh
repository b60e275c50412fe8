#!/usr/bin/env bash
# The README's test command: installs missing packages, builds everything from a clean
# build directory, and runs CTest. LOCOST_LONG_TESTS=1 adds the long tests (label "long":
# whole books, fuzzing runs). LOCOST_CUDA=ON also builds the CUDA backend's tool support and
# tests with nvcc (label "gpu": Skipped without a GPU). The build is the portable one
# (-DLOCOST_NATIVE=OFF), so that every level of the CPU kernels runs here (isa_*) and the tests run
# under qemu-user's CPU models (qemu_*). The Python module is built for Debian's
# python3 (whose packages give numpy and pytest) and tested with pytest (label "python").
# Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
BUILD=${LOCOST_BUILD_DIR:-build/tests}
launcher=(); command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cuda=(-DLOCOST_CUDA=OFF)
if [[ "${LOCOST_CUDA:-OFF}" == "ON" ]]; then
  cuda=(-DLOCOST_CUDA=ON)
  command -v ccache >/dev/null && cuda+=(-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
python=/usr/bin/python3; [[ -x "$python" ]] || python=$(command -v python3)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCOST_NATIVE=OFF "${launcher[@]}" "${cuda[@]}" -DLOCOST_PYTHON=ON -DPython_EXECUTABLE="$python"
cmake --build "$BUILD" -j "$(nproc)"
label=(-LE long)
[[ "${LOCOST_LONG_TESTS:-0}" == "1" ]] && label=()
ctest --test-dir "$BUILD" --output-on-failure -j "$(nproc)" "${label[@]}" "$@"
