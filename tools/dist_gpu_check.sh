#!/usr/bin/env bash
# The NCCL backend on a one-GPU machine (docs/distributed.md): builds vela with CUDA against the
# NCCL of PyTorch's pip wheel (nvidia/nccl), then trains the tiny model on cuda for 4 steps
# (f32 compute, so tests/dist/compare_runs.py can compare) as a plain single process, as a
# world-size-1 NCCL job (DDP and ZeRO-1, through the store bootstrap), and through the launcher
# (--nproc-per-node 1). With one GPU the NCCL runs must equal the plain run bit for bit.
# usage (GPU machine, repository root): OUT=dir tools/dist_gpu_check.sh
set -uo pipefail
OUT="${OUT:-/tmp/vela-dist-gpu}"
mkdir -p "$OUT"
source tools/gpu_deps.sh   # .deps-lite (tools/make_gpu_deps.sh) where the packages are missing
NCCL_ROOT=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null)
echo "NCCL_ROOT=$NCCL_ROOT"; ls "$NCCL_ROOT/include" "$NCCL_ROOT/lib" 2>&1 | tr '\n' ' '; echo
export LD_LIBRARY_PATH=$NCCL_ROOT/lib:${LD_LIBRARY_PATH:-}
cmake -S . -B build-gpu -G Ninja -DVELA_CUDA=ON -DVELA_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release \
  -DVELA_BUILD_TESTS=OFF -DVELA_NCCL_ROOT="$NCCL_ROOT" > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
grep "vela: MPI" "$OUT/cmake.log"
# The NCCL backend first (seconds), then the binary.
ninja -C build-gpu -j16 CMakeFiles/vela_dist.dir/src/dist/nccl_process_group.cpp.o > "$OUT/nccl_build.log" 2>&1 \
  && echo "nccl_process_group.cpp compiles" || { tail -40 "$OUT/nccl_build.log"; exit 1; }
timeout 240 ninja -C build-gpu -j16 vela > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build ok"
V=$PWD/build-gpu/vela
W=/tmp/distgpu; rm -rf $W; mkdir -p $W; cd $W
python3 - <<'PY'
import json, random
random.seed(3)
words = "the lord said unto moses and aaron go in peace light day night earth heaven water".split()
with open("text.txt", "w") as t, open("data.jsonl", "w") as j:
    for i in range(120):
        s = " ".join(random.choice(words) for _ in range(random.randint(8, 30))) + "."
        t.write(s + "\n"); j.write(json.dumps({"text": s}) + "\n")
PY
$V tokenize train --vocab-size 300 --special "<|endoftext|>" text.txt --out tok >/dev/null 2>&1
echo '{"tokenizer": "tok", "format": "text", "sections": [{"field": "text"}], "eos_token": "<|endoftext|>", "seq_len": 64, "packing": true}' > prep.json
$V preprocess --config prep.json data.jsonl -o shards --quiet >/dev/null
cat > train.json <<JSON
{"out_dir": "one", "model": "tiny", "seed": 1, "max_steps": 4, "log_every": 1, "progress": false,
 "device": "cuda", "dtype": "f32", "save_every": 2, "grad_accum": 2, "bucket_mb": 0.05,
 "data": {"kind": "seq", "path": "shards", "batch_size": 4},
 "schedule": {"kind": "cosine", "lr": 0.003, "warmup_steps": 1}}
JSON
CMP="python3 $OLDPWD/tests/dist/compare_runs.py"
export VELA_DIST_TIMEOUT=30
timeout 60 $V train --config train.json > one.log 2>&1; echo "plain cuda run rc=$?"; tail -2 one.log
NC="RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 VELA_DIST_BACKEND=nccl"
env $NC timeout 60 $V train --config train.json --out-dir ddp > ddp.log 2>&1; echo "nccl ddp rc=$?"; grep -E "dist|trained|rror" ddp.log | head -5
env $NC timeout 60 $V train --config train.json --out-dir zero --zero 1 > zero.log 2>&1; echo "nccl zero rc=$?"; grep -E "trained|rror" zero.log | head -3
VELA_DIST_BACKEND=nccl timeout 60 $V train --config train.json --out-dir launch --zero 1 --nproc-per-node 1 > launch.log 2>&1; echo "launcher nccl rc=$?"; tail -3 launch.log
$CMP one ddp 4 exact; $CMP one zero 4 exact; $CMP zero launch 4 exact
mkdir -p r && cp -r zero/step-00000002 r/ && env $NC timeout 60 $V train --config train.json --out-dir r --zero 1 --resume > r.log 2>&1
echo "nccl resume rc=$?"; $CMP zero r 4 exact
cp *.log "$OUT/" 2>/dev/null; ls zero/step-00000004 > "$OUT/zero_ckpt_files.txt"
