#!/usr/bin/env bash
# The README's main job: summarize a whole book on this CPU.
# Installs missing Debian packages, builds the locost tool, writes the base demo checkpoint and
# runs `locost summarize` on a public-domain book kept in examples/data (default: Pride and
# Prejudice, ~170K tokens; pass another text file as $1, e.g. examples/data/war_and_peace.txt).
#
# The demo checkpoint has seeded random, UNTRAINED weights (no pretrained LOCOST checkpoint can
# be downloaded here): the printed text is NOT a summary. The job measures the software: a whole
# book encoded in one pass, then decoded, with speed and peak memory on stderr.
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
echo "== summarizing $BOOK with $CKPT (UNTRAINED demo weights: the output text is not meaningful)" >&2
"$BUILD/examples/locost" summarize --model "$CKPT" --input "$BOOK" \
    --max-new-tokens "${LOCOST_MAX_NEW_TOKENS:-64}" --num-beams "${LOCOST_NUM_BEAMS:-1}" --no-repeat-ngram-size 3 --progress
