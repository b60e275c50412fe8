#!/usr/bin/env bash
# The checkpoints shipped in examples/models/manpages against the PyTorch code that trained them, on
# the first pages of the committed test split as this machine renders them: locost's logits within
# 1e-4 of PyTorch's (check_parity.py --model). Exit 77 (skipped) without python3-torch, or on a
# machine that has none of the test pages.
#   parity_shipped.sh SOURCE_DIR PYTHON WORK_DIR
set -euo pipefail
src=$1 py=$2 work=$3
"$py" -c "import torch" 2>/dev/null || { echo "python3-torch is not installed: skipped"; exit 77; }
mkdir -p "$work"
"$py" "$src/train/manpages/make_dataset.py" --out "$work" --from-test-list "$src/examples/models/manpages/test-pages.tsv" --jobs 2 ||
  { echo "none of the test pages is on this machine: skipped"; exit 77; }
for kind in t5 locost; do
  "$py" "$src/train/manpages/check_parity.py" --model "$src/examples/models/manpages/$kind" --data "$work/test.jsonl" --pages 6
done
