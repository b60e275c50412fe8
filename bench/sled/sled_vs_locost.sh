#!/usr/bin/env bash
# SLED over the base T5 and BART demo checkpoints (UNTRAINED weights) beside the LOCOST base encoder,
# on the same random ids, in one run: tokens/s and peak RSS per configuration (bench/sled/bm_sled.cpp).
#   bench/sled/sled_vs_locost.sh BUILD_DIR LENGTH [LENGTH ...]     e.g. build/release 16384 696580
# Env CONTEXTS (default "128 256 512") and FRACTIONS (default "0.5 0.75") choose the SLED grid.
set -euo pipefail
build=$1; shift
tool=$build/bin/locost
demo=$build/bench-demo
[[ -d $demo/t5-base ]] || "$tool" demo-checkpoint --family t5 --config base --out "$demo/t5-base"
[[ -d $demo/locost-base ]] || "$tool" demo-checkpoint --family locost --config base --out "$demo/locost-base"
[[ -d $demo/bart-base ]] || "$tool" demo-checkpoint --family bart --config base --out "$demo/bart-base"
for L in "$@"; do
  "$build/bench/bm_sled" "$demo/locost-base" "$L"
  for c in ${CONTEXTS:-128 256 512}; do
    for f in ${FRACTIONS:-0.5 0.75}; do
      "$build/bench/bm_sled" "$demo/t5-base" "$L" "$c" "$f"
      "$build/bench/bm_sled" "$demo/bart-base" "$L" "$c" "$f"
    done
  done
done
