#!/usr/bin/env bash
# The GPU checks of the CUDA backend in one run, for a GPU machine lent for minutes (issue 58):
# every GPU test, the attention microbenchmark against the copy rate, whole decoding steps, the
# tool end to end on War and Peace, the Python module on the GPU against the CPU, compute-sanitizer
# over the attention kernels, and the original code's decoding on the same GPU. Each part has its
# own time limit and log; a part that fails does not stop the others. At the end every log is
# put into $OUT/report.txt (default OUT=/tmp/gpu-out), the JSON figures beside it.
#
#   bash bench/gpu/run_checks.sh [BUNDLE] [ORIGINAL]     # BUNDLE from bench/gpu/bundle.sh
#
# BUNDLE (default .gpu/bundle.tar.xz) is unpacked at this checkout's path on the machine where it was
# made (the tests have that build's absolute paths compiled in; a link makes the path). ORIGINAL
# (default .gpu/original.tar.xz): the original code's harness and clones (../shared/tools/original
# and its setup.sh clones, Python files only), or absent to skip that part.
# PARTS (default all): a space-separated subset of
#   attention tests steps tool python sanitize original   (memcheck: sanitize without racecheck)
set -uo pipefail
bundle=${1:-.gpu/bundle.tar.xz}; original=${2:-.gpu/original.tar.xz}
report=${OUT:-/tmp/gpu-out}; mkdir -p "$report"
out=$(mktemp -d)
parts=${PARTS:-"attention tests steps tool python sanitize original"}
here=$(pwd)
home=${LOCOST_HOME:-/work/main}   # where the bundle's build was made
if [[ $home != "$here" ]]; then mkdir -p "$(dirname "$home")"; [[ -e $home ]] || ln -s "$here" "$home"; fi
root=/tmp/locost-gpu; mkdir -p "$root"
xz -dc "$bundle" | tar -C "$root" -xf -
build=$(cd "$root" && ls -d build/* | head -1)
cp -r "$root/$build/." "$home/$build/" 2>/dev/null || { mkdir -p "$home/$build" && cp -r "$root/$build/." "$home/$build/"; }
B=$home/$build
export LD_LIBRARY_PATH=$root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$B/tests/tmp"
log() { echo "== $(date +%T) $*" | tee -a "$out/summary.txt"; }
has() { [[ " $parts " == *" $1 "* ]]; }
run() {  # run NAME LIMIT_S COMMAND...: output to $out/NAME.txt, status to the summary
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" > "$out/$name.txt" 2>&1
  local rc=$?
  log "$name: exit $rc in $((SECONDS - t0)) s"
  return $rc
}
log "start on $(hostname); parts: $parts"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt" 2>&1
lscpu | grep -E 'Model name|^CPU\(s\)' >> "$out/gpu.txt"
demo=/tmp/demo-base
run demo 120 "$B/bin/locost" demo-checkpoint --config base --seed 0 --out "$demo"

has attention && run attention 150 "$B/bench/bm_cuda_decode" attention --lengths 4096,65536,696580 --reps 20 --json "$out/attention.json"
has tests && LOCOST_BASE_MODEL=$demo run tests 240 "$B/tests/locost_cuda_tests"
if has steps; then
  LOCOST_BENCH_MODEL=$demo run steps 300 "$B/bench/bm_cuda_decode" steps --lengths 4096,65536,696580 --forms cached,folded \
      --weights float32 --rows 1,4 --steps 32 --json "$out/steps.json"
  LOCOST_BENCH_MODEL=$demo run steps_weights 120 "$B/bench/bm_cuda_decode" steps --lengths 4096 --forms cached \
      --weights bfloat16,int8 --rows 1 --steps 64 --json "$out/steps_weights.json"
fi
if has tool; then
  book=$here/examples/data/war_and_peace.txt
  run tool_greedy 120 "$B/bin/locost" summarize --device cuda --model "$demo" --input "$book" --max-new-tokens 64 --min-new-tokens 64
  run tool_beam4 120 "$B/bin/locost" summarize --device cuda --model "$demo" --input "$book" --max-new-tokens 64 --min-new-tokens 64 --num-beams 4
  run tool_folded 120 "$B/bin/locost" summarize --device cuda --model "$demo" --input "$book" --max-new-tokens 64 --min-new-tokens 64 \
      --cross-attention folded
fi
if has python && [[ -x $root/python/bin/python3.11 ]]; then
  PYTHONHOME=$root/python PYTHONPATH=$B/python run python 180 "$root/python/bin/python3.11" "$here/bench/gpu/python_cuda.py" "$here/tests/data" "$demo" "$B/bin/locost"
fi
if (has sanitize || has memcheck) && command -v compute-sanitizer >/dev/null; then
  run memcheck 240 compute-sanitizer --tool memcheck --error-exitcode 9 "$B/tests/locost_cuda_tests" \
      "--test-case=cuda attention*,cuda shared_kv*,cuda LOCOST model*"
fi
if has sanitize && command -v compute-sanitizer >/dev/null; then
  run racecheck 150 compute-sanitizer --tool racecheck --error-exitcode 9 "$B/tests/locost_cuda_tests" \
      "--test-case=cuda attention: a decoding*,cuda shared_kv*"
fi
if has original && [[ -f $original ]]; then
  mkdir -p /tmp/orig && xz -dc "$original" | tar -C /tmp/orig -xf -
  # (the device's own Python and PyTorch, without the bundle's libraries on the path)
  run original 240 env -u LD_LIBRARY_PATH python3 "$here/bench/gpu/compare_original_gpu.py" --tools /tmp/orig/tools --ref-root /tmp/orig/ref --skip-ours \
      --lengths "" --decode-lengths 4096,65536,696580 --new-tokens 32 --json "$out/original.json"
fi
log "done"
for f in summary.txt gpu.txt $(cd "$out" && ls *.txt | grep -v -e '^summary.txt$' -e '^gpu.txt$'); do
  echo "########## $f"; cat "$out/$f"
done > "$report/report.txt"
cp "$out"/*.json "$report/" 2>/dev/null
cat "$out/summary.txt"
