#!/usr/bin/env bash
# Issue 18's remaining GPU measurements in one call (docs/lora.md, docs/model.md):
#  1. the serving LoRA kernels (BGMV shrink / expand) against the base GEMM at bench-1b and
#     Qwen3-1.7B shapes, 64-row decode batches over 1..8 adapters, r 8..64
#     (tests/cuda/test_cuda_lora_bench.cpp) -> $OUT/lora_bgmv_h200.{log,json}
#  2. `vela train --device cuda --dtype bf16` of a Qwen3-0.6B-shaped model on the demo model's
#     held-out chats, LoRA r 16 all-linear (bench/configs/lora_h200/), then the same config
#     full-parameter: tokens/s and step time of each -> $OUT/lora_train_*.{log,metrics.jsonl}
#  3. vela-trained MoE checkpoints (qwen3_moe, mixtral, qwen2_moe_shared) loaded by transformers
#     and compared with vela's logits (tools/check_moe_checkpoints.sh) -> $OUT/moe_ckpt/
# usage (GPU machine, repository root): OUT=dir tools/gpu_lora_moe.sh [BUILD_DIR]
#   BUILD_DIR (default build-gpu) must hold vela and tests/test_cuda built with -DVELA_CUDA=ON
#   (tools/gpu_checks.sh builds them); when they are missing they are built here (with
#   .deps-lite from tools/make_gpu_deps.sh), which takes a few minutes on 16 cores.
set -uo pipefail
OUT="${OUT:-/tmp/vela-lora-moe}"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
B="${1:-build-gpu}"
t0=$(date +%s)
if [ ! -x "$B/vela" ] || [ ! -x "$B/tests/test_cuda" ]; then
  source tools/gpu_deps.sh
  { cmake -S . -B "$B" -G Ninja -DVELA_CUDA=ON -DVELA_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release \
      -DVELA_BUILD_TESTS=ON && ninja -C "$B" -j16 vela test_cuda; } > "$OUT/build.log" 2>&1 ||
    { tail -30 "$OUT/build.log"; exit 1; }
  echo "built $B in $(( $(date +%s) - t0 )) s"
fi
source tools/gpu_deps.sh   # the loader path to .deps-lite's libraries (a no-op without it)
VELA=$(cd "$B" && pwd)/vela
TEST_CUDA=$(cd "$B" && pwd)/tests/test_cuda

# 1. BGMV kernels vs the base GEMM.
(cd tests && VELA_LORA_BENCH_JSON="$OUT/lora_bgmv_h200.json" timeout 240 "$TEST_CUDA" \
  --gtest_also_run_disabled_tests --gtest_filter='CudaLoraBench.*' > "$OUT/lora_bgmv_h200.log" 2>&1)
echo "lora bench rc=$?"
grep -vE "^\[|^$|^Note" "$OUT/lora_bgmv_h200.log" | head -80

# 2. LoRA vs full-parameter training on the H200.
"$VELA" preprocess --config bench/configs/lora_h200/prep.json models/vela-demo/heldout.jsonl \
  -o /tmp/lora_bench_shards --quiet > /dev/null
tps() {  # median tokens/s and step seconds of the logged steps after the 5th
  python3 - "$1" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"tokens_per_second"' in l][5:]
print(f"median {statistics.median(r['tokens_per_second'] for r in rows):.0f} tok/s, "
      f"{statistics.median(r['step_seconds'] for r in rows) * 1e3:.1f} ms/step over {len(rows)} steps, "
      f"loss {rows[0]['loss']:.3f} -> {rows[-1]['loss']:.3f}")
PY
}
for mode in lora full; do
  flags=()
  [ $mode = lora ] && flags=(--lora.r 16 --lora.alpha 32 --lora.dropout 0.05 --lora.target-modules all-linear)
  rm -rf "/tmp/lora_bench_$mode"
  VELA_LOG_LEVEL=info timeout 150 "$VELA" train --config bench/configs/lora_h200/train.json \
    --device cuda --dtype bf16 --out-dir "/tmp/lora_bench_$mode" "${flags[@]}" \
    > "$OUT/lora_train_$mode.log" 2>&1
  echo "train $mode rc=$?: $(tps "/tmp/lora_bench_$mode/metrics.jsonl" 2>&1 | tail -1)"
  cp "/tmp/lora_bench_$mode/metrics.jsonl" "$OUT/lora_train_$mode.metrics.jsonl" 2>/dev/null
  grep -iE "lora|params|memory" "$OUT/lora_train_$mode.log" | head -4
done

# 3. vela-trained MoE checkpoints in transformers.
tools/check_moe_checkpoints.sh "$VELA" "$OUT/moe_ckpt" 2>&1 | tee "$OUT/moe_ckpt.log"
echo "moe checkpoints rc=${PIPESTATUS[0]}"
rm -rf "$OUT/moe_ckpt/shards"
echo "total $(( $(date +%s) - t0 )) s"
