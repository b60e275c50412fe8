#!/usr/bin/env bash
# Many short documents: a corpus job one document at a time against the same job in batches by
# length (--max-batch-tokens), and against the encoder's own time, with the BART base and T5 base
# demo checkpoints (UNTRAINED, seeded random weights), greedy, 64 new tokens:
#   bench/corpus/batch_corpus.sh BUILD_DIR [DOCS] [ONE_BY_ONE_DOCS]
# DOCS documents (default 1000) of 512-2048 tokens (BART: 512-1024, its learned positions) are cut
# from the books in examples/data at seeded random places and lengths. The one-by-one run takes
# every k-th of them (ONE_BY_ONE_DOCS, default all): the same length distribution, for when the
# whole one-by-one run takes too long.
# "encode only" is the batched job with --max-new-tokens 1 (encode, cache, one step). Prints per
# model and mode: documents, seconds, documents/s, peak RSS (the whole run's: the largest of the
# records' peak_rss_bytes), and how many summaries differ from
# the one-by-one run's (must be 0; the untrained BART demo's greedy output is <s> repeated, an
# empty text, so for BART the tests' comparison of ids is what checks it). MAX_BATCH_TOKENS
# (default 16384), FAMILIES ("bart t5") and TOOL_OPTIONS (more options for every run, e.g.
# "--cross-cache bfloat16") can be set.
set -euo pipefail
build=$1
docs=${2:-1000}
single=${3:-$docs}
tool=$build/bin/locost
work=$(cd "$build" && pwd)/bench-batch  # absolute: the lists name documents by absolute path
mkdir -p "$work"
budget=${MAX_BATCH_TOKENS:-16384}
here=$(cd "$(dirname "$0")/../.." && pwd)  # the repository (this script is in bench/corpus/)

make_docs() {  # out_dir min_words max_words
python3 - "$here/examples/data" "$1" "$docs" "$single" "$2" "$3" <<'PY'
import os, random, sys
src, out, n, single, lo, hi = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
words = []
for name in ("pride_and_prejudice.txt", "war_and_peace.txt"):
    words += open(os.path.join(src, name), encoding="utf-8").read().split()
os.makedirs(out, exist_ok=True)
rng = random.Random(0)
ids = []
for i in range(n):
    k = rng.randint(lo, hi)
    at = rng.randrange(0, len(words) - k)
    path = os.path.join(out, f"doc{i:04d}.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(" ".join(words[at:at + k]) + "\n")
    ids.append(path)
with open(os.path.join(out, "all.txt"), "w") as f:
    f.write("\n".join(ids) + "\n")
step = max(1, n // max(1, single))
with open(os.path.join(out, "single.txt"), "w") as f:
    f.write("\n".join(ids[::step][:single]) + "\n")
PY
}

run() {  # label model list out extra...
  local label=$1 model=$2 list=$3 out=$4; shift 4
  rm -f "$out"
  local t0 t1
  t0=$(date +%s.%N)
  /usr/bin/time -f "%M" -o "$work/rss" "$tool" summarize --model "$model" --inputs "$list" --out "$out" \
    --max-new-tokens "${MAX_NEW_TOKENS:-64}" --num-beams 1 ${TOOL_OPTIONS:-} "$@" 2>"$work/stderr" || { cat "$work/stderr"; exit 1; }
  t1=$(date +%s.%N)
  local n
  n=$(wc -l < "$out")
  # The peak is the largest of the records' peak_rss_bytes and /usr/bin/time's: the tool resets
  # the process's peak before each document or batch (clear_refs 5, so that each record reports
  # its own), which leaves time's figure at exit the last batch's peak only, not the run's.
  python3 -c "
import json, sys
n, s, kb, label, out = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
peak = max([kb * 1024] + [json.loads(l).get('peak_rss_bytes', 0) for l in open(out)])
print(f'{label:<28} {n:5d} docs {s:8.1f} s {n / s:7.3f} docs/s   peak RSS {peak / 2**20:7.0f} MiB')" \
    "$n" "$(echo "$t1 - $t0" | bc)" "$(cat "$work/rss")" "$label" "$out"
}

for family in ${FAMILIES:-bart t5}; do
  ckpt=$work/$family-base
  [[ -d $ckpt ]] || "$tool" demo-checkpoint --family "$family" --config base --seed 0 --out "$ckpt" >/dev/null
  # ~1.35 tokens per word on this text with either tokenizer
  if [[ $family == bart ]]; then make_docs "$work/docs-$family" 380 700; else make_docs "$work/docs-$family" 380 1500; fi
  echo "== $family base demo (UNTRAINED weights), greedy, ${MAX_NEW_TOKENS:-64} new tokens, $(nproc) threads ${TOOL_OPTIONS:-}"
  run "one by one" "$ckpt" "$work/docs-$family/single.txt" "$work/$family-single.jsonl"
  run "batched ($budget tokens)" "$ckpt" "$work/docs-$family/all.txt" "$work/$family-batched.jsonl" --max-batch-tokens "$budget"
  MAX_NEW_TOKENS=1 run "encode only (batched)" "$ckpt" "$work/docs-$family/all.txt" "$work/$family-encode.jsonl" --max-batch-tokens "$budget"
  python3 - "$work/$family-single.jsonl" "$work/$family-batched.jsonl" <<'PY'
import json, sys
one = {j["id"]: j for j in map(json.loads, open(sys.argv[1]))}
bat = {j["id"]: j for j in map(json.loads, open(sys.argv[2]))}
errors = sum("error" in j for j in bat.values()) + sum("error" in j for j in one.values())
diff = [i for i in one if i in bat and one[i].get("summary") != bat[i].get("summary")]
lengths = [j["input_tokens"] for j in bat.values() if "input_tokens" in j]
print(f"summaries compared: {len(one)}, different: {len(diff)}, error lines: {errors}; input tokens "
      f"{min(lengths)}-{max(lengths)}, mean {sum(lengths) / len(lengths):.0f}")
PY
done
