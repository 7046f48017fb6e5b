#!/usr/bin/env bash
# The RL checks of issue 14 on the GPU machine, in one call (most important first, so a time
# limit cuts the least important): build vela + test_train with CUDA for sm_90, the engine/trainer
# log-prob consistency on CUDA (f32 and bf16 quantiles), the toy GRPO example through
# `vela train --device cuda` (bf16, then f32 if bf16 fails), the tempered-logprob sampling kernel
# test, and the Qwen3-0.6B-shaped GRPO bench with a length reward (non-zero gradients). Logs and
# summaries go to $OUT (the device tool brings them back); the numbers are in docs/rl.md and
# bench/results/rl_*_h200.txt.
# usage (GPU machine, repository root): OUT=dir tools/rl_gpu_checks.sh
#   needs bench/configs/grpo_h200/shards (prompt shards, see docs/rl.md) for the bench part.
#   Run from a branch: copy only the files it changed (plus the shards; carry .deps-lite
#   too) into /work/main/.wt-NAME, carry that, and start with `cp -r .wt-NAME/. . &&` (main's
#   tree with a full worktree copy exceeds the 64 MiB a call carries).
set -uo pipefail
OUT="${OUT:-/tmp/vela-rl-gpu}"
mkdir -p "$OUT"
source tools/gpu_deps.sh   # .deps-lite (tools/make_gpu_deps.sh) where the packages are missing
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*"; }
{ cmake -S . -B build-gpu -G Ninja -DVELA_CUDA=ON -DVELA_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release \
    -DVELA_BUILD_TESTS=ON && ninja -C build-gpu -j16 vela test_train; } > "$OUT/build.log" 2>&1 ||
  { tail -40 "$OUT/build.log"; exit 1; }
stamp "build ok"

# 1. Consistency on CUDA (tests/train/test_rollout_cuda.cpp).
(cd tests && timeout 60 ../build-gpu/tests/test_train --gtest_filter='RolloutCuda*:*Rollout*' \
  > "$OUT/test_rollout_cuda.log" 2>&1)
stamp "consistency rc=$?"
grep -E "rl consistency|consistency at|OK \]|FAILED|Failure" "$OUT/test_rollout_cuda.log" | head -20

# 2. The toy GRPO example on the GPU.
T=/tmp/rl_toy
python3 examples/make_rl_toy_data.py $T > /dev/null
sed "s#build/rl_toy/tokenizer#$T/tokenizer#" examples/grpo_toy_prep.json > $T/grpo_prep.json
build-gpu/vela preprocess --config $T/grpo_prep.json $T/grpo.jsonl -o $T/grpo_shards --quiet > /dev/null
# The toy model's head_dim 16 may lack a CUDA attention path: the last try uses head_dim 32.
sed 's/"head_dim": 16/"head_dim": 32/' examples/rl_toy_model.json > $T/model_hd32.json
for run in bf16:examples/rl_toy_model.json f32:examples/rl_toy_model.json bf16:$T/model_hd32.json; do
  dt=${run%%:*}
  model=${run#*:}
  name=${dt}_$(basename $model .json)
  timeout 90 build-gpu/vela train --config examples/grpo_toy.json --tokenizer $T/tokenizer \
    --model $model --data.path $T/grpo_shards --out-dir $T/run_$name --no-progress --device cuda \
    --dtype $dt > "$OUT/grpo_toy_cuda_$name.log" 2>&1
  rc=$?
  stamp "grpo toy cuda $dt ($model) rc=$rc"
  if [ $rc -eq 0 ]; then
    cp $T/run_$name/metrics.jsonl "$OUT/grpo_toy_cuda_$name.metrics.jsonl"
    python3 - $T/run_$name/metrics.jsonl <<'PY'
import json, sys
for d in map(json.loads, open(sys.argv[1])):
    print(f"step {d['step']:4d}  reward_mean {d['reward_mean']:.3f}  loss {d['loss']:+.4f}  "
          f"step_s {d['step_seconds']:.4f}")
PY
    break
  fi
  tail -5 "$OUT/grpo_toy_cuda_$name.log"
done

# 3. The tempered-logprob sampling kernel (test_cuda, built now).
ninja -C build-gpu -j16 test_cuda >> "$OUT/build.log" 2>&1 && stamp "test_cuda built" &&
  (cd tests && timeout 60 ../build-gpu/tests/test_cuda --gtest_filter='*Sampling*:-*Bench*' \
    > "$OUT/test_cuda_sampling.log" 2>&1)
stamp "sampling tests rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/test_cuda_sampling.log" | tr '\n' ' ')"
grep -E "tempered|max \||FAILED|Failure" "$OUT/test_cuda_sampling.log" | head -12

# 4. The H200 GRPO bench with a length reward.
if [ -d bench/configs/grpo_h200/shards ]; then
  VELA_LOG_LEVEL=debug timeout 60 build-gpu/vela train --config bench/configs/grpo_h200/grpo.json \
    --device cuda --dtype bf16 > "$OUT/grpo_bench.log" 2>&1
  stamp "grpo bench rc=$?"
  cp /tmp/grpo_bench/metrics.jsonl "$OUT/grpo_bench.metrics.jsonl" 2>/dev/null
  grep -E "phases|weight push|step [0-9]/" "$OUT/grpo_bench.log" | head -16
fi
