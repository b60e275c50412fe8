#!/usr/bin/env bash
# locost serve under AddressSanitizer (and LeakSanitizer): builds the tool with
# -fsanitize=address in BUILD_DIR and runs tests/serve/check_serve.py against it, so that every
# client check (bad requests, cancelled streams, slow clients, the load test, SIGTERM) also runs
# with memory errors and leaks detected. A report makes the server exit non-zero: its check fails.
#   tests/serve/asan.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:?usage: asan.sh BUILD_DIR}
launcher=(); command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
  -DCMAKE_CXX_FLAGS="-fsanitize=address -fno-omit-frame-pointer" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address" \
  -DLOCOST_BUILD_TESTS=OFF -DLOCOST_BUILD_BENCH=OFF -DLOCOST_BUILD_EXAMPLES=OFF -DLOCOST_BUILD_TOOLS=ON \
  -DLOCOST_PYTHON=OFF -DLOCOST_CUDA=OFF >/dev/null
cmake --build "$build" --target locost_cli
# detect_leaks: a leak reported at exit turns SIGTERM's exit 0 into a failure of that check.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=23
exec python3 "$here/check_serve.py" --tool "$build/bin/locost" --work-dir "$build/serve-check"
