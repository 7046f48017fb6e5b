#!/usr/bin/env bash
# Data-parallel training end to end on the CPU (docs/distributed.md), with a tiny model on a tiny
# corpus (threads 1 per rank, so 2 ranks fit CI's 2 cores):
#   - 2 MPI ranks (batch 2 each) vs 1 process (batch 4), the same global batch, grad_accum 2:
#     losses and final weights within the stated bound (summation order differs, see the doc);
#   - ZeRO-1 vs DDP on 2 ranks, AdamW and Muon: bit-identical;
#   - the store backend (`vela train --nproc-per-node 2`, no MPI) vs MPI: bit-identical;
#   - resume: 2 ranks ZeRO-1 -> 1 process, 1 process -> 2 ranks ZeRO-1 (within the bound), and
#     2 -> 2 ranks (bit-identical to the uninterrupted run);
#   - failure: a rank killed mid-run makes the other ranks exit non-zero with the reason within the
#     timeout (mpirun; the launcher; bare RANK / WORLD_SIZE processes), and a rank dying before a
#     ZeRO-1 checkpoint leaves the last published checkpoint intact and publishes nothing partial.
# Exits 77 (skipped) when mpirun is absent or this vela has no MPI backend.
# usage: test_dist_train.sh path/to/vela
set -euo pipefail
VELA="$(realpath "$1")"
HERE="$(cd "$(dirname "$0")" && pwd)"
CMP="python3 $HERE/compare_runs.py"
command -v mpirun >/dev/null || { echo "mpirun not found: skipping"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
MPI="mpirun -np 2 --oversubscribe --bind-to none"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
export VELA_DIST_TIMEOUT=20 VELA_LOG_LEVEL=warn

python3 - <<'PY'
import json, random
random.seed(3)
words = "the lord said unto moses and aaron go in peace light day night earth heaven water".split()
with open("text.txt", "w") as t, open("data.jsonl", "w") as j:
    for i in range(120):
        s = " ".join(random.choice(words) for _ in range(random.randint(8, 30))) + "."
        t.write(s + "\n")
        j.write(json.dumps({"text": s}) + "\n")
PY
"$VELA" tokenize train --vocab-size 300 --special "<|endoftext|>" text.txt --out tok >/dev/null 2>&1
cat > prep.json <<JSON
{"tokenizer": "tok", "format": "text", "sections": [{"field": "text"}],
 "eos_token": "<|endoftext|>", "seq_len": 64, "packing": true}
JSON
"$VELA" preprocess --config prep.json data.jsonl -o shards --quiet >/dev/null
cat > train.json <<JSON
{"out_dir": "one", "model": "tiny", "seed": 1, "max_steps": 4, "log_every": 1, "progress": false,
 "threads": 1, "save_every": 2, "grad_accum": 2, "bucket_mb": 0.05,
 "data": {"kind": "seq", "path": "shards", "batch_size": 4},
 "schedule": {"kind": "cosine", "lr": 0.003, "warmup_steps": 1}}
JSON
"$VELA" train --help >help.txt
grep -q -- "--nproc-per-node" help.txt || { echo "no launcher flags in --help"; exit 1; }
# Is MPI built in? (a 2-rank job fails fast with "built without MPI" otherwise)
if ! out=$($MPI "$VELA" train --config train.json --out-dir probe --max-steps 1 --no-save-final 2>&1); then
  if grep -q "built without MPI" <<<"$out"; then echo "vela has no MPI backend: skipping"; exit 77; fi
  echo "$out"; exit 1
fi

# Bounds for 1 process vs 2 ranks (docs/distributed.md "Determinism").
TOL_LOSS=1e-6 TOL_W=5e-4
"$VELA" train --config train.json
$MPI "$VELA" train --config train.json --out-dir ddp --batch-size 2
$MPI "$VELA" train --config train.json --out-dir zero --batch-size 2 --zero 1
$CMP one ddp 4 $TOL_LOSS $TOL_W
$CMP ddp zero 4 exact
ls zero/step-00000004 | grep -q "optimizer-00001-of-00002.safetensors" || { echo "no shards"; exit 1; }
[ ! -e zero/step-00000004/optimizer.safetensors ] || { echo "ZeRO-1 wrote a full optimizer"; exit 1; }
$MPI "$VELA" train --config train.json --out-dir ddp_muon --batch-size 2 --optimizer.kind muon
$MPI "$VELA" train --config train.json --out-dir zero_muon --batch-size 2 --optimizer.kind muon --zero 1
$CMP ddp_muon zero_muon 4 exact
# The store backend (no MPI): the launcher spawns the ranks; same rank-order sums, same bits.
"$VELA" train --config train.json --out-dir store --batch-size 2 --zero 1 --nproc-per-node 2 >store.log 2>&1 \
  || { cat store.log; exit 1; }
$CMP zero store 4 exact

# Resume across world sizes: from the step-2 checkpoints to step 4.
mkdir r21 r12 r22
cp -r zero/step-00000002 r21/ && cp -r zero/step-00000002 r22/ && cp -r one/step-00000002 r12/
"$VELA" train --config train.json --out-dir r21 --resume
$MPI "$VELA" train --config train.json --out-dir r12 --batch-size 2 --zero 1 --resume
$MPI "$VELA" train --config train.json --out-dir r22 --batch-size 2 --zero 1 --resume
$CMP zero r21 4 $TOL_LOSS $TOL_W
$CMP one r12 4 $TOL_LOSS $TOL_W
$CMP zero r22 4 exact
# A different global batch is refused with a clear error.
mkdir rbad && cp -r zero/step-00000002 rbad/
set +e
err=$("$VELA" train --config train.json --out-dir rbad --batch-size 2 --resume 2>&1); rc=$?
set -e
[ $rc -ne 0 ] && grep -q "global batch" <<<"$err" || { echo "batch mismatch: rc=$rc $err"; exit 1; }

# Failure: rank 1 is killed after step 3 (checkpoints every 2 steps, 6 steps).
check_intact() {  # $1 run dir: step 2 published and verifying, nothing later, no debris
  python3 - "$1" <<'PY'
import hashlib, json, os, sys
run = sys.argv[1]
names = sorted(n for n in os.listdir(run) if n.startswith("step-") or n.startswith(".step-"))
assert names == ["step-00000002"], names
d = os.path.join(run, "step-00000002")
m = json.load(open(os.path.join(d, "manifest.json")))
for f, e in m["files"].items():
    data = open(os.path.join(d, f), "rb").read()
    assert len(data) == e["bytes"] and hashlib.sha256(data).hexdigest() == e["sha256"], f
PY
}
t0=$(date +%s)
set +e
VELA_DIST_TEST_DIE=1:3:kill timeout 90 $MPI "$VELA" train --config train.json --out-dir fail_mpi \
  --batch-size 2 --zero 1 --max-steps 6 >fail_mpi.log 2>&1; rc=$?
set -e
t1=$(date +%s)
echo "mpirun with a killed rank: rc=$rc after $((t1 - t0)) s"
[ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat fail_mpi.log; echo "expected a prompt failure"; exit 1; }
check_intact fail_mpi

t0=$(date +%s)
set +e
VELA_DIST_TEST_DIE=1:3:kill timeout 90 "$VELA" train --config train.json --out-dir fail_launch \
  --batch-size 2 --zero 1 --max-steps 6 --nproc-per-node 2 >fail_launch.log 2>&1; rc=$?
set -e
t1=$(date +%s)
echo "launcher with a killed rank: rc=$rc after $((t1 - t0)) s"
[ $rc -eq 1 ] || { cat fail_launch.log; echo "expected the launcher to fail (1)"; exit 1; }
grep -q "\[launcher\] error: rank 1 (pid [0-9]*) was killed by signal 9" fail_launch.log \
  || { cat fail_launch.log; exit 1; }
check_intact fail_launch

# Bare processes (what a multi-host job looks like): rank 1 exits after step 4, just before the
# step-4 ZeRO-1 checkpoint that needs its shard; rank 0 must fail with the reason on its own,
# publish nothing for step 4 and leave step 2 intact.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
t0=$(date +%s)
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port VELA_DIST_TEST_DIE=1:4 \
    timeout 90 "$VELA" train --config train.json --out-dir fail_env --batch-size 2 --zero 1 \
    --max-steps 6 >fail_env.$r.log 2>&1 &
  pids[$r]=$!
done
set +e
wait ${pids[0]}; rc0=$?
wait ${pids[1]}; rc1=$?
set -e
t1=$(date +%s)
echo "bare ranks: rank 0 rc=$rc0, rank 1 rc=$rc1 after $((t1 - t0)) s"
[ $rc1 -eq 3 ] || { cat fail_env.1.log; echo "rank 1 should have died (3)"; exit 1; }
[ $rc0 -eq 1 ] || { cat fail_env.0.log; echo "rank 0 should fail (1)"; exit 1; }
grep -q "rank 1 disconnected" fail_env.0.log || { cat fail_env.0.log; exit 1; }
check_intact fail_env
echo "dist_train: all checks passed"
