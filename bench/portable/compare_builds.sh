#!/usr/bin/env bash
# The portable build against a -march=native build of the same sources, side by side in one run
# (issue 56): each measurement runs on both tools in turn, RUNS times, and the table gives the
# figures of each run and the ratio portable / native of their means (rates: higher is better for
# the portable build; ms/token: the ratio of the native time to the portable one, so again
# higher is better and 1.00 is parity). Each run's closing line names the kernels' level and the
# float32 GEMM it ran on, printed below the table.
#   bench/portable/compare_builds.sh NATIVE_TOOL PORTABLE_TOOL DEMO_BASE [RUNS] [WORK_DIR]
# DEMO_BASE: the base LOCOST demo checkpoint (UNTRAINED: `locost demo-checkpoint --config base
# --seed 0 --out DIR`). Inputs: the first 18,200 bytes of Pride and Prejudice (4,106 tokens) and
# the first 65,536 tokens of War and Peace (examples/data). THREADS (default 2) threads.
set -euo pipefail
native=$1
portable=$2
demo=$3
runs=${4:-2}
work=${5:-$(mktemp -d)}
threads=${THREADS:-2}
here=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work"
head -c 18200 "$here/examples/data/pride_and_prejudice.txt" >"$work/4K.txt"
if [[ ! -s "$work/IDS-65536.json" ]]; then
  "$native" tokenize --model "$demo" --input "$here/examples/data/war_and_peace.txt" >"$work/wp-ids.json"
  python3 -c 'import json, sys; json.dump(json.load(open(sys.argv[1]))[:65536], open(sys.argv[2], "w"))' \
    "$work/wp-ids.json" "$work/IDS-65536.json"
fi

# name | arguments | what to read from the closing line
measures=(
  "4K summarize, encode (tokens/s)|summarize --model $demo --input $work/4K.txt --max-new-tokens 64 --min-new-tokens 64|encode_rate"
  "4K summarize, decode (ms/token, float32 weights)|summarize --model $demo --input $work/4K.txt --max-new-tokens 64 --min-new-tokens 64|decode_ms"
  "4K summarize, decode (ms/token, int8 weights)|summarize --model $demo --input $work/4K.txt --max-new-tokens 64 --min-new-tokens 64 --weights int8|decode_ms"
  "64K encode, float32 (tokens/s)|encode --model $demo --ids $work/IDS-65536.json --out $work/states.safetensors|encode_only_rate"
  "64K encode, --compute int8 (tokens/s)|encode --model $demo --ids $work/IDS-65536.json --out $work/states.safetensors --compute int8|encode_only_rate"
  "64K folded attention over int8 states, decode (ms/token)|generate --model $demo --ids $work/IDS-65536.json --max-new-tokens 16 --min-new-tokens 16 --weights int8 --compute int8 --cross-attention folded --cross-cache int8|decode_ms"
)

# figure LINE KIND: the number KIND names in a closing line
figure() {
  python3 - "$1" "$2" <<'PY'
import re, sys
line, kind = sys.argv[1], sys.argv[2]
pat = {"encode_rate": r"encode [\d.]+ s \(([\d.]+) tokens/s",
       "decode_ms": r"decode \d+ steps, ([\d.]+) ms/token",
       "encode_only_rate": r"tokens in [\d.]+ s: ([\d.]+) tokens/s"}[kind]
m = re.search(pat, line)
print(m.group(1) if m else "nan")
PY
}

declare -A seen_levels
echo "| | native | portable | portable / native |"
echo "|---|---|---|---:|"
for m in "${measures[@]}"; do
  IFS='|' read -r name cmd kind <<<"$m"
  nat=() por=()
  for ((r = 0; r < runs; ++r)); do
    for which in native portable; do
      tool=$native; [[ $which == portable ]] && tool=$portable
      # shellcheck disable=SC2086
      line=$("$tool" $cmd --threads "$threads" 2>&1 >/dev/null | grep -E "tokens/s" | tail -1)
      seen_levels[$which]="${line##*float32 GEMM }"
      v=$(figure "$line" "$kind")
      if [[ $which == native ]]; then nat+=("$v"); else por+=("$v"); fi
    done
  done
  python3 - "$name" "$kind" "${nat[*]}" "${por[*]}" <<'PY'
import sys
name, kind, nat, por = sys.argv[1], sys.argv[2], [float(x) for x in sys.argv[3].split()], [float(x) for x in sys.argv[4].split()]
mn, mp = sum(nat) / len(nat), sum(por) / len(por)
ratio = mn / mp if kind == "decode_ms" else mp / mn
fmt = lambda xs: ", ".join(f"{x:.1f}" if x < 100 else f"{x:.0f}" for x in xs)
print(f"| {name} | {fmt(nat)} | {fmt(por)} | {ratio:.2f}× |")
PY
done
echo
echo "native:   float32 GEMM ${seen_levels[native]}"
echo "portable: float32 GEMM ${seen_levels[portable]}"
