#!/bin/bash
# The Slurm recipe of docs/tool.md (Corpus jobs) on a real Slurm: a one-node cluster started here (munge,
# slurmctld, slurmd from Debian's slurm-wlm packages, in a private directory, on ports of their
# own), torn down at exit.
#   1. an array of 3 shards over a small corpus; the merged parts equal a single worker's run
#      (ids, summaries, token counts; each id once);
#   2. one shard killed (SIGKILL through scancel) after it wrote some lines, then queued again
#      with --resume: the lines written before the kill stay as they were, the rest are added,
#      nothing is lost or written twice.
# Exit 77 (CTest: skipped) with the reason when the packages are missing and cannot be installed,
# or the cluster cannot start here (not root, no loopback).
# Usage: slurm_recipe.sh TOOL WORKDIR TEXT_FILE
set -uo pipefail
TOOL=$1 WORK=$2 TEXT=$3
skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAILED: $*"; exit 1; }

[[ $(id -u) == 0 ]] || skip "a private slurmd needs root (it starts jobs as their user)"
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
  command -v apt-get >/dev/null || skip "slurmctld, slurmd, sbatch or munged missing and no apt-get to install them"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null 2>&1 ||
    skip "slurmctld, slurmd, slurm-client and munge could not be installed (apt-get failed: no network or no package lists?)"
fi

rm -rf "$WORK"
D=$WORK/cluster
mkdir -p "$D/state" "$D/spool" "$D/log" "$WORK/corpus"
chmod 700 "$D"
export SLURM_CONF=$D/slurm.conf
teardown() {
  scancel --full --signal=KILL --user=root >/dev/null 2>&1
  for p in slurmd slurmctld munged; do
    [[ -f $D/$p.pid ]] && kill "$(cat "$D/$p.pid")" 2>/dev/null
  done
  sleep 0.5
  for p in slurmd slurmctld munged; do
    [[ -f $D/$p.pid ]] && kill -9 "$(cat "$D/$p.pid")" 2>/dev/null
  done
}
trap teardown EXIT

# ---- a one-node cluster -------------------------------------------------------------------------
mungekey --create --keyfile="$D/munge.key" --force >/dev/null 2>&1 || head -c 1024 /dev/urandom > "$D/munge.key"
chmod 600 "$D/munge.key"
munged --force --socket="$D/munge.sock" --key-file="$D/munge.key" --pid-file="$D/munged.pid" \
  --log-file="$D/log/munged.log" --seed-file="$D/munge.seed" || skip "munged does not start here (log: $D/log/munged.log)"
port=$((20000 + RANDOM % 20000))
host=$(hostname -s)
cat > "$SLURM_CONF" <<CONF
ClusterName=locosttest
SlurmctldHost=$host
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge.sock
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
slurmctld -c -i || skip "slurmctld does not start here (log: $D/log/slurmctld.log)"
slurmd || skip "slurmd does not start here (log: $D/log/slurmd.log)"
up=0
for _ in $(seq 1 60); do
  sinfo -h -o %T 2>/dev/null | grep -q idle && { up=1; break; }
  sleep 0.5
done
[[ $up == 1 ]] || { tail -5 "$D"/log/*.log; skip "the node did not become idle in 30 s"; }
echo "cluster up: $(sinfo -h -o '%P %D %T %C')"

# ---- a corpus and a checkpoint -------------------------------------------------------------------
CK=$WORK/ckpt
"$TOOL" demo-checkpoint --config tiny --seed 3 --out "$CK" >/dev/null || fail "demo-checkpoint"
: > "$WORK/corpus/list.txt"
for i in $(seq 0 35); do
  # 36 documents of 2-3K characters cut from the book at different places
  tail -c +$((1 + i * 9000)) "$TEXT" | head -c $((2000 + (i % 3) * 500)) > "$WORK/corpus/doc$i.txt"
  echo "doc$i.txt" >> "$WORK/corpus/list.txt"
done
GEN=(--max-new-tokens 200 --min-new-tokens 200 --threads 1)
"$TOOL" summarize --model "$CK" --inputs "$WORK/corpus/list.txt" --out "$WORK/single.jsonl" "${GEN[@]}" 2>/dev/null ||
  fail "the single-worker run"

# wait for every task of job $1 to leave the queue
wait_job() {
  for _ in $(seq 1 600); do
    [[ -z $(squeue -h -j "$1" 2>/dev/null) ]] && return 0
    sleep 0.2
  done
  fail "job $1 still queued after 120 s: $(squeue -j "$1")"
}
# the recipe of docs/tool.md, as a worker command (the shard index from Slurm)
worker() {  # OUT_DIR
  echo "$TOOL summarize --model $CK --inputs $WORK/corpus/list.txt --out $1/part-\$SLURM_ARRAY_TASK_ID.jsonl --shard \$SLURM_ARRAY_TASK_ID/3 --resume ${GEN[*]}"
}
# python3: compare results files by id (summary, input_tokens, new_tokens), each id once
compare() {  # EXPECTED ACTUAL [SHARD_INDEX]
  python3 - "$@" <<'PY'
import json, sys
def load(p):
    rows = [json.loads(l) for l in open(p) if l.strip()]
    ids = [r["id"] for r in rows]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup: sys.exit(f"{p}: ids written more than once: {sorted(dup)}")
    return {r["id"]: (r.get("summary"), r.get("input_tokens"), r.get("new_tokens"), r.get("error")) for r in rows}
exp, act = load(sys.argv[1]), load(sys.argv[2])
if len(sys.argv) > 3:  # one shard: the documents at positions i with i mod 3 = K
    k = int(sys.argv[3])
    order = [l.strip() for l in open(sys.argv[4]) if l.strip()]
    exp = {i: v for i, v in exp.items() if order.index(i) % 3 == k}
if set(exp) != set(act): sys.exit(f"ids differ: missing {sorted(set(exp) - set(act))}, extra {sorted(set(act) - set(exp))}")
bad = [i for i in exp if exp[i] != act[i]]
if bad: sys.exit(f"results differ for {bad[:5]}")
print(f"{len(act)} documents equal")
PY
}

# ---- 1. an array of 3 shards, merged ---------------------------------------------------------------
mkdir -p "$WORK/out"
jid=$(sbatch --parsable --array=0-2 --cpus-per-task=1 --output="$WORK/out/slurm-%A_%a.log" --wrap "$(worker "$WORK/out")") ||
  fail "sbatch"
wait_job "$jid"
for k in 0 1 2; do
  [[ -s $WORK/out/part-$k.jsonl ]] || fail "shard $k wrote nothing (log: $(cat "$WORK"/out/slurm-"${jid}"_$k.log))"
done
cat "$WORK"/out/part-*.jsonl > "$WORK/merged.jsonl"
compare "$WORK/single.jsonl" "$WORK/merged.jsonl" || fail "the merged array differs from the single worker's run"
echo "array of 3: merged output equals the single worker's"

# ---- 2. a shard killed mid-way, queued again with --resume ---------------------------------------
killed=0
for attempt in 1 2 3; do
  rm -rf "$WORK/out2"
  mkdir -p "$WORK/out2"
  part=$WORK/out2/part-1.jsonl
  jid=$(sbatch --parsable --array=1 --cpus-per-task=1 --output="$WORK/out2/slurm-%A_%a.log" --wrap "$(worker "$WORK/out2")") || fail "sbatch"
  for _ in $(seq 1 1000); do
    [[ -s $part ]] && break
    sleep 0.02
  done
  scancel --full --signal=KILL "$jid"
  wait_job "$jid"
  lines=$(wc -l < "$part" 2>/dev/null || echo 0)
  if ((lines >= 1 && lines < 12)); then killed=1; break; fi
  echo "attempt $attempt: the kill came with $lines of 12 lines written; again"
done
[[ $killed == 1 ]] || fail "could not kill the shard between its first and last document in 3 attempts"
cp "$part" "$WORK/before-kill.jsonl"
echo "shard 1 killed (SIGKILL) after $lines of its 12 documents"
jid=$(sbatch --parsable --array=1 --cpus-per-task=1 --output="$WORK/out2/slurm-%A_%a.resumed.log" --wrap "$(worker "$WORK/out2")") ||
  fail "sbatch (re-queue)"
wait_job "$jid"
head -n "$lines" "$part" | cmp -s - "$WORK/before-kill.jsonl" || fail "the lines written before the kill were changed"
compare "$WORK/single.jsonl" "$part" 1 "$WORK/corpus/list.txt" || fail "the resumed shard lost or repeated documents"
echo "re-queued with --resume: nothing lost, nothing repeated"
echo "PASSED"
