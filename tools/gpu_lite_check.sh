#!/usr/bin/env bash
# The lead's one-call H200 check of the merged tree. Make the dependency archive here first
# (tools/make_gpu_deps.sh), then run with carry [".deps-lite", ".gpu-carry/moe_ckpt"]:
#   OUT=$OUT tools/gpu_lite_check.sh
# (.gpu-carry/moe_ckpt from tools/check_moe_checkpoints.sh build/vela .gpu-carry/moe_ckpt).
set -uo pipefail
source tools/gpu_deps.sh
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
{ cmake -S . -B build-gpu -G Ninja -DVELA_CUDA=ON -DVELA_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release -DVELA_MPI=OFF &&
  ninja -C build-gpu -j16 vela test_cuda test_engine; } > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
el "build ok"
cd tests
timeout 200 ../build-gpu/tests/test_cuda --gtest_filter='-*AgreesWith*' > "$OUT/test_cuda.log" 2>&1
el "test_cuda rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/test_cuda.log" | tr '\n' ' ')"
grep -E "^\[  FAILED  \]|Failure" "$OUT/test_cuda.log" | head -20
cd ..
timeout 120 build-gpu/vela bench engine --json "$OUT/engine_h200.json" > "$OUT/engine_h200.txt" 2>&1
el "bench engine rc=$?"; grep -v INFO "$OUT/engine_h200.txt" | tail -20
timeout 40 tools/check_moe_checkpoints.sh --check-only .gpu-carry/moe_ckpt > "$OUT/moe_hf.log" 2>&1
el "moe hf rc=$?"; tail -6 "$OUT/moe_hf.log"
VELA_GEMM_TUNE=1 VELA_LOG_LEVEL=info timeout 120 build-gpu/vela bench engine --cases batch64 --json "$OUT/engine_tuned.json" > "$OUT/engine_tuned.txt" 2>&1
el "bench tuned rc=$?"; grep -v "INFO.*KV\|INFO.*load" "$OUT/engine_tuned.txt" | tail -12
timeout 60 build-gpu/vela bench spec --model models/vela-demo --device cuda --dtype bf16 --decode 256 --reps 2 --settings 'ngram,k=4;draft=models/vela-demo-draft,k=2;draft=models/vela-demo-draft,k=4' > "$OUT/spec_draft_h200.txt" 2>&1
el "spec rc=$?"; grep -v INFO "$OUT/spec_draft_h200.txt" | tail -8
