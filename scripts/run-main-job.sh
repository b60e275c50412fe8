#!/usr/bin/env bash
# The README's main job: summarize and question a whole book on this CPU.
# Installs missing Debian packages, builds the locost tool, writes the base demo checkpoints and
# runs on a public-domain book kept in examples/data (default: Pride and Prejudice, ~170K tokens;
# pass another text file as $1, e.g. examples/data/war_and_peace.txt):
#   1. `locost summarize` with the LOCOST base demo: the whole book encoded in one pass;
#   2. `locost summarize --sled-context 256 --prefix QUESTION` with the T5 base demo: SLED slides the
#      short-context T5 encoder over the book with the question in front of every chunk;
#   3. the same with the BART base demo (byte-level BPE tokenizer, 1024 learned positions).
# LOCOST_MAIN_FAMILIES="locost" (or "t5", "bart", or any list) runs those only.
#
# The demo checkpoints have seeded random, UNTRAINED weights (no pretrained checkpoint can be
# downloaded here): the printed text is NOT a summary or an answer. The job measures the software:
# a whole book encoded, then decoded, with speed and peak memory on stderr. Every run decodes exactly
# LOCOST_MAX_NEW_TOKENS (64) tokens (--min-new-tokens too: an untrained tied head tends to repeat its
# input token, and BART's start token is its eos), so decode speeds compare.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
BUILD=${LOCOST_BUILD_DIR:-build/release}
launcher=(); command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCOST_BUILD_TESTS=OFF -DLOCOST_BUILD_BENCH=OFF "${launcher[@]}"
cmake --build "$BUILD" -j "$(nproc)" --target locost_cli
BOOK=${1:-examples/data/pride_and_prejudice.txt}
for family in ${LOCOST_MAIN_FAMILIES:-locost t5 bart}; do
  case $family in
    locost) CKPT=${LOCOST_DEMO_DIR:-build/demo-base} ;;
    t5) CKPT=${LOCOST_T5_DEMO_DIR:-build/demo-t5-base} ;;
    bart) CKPT=${LOCOST_BART_DEMO_DIR:-build/demo-bart-base} ;;
    *) echo "run-main-job: unknown family '$family' in LOCOST_MAIN_FAMILIES (locost, t5, bart)" >&2; exit 2 ;;
  esac
  if [[ ! -f "$CKPT/model.safetensors" ]]; then
    echo "== writing the $family base demo checkpoint (UNTRAINED, seeded random weights) to $CKPT" >&2
    "$BUILD/bin/locost" demo-checkpoint --family "$family" --config base --out "$CKPT" --seed 0
  fi
  if [[ $family == locost ]]; then
    echo "== summarizing $BOOK in one pass with $CKPT (UNTRAINED demo weights: the output text is not meaningful)" >&2
    extra=()
  else
    echo "== questioning $BOOK through SLED over $family (chunks of 256, half kept) with $CKPT (UNTRAINED demo weights: not an answer)" >&2
    extra=(--sled-context 256 --sled-window-fraction 0.5 --prefix "Who does Elizabeth marry, and why?")
  fi
  "$BUILD/bin/locost" summarize --model "$CKPT" --input "$BOOK" "${extra[@]}" \
      --max-new-tokens "${LOCOST_MAX_NEW_TOKENS:-64}" --min-new-tokens "${LOCOST_MAX_NEW_TOKENS:-64}" --num-beams "${LOCOST_NUM_BEAMS:-1}" --no-repeat-ngram-size 3 --progress
done
