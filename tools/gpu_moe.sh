#!/usr/bin/env bash
# The MoE checks on the GPU machine in one call: make the transformers fixtures
# (tools/make_moe_fixtures.py, CPU) while test_cuda builds (-DVELA_CUDA=ON, sm_90), then the CUDA
# MoE tests (ops vs CPU twins, the MoE fixtures through the CUDA engine with graphs) and the
# Qwen3-30B-A3B-shaped layer / 4-layer stack benchmarks. Logs, fixtures (moe_fixtures.tar.gz) and
# bench JSON go to $OUT.
# usage (from the repository root on the GPU machine): OUT=dir tools/gpu_moe.sh   (carry .deps-lite: tools/make_gpu_deps.sh)
set -uo pipefail
OUT="${OUT:-/tmp/vela-gpu}"
mkdir -p "$OUT"
source tools/gpu_deps.sh   # .deps-lite (tools/make_gpu_deps.sh) where the packages are missing
t0=$(date +%s)
( python3 tools/make_moe_fixtures.py > "$OUT/fixtures.log" 2>&1; echo "fixtures rc=$?" >> "$OUT/fixtures.log" ) &
fixtures_pid=$!
{ cmake -S . -B build-gpu -G Ninja -DVELA_CUDA=ON -DVELA_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release &&
  ninja -C build-gpu -j16 test_cuda; } > "$OUT/build.log" 2>&1
build_rc=$?
echo "build rc=$build_rc after $(( $(date +%s) - t0 )) s"
wait $fixtures_pid
tail -1 "$OUT/fixtures.log"
grep -E "hub reload|aux \(formula\)|WARNING|FAILED|Error" "$OUT/fixtures.log" | head -20
tar -czf "$OUT/moe_fixtures.tar.gz" tests/fixtures/models/qwen3_moe* tests/fixtures/models/mixtral* \
  tests/fixtures/models/qwen2_moe_shared tests/fixtures/grads/qwen3_moe.safetensors \
  tests/fixtures/grads/mixtral.safetensors tests/fixtures/grads/qwen2_moe_shared.safetensors 2>/dev/null
[ $build_rc -eq 0 ] || { tail -30 "$OUT/build.log"; exit 1; }
cd tests
timeout 120 ../build-gpu/tests/test_cuda --gtest_filter='CudaMoe.*' > "$OUT/test_cuda_moe.log" 2>&1
echo "test_cuda CudaMoe rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/test_cuda_moe.log" | tr '\n' ' ')"
grep -E "^\[  FAILED  \]|Failure|max err|Which is" "$OUT/test_cuda_moe.log" | head -30
VELA_MOE_BENCH_JSON="$OUT/moe_layer_h200.json" VELA_MOE_STACK_JSON="$OUT/moe_stack_h200.json" \
  timeout 150 ../build-gpu/tests/test_cuda --gtest_also_run_disabled_tests \
  --gtest_filter='CudaMoe.DISABLED_*' > "$OUT/moe_bench.log" 2>&1
echo "bench rc=$?"
grep -vE "^\[ |^$|^Note" "$OUT/moe_bench.log" | head -40
echo "total $(( $(date +%s) - t0 )) s"
