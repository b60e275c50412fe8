#!/usr/bin/env bash
# What denormal weights cost the T5 base encoder (demo checkpoint, UNTRAINED weights) with the
# tool's FTZ/DAZ (its default) and without it (LOCOST_KEEP_DENORMALS=1), in one run:
#   bench/robustness/denormals.sh BUILD_DIR [LENGTH]       (default 2048 tokens; REPEATS runs each, default 3)
# The denormal copy scales every encoder feed-forward output matrix (DenseReluDense.wo) by 1e-39,
# which puts all its values below float32's smallest normal number (1.18e-38), as a checkpoint
# saved from a decayed or badly quantised model can. Prints each run's tokens/s from the tool's
# closing line and the median per configuration.
set -euo pipefail
build=$1
L=${2:-2048}
tool=$build/bin/locost
work=$build/bench-demo
mkdir -p "$work"
[[ -d $work/t5-base ]] || "$tool" demo-checkpoint --family t5 --config base --seed 1 --out "$work/t5-base" >/dev/null
if [[ ! -d $work/t5-base-denormal ]]; then
  cp -r "$work/t5-base" "$work/t5-base-denormal.tmp"
  python3 - "$work/t5-base-denormal.tmp/model.safetensors" <<'PY'
import array, json, struct, sys
with open(sys.argv[1], "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    for name, t in header.items():
        if name.startswith("encoder.") and name.endswith("DenseReluDense.wo.weight") and t["dtype"] == "F32":
            a, b = t["data_offsets"]
            f.seek(8 + n + a)
            v = array.array("f")
            v.frombytes(f.read(b - a))
            f.seek(8 + n + a)
            f.write(array.array("f", (x * 1e-39 for x in v)).tobytes())
PY
  mv "$work/t5-base-denormal.tmp" "$work/t5-base-denormal"
fi
python3 -c "import json; print(json.dumps([list(range(5, 5 + $L))]))" > "$work/ids-$L.json"
for ckpt in t5-base t5-base-denormal; do
  for mode in flush keep; do
    rates=()
    for ((i = 0; i < ${REPEATS:-3}; ++i)); do
      env=(); [[ $mode == keep ]] && env=(LOCOST_KEEP_DENORMALS=1)
      line=$(env "${env[@]}" "$tool" encode --model "$work/$ckpt" --ids "$work/ids-$L.json" --out "$work/states.safetensors" 2>&1 | grep '^encoded')
      rates+=("$(sed -E 's/.*: ([0-9.]+) tokens\/s.*/\1/' <<<"$line")")
    done
    median=$(printf '%s\n' "${rates[@]}" | sort -n | sed -n "$(( (${#rates[@]} + 1) / 2 ))p")
    printf '%-18s %-6s tokens/s: %s  (median %s)\n' "$ckpt" "$mode" "${rates[*]}" "$median"
  done
done
rm -f "$work/states.safetensors"
