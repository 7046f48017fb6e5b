#!/usr/bin/env bash
# The LoRA checks of the GPU machine in one call (docs/lora.md): build test_cuda for sm_90
# (gpu_checks.sh's recipe), write the PEFT-parity fixture (test_cuda's LoraFixture: an adapter
# saved by vela and vela's CPU logits for it) into $OUT/fixture and tests/fixtures/lora/, check it
# with transformers + peft (tools/lora_peft_check.py: PEFT's logits vs vela's, then vela's CPU and
# CUDA engines vs PEFT), and run the CUDA LoRA tests (kernel twins, mixed-adapter engine batches).
# usage (on the GPU machine, from the repository root): OUT=dir tools/lora_gpu_check.sh
# Only test_cuda is built (the device-time budget); with build-gpu/vela present (gpu_checks.sh
# builds it) vela generate --lora on the CPU and CUDA engines is compared with PEFT too.
set -uo pipefail
OUT="${OUT:-/tmp/vela-lora}"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
source tools/gpu_deps.sh   # .deps-lite (tools/make_gpu_deps.sh) where the packages are missing
FIX=tests/fixtures/lora/qwen3_qknorm_r4
BASE=tests/fixtures/models/qwen3_qknorm
t0=$(date +%s)
{ cmake -S . -B build-gpu -G Ninja -DVELA_CUDA=ON -DVELA_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release &&
  ninja -C build-gpu -j16 -k 0 test_cuda; } > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; }
echo "build rc=$? in $(( $(date +%s) - t0 )) s"
if [ -x build-gpu/tests/test_cuda ]; then
  (cd tests && VELA_WRITE_LORA_FIXTURE="$OUT/fixture" ../build-gpu/tests/test_cuda \
     --gtest_filter='LoraFixture.*' > "$OUT/fixture.log" 2>&1)
  echo "fixture rc=$?"
  mkdir -p "$FIX" && cp -r "$OUT/fixture/." "$FIX/"
fi
ENGINES=()
[ -x build-gpu/vela ] && ENGINES=(--vela build-gpu/vela --engine cpu:f32 --engine cuda:f32 --engine cuda:bf16)
timeout 90 python3 tools/lora_peft_check.py --base "$BASE" --fixture "$FIX" "${ENGINES[@]}" \
  --out "$OUT/peft_check.json" > "$OUT/peft_check.log" 2>&1
echo "peft check rc=$?"; grep "\[peft\]" "$OUT/peft_check.log" || tail -20 "$OUT/peft_check.log"
if [ -x build-gpu/tests/test_cuda ]; then
  (cd tests && timeout 60 ../build-gpu/tests/test_cuda --gtest_filter='CudaLora*' > "$OUT/test_cuda_lora.log" 2>&1)
  echo "test_cuda CudaLora rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/test_cuda_lora.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED  \]|Failure|\[lora\]" "$OUT/test_cuda_lora.log" | head -30
  (cd tests && timeout 40 ../build-gpu/tests/test_cuda --gtest_filter='*Engine*' > "$OUT/test_cuda_engine.log" 2>&1)
  echo "test_cuda *Engine* rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/test_cuda_engine.log" | tr '\n' ' ')"
fi
