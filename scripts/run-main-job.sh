#!/usr/bin/env bash
# The README's main job: summarize and question a whole book on this CPU.
# Installs missing Debian packages, builds the locost tool, writes the base demo checkpoints and
# runs on a public-domain book kept in examples/data (default: Pride and Prejudice, ~170K tokens;
# pass another text file as $1, e.g. examples/data/war_and_peace.txt):
#   1. `locost summarize` with the LOCOST base demo: the whole book encoded in one pass;
#   2. `locost summarize --sled-context 256 --prefix QUESTION` with the T5 base demo: SLED slides the
#      short-context T5 encoder over the book with the question in front of every chunk;
#   3. the same with the BART base demo (byte-level BPE tokenizer, 1024 learned positions).
#   4. manual pages summarized by the small T5 and LOCOST models trained on a Debian machine's own
#      pages (examples/models/manpages: TRAINED weights, two hours on one CPU core each, so real words
#      but weak summaries): a handful (tar, grep, ssh, bash, ...) printed beside each page's real NAME
#      line, then `locost eval` (ROUGE) over the test split.
# LOCOST_MAIN_FAMILIES="locost" (or "t5", "bart", any list, or "none") runs those books only;
# LOCOST_MAIN_MANPAGES=0 leaves out part 4.
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
    none) continue ;;
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

[[ ${LOCOST_MAIN_MANPAGES:-1} == 0 ]] && exit 0
# 4. Manual pages: the pages of the committed test split that this machine has (install-deps installs
# tar, grep, openssh-client and groff; bash and coreutils are always there), rendered as for training.
MODELS=examples/models/manpages
PAGES=${LOCOST_MANPAGES_DIR:-build/manpages-main}
mkdir -p "$PAGES"
python3 train/manpages/make_dataset.py --out "$PAGES" --from-test-list "$MODELS/test-pages.tsv" --jobs "$(nproc)" || {
  echo "run-main-job: none of the test pages is on this machine (a system installed without manual pages?): part 4 skipped" >&2
  exit 0; }
python3 - "$PAGES" <<'PY'
import json, sys
out = sys.argv[1]
pages = [json.loads(l) for l in open(out + "/test.jsonl", encoding="utf-8")]
wanted = ["tar.1", "grep.1", "ssh.1", "bash.1", "ls.1", "sort.1"]
pick = [p for w in wanted for p in pages if p["id"] == w]
pick += [p for p in pages if p["source"] not in ("tar", "grep", "openssh", "bash", "coreutils")][:2]
with open(out + "/handful.jsonl", "w", encoding="utf-8") as f:
    f.writelines(json.dumps(p, ensure_ascii=False) + "\n" for p in pick)
PY
GEN=(--num-beams 4 --max-new-tokens 32 --no-repeat-ngram-size 3)
echo "== a handful of manual pages: the NAME line a person wrote, the LOCOST model reading the whole page, the T5 its first 512 tokens" >&2
echo "   (small models trained for 2 hours on one CPU core: real words, weak summaries; examples/models/manpages says how they score)" >&2
rm -f "$PAGES/handful-locost.jsonl" "$PAGES/handful-t5.jsonl"
"$BUILD/bin/locost" eval --model "$MODELS/locost" --data "$PAGES/handful.jsonl" --out "$PAGES/handful-locost.jsonl" "${GEN[@]}" >/dev/null
"$BUILD/bin/locost" eval --model "$MODELS/t5" --data "$PAGES/handful.jsonl" --out "$PAGES/handful-t5.jsonl" --max-input-tokens 512 "${GEN[@]}" >/dev/null
python3 train/manpages/show_summaries.py "$PAGES/handful.jsonl" "LOCOST=$PAGES/handful-locost.jsonl" "T5 (512)=$PAGES/handful-t5.jsonl"
echo "== locost eval over the test split ($(wc -l < "$PAGES/test.jsonl") pages) with the LOCOST model (whole pages)" >&2
rm -f "$PAGES/test-locost.jsonl"
"$BUILD/bin/locost" eval --model "$MODELS/locost" --data "$PAGES/test.jsonl" --out "$PAGES/test-locost.jsonl" \
    --scores "$PAGES/test-locost-scores.json" --max-batch-tokens 16384 "${GEN[@]}"
