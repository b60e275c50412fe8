#!/usr/bin/env bash
# The README's main job. Installs missing packages, builds the locost tool, writes the base
# demo checkpoint (UNTRAINED random weights: outputs are not meaningful) and runs it on a
# whole public-domain book kept in examples/data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
BUILD=${LOCOST_BUILD_DIR:-build/release}
launcher=(); command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCOST_BUILD_TESTS=OFF -DLOCOST_BUILD_BENCH=OFF "${launcher[@]}"
cmake --build "$BUILD" -j "$(nproc)" --target locost_cli
CKPT=${LOCOST_DEMO_DIR:-build/demo-base}
if [[ ! -f "$CKPT/model.safetensors" ]]; then
  echo "== writing the base demo checkpoint (UNTRAINED, seeded random weights) to $CKPT" >&2
  "$BUILD/examples/locost" demo-checkpoint --config base --out "$CKPT" --seed 0
fi
BOOK=${1:-examples/data/pride_and_prejudice.txt}
"$BUILD/examples/locost" inspect --model "$CKPT"
