#!/usr/bin/env bash
# Builds only what tools/bench_token_bitmask.cpp needs (core/, the op's dispatch, CPU twin and CUDA
# kernel: seconds, not the whole library) and runs it: the CUDA kernel against the CPU twin and
# the B = 64 cost per decode step. Results under $OUT (token_bitmask.log, token_bitmask.json).
# usage (on the GPU machine, from the repository root): OUT=dir tools/gpu_token_bitmask.sh
set -euo pipefail
OUT="${OUT:-/tmp/vela-gpu}"
B=/tmp/vela-token-bitmask
mkdir -p "$OUT" "$B"
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
CUDA_HOME=$(dirname "$(dirname "$NVCC")")
DEFS="-DVELA_HAS_CUDA=1 -DVELA_CUDA_ARCHS_STR=\"90\""
CXX_SRCS="tools/bench_token_bitmask.cpp src/ops/token_bitmask.cpp src/ops/cpu/token_bitmask.cpp
  src/core/tensor.cpp src/core/allocator.cpp src/core/device.cpp src/core/dtype.cpp src/core/log.cpp
  src/core/rng.cpp src/core/scratch_arena.cpp $(ls src/core/cuda/*.cpp)"
CU_SRCS="src/ops/cuda/token_bitmask.cu src/core/cuda/device_kernels.cu"
pids=()
for s in $CXX_SRCS; do
  g++ -std=c++20 -O2 -fopenmp -Isrc -I"$CUDA_HOME/include" $DEFS -c "$s" -o "$B/$(echo "$s" | tr / _).o" &
  pids+=($!)
done
for s in $CU_SRCS; do
  "$NVCC" -std=c++20 -O2 -arch=sm_90 --expt-relaxed-constexpr -Isrc $DEFS -c "$s" -o "$B/$(echo "$s" | tr / _).o" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
g++ -fopenmp "$B"/*.o -L"$CUDA_HOME/lib64" -lcudart -o "$B/bench_token_bitmask"
OUT="$OUT" "$B/bench_token_bitmask" 2>&1 | tee "$OUT/token_bitmask.log"
