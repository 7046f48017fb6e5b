// The pieces the small-batch GEMMs share (gemm_skinny.cu, gemm_wgmma.cu): on the device a block's
// split-K chunk range, one 64-wide K chunk of a row-major matrix into a swizzled shared tile with
// cp.async, and the prologue that streams the first weight chunks before pdl_wait(); the operand
// head of their kernel arguments (Operands) and, on the host, its fill and the dispatch over a / c
// dtypes.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/cuda/attention_common.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/pdl.cuh"

namespace vela::ops::cuda::gemm_pipeline {

inline constexpr int kBK = 64;       // K per stage: one 128-byte row of 16-bit elements
inline constexpr int kChunkVec = 8;  // elements per 16-byte copy

// The operands both kernels' arguments start with (c = alpha * a @ w^T, a [m, k], w [n, k]).
struct Operands {
  const void* a;
  int64_t lda;
  const void* w;
  int64_t ldw;
  void* c;
  int64_t ldc;
  int m, n, k;
  int n_chunks;  // ceil(k / kBK)
};

// The K chunks [begin, end) of split `split` of `splits` over n_chunks (none empty when
// splits <= n_chunks).
struct ChunkRange {
  int begin, end;
};
__device__ __forceinline__ ChunkRange split_chunks(int split, int splits, int n_chunks) {
  return {static_cast<int>(static_cast<int64_t>(split) * n_chunks / splits),
          static_cast<int>(static_cast<int64_t>(split + 1) * n_chunks / splits)};
}

// Shared `tile` [kRows x kBK] (rows swizzled by smem_swizzle<kBK>) from rows row0 .. row0 + kRows
// of `src` (row stride ld), elements k0 .. k0 + kBK, with 16-byte cp.async copies shared by
// kThreads threads; rows at or past n_rows and elements at or past k are zero.
template <int kRows, int kThreads, typename T>
__device__ __forceinline__ void load_chunk(T* tile, const T* src, int64_t ld, int row0, int n_rows,
                                           int k0, int k, int tid) {
  constexpr int kPerRow = kBK / kChunkVec;
  static_assert(kRows * kPerRow % kThreads == 0, "whole copies per thread");
#pragma unroll
  for (int i = 0; i < kRows * kPerRow / kThreads; ++i) {
    const int idx = tid + i * kThreads, r = idx / kPerRow, ch = idx % kPerRow;
    const int row = row0 + r, kk = k0 + ch * kChunkVec;
    const bool valid = row < n_rows && kk < k;
    cp_async16(tile + smem_swizzle<kBK>(r, ch), valid ? src + row * ld + kk : src, valid);
  }
}

// Fills the first kStages - 1 stages of chunks [c_begin, c_begin + n_local): load_w(chunk,
// stage) for the weights before pdl_wait() (they do not depend on the previous kernel), then
// load_a(chunk, stage). Commit group s holds stage s's activations (group 0 also every early
// weight copy), so waiting for group s covers both halves of stage s.
template <int kStages, typename LoadW, typename LoadA>
__device__ __forceinline__ void prologue(int c_begin, int n_local, LoadW&& load_w, LoadA&& load_a) {
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s)
    if (s < n_local) load_w(c_begin + s, s);
  pdl_wait();
  pdl_launch_dependents();
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < n_local) load_a(c_begin + s, s);
    cp_async_commit();
  }
}

// The Operands of a kernel's arguments (`Args` derives from Operands and has alpha) for
// c = alpha * a @ w^T with a [m, k], w [n, k].
template <typename Args>
void fill_operands(Args& p, const Tensor& a, const Tensor& w, Tensor& c, float alpha) {
  p.a = a.data_ptr();
  p.lda = a.stride(0);
  p.w = w.data_ptr();
  p.ldw = w.stride(0);
  p.c = c.data_ptr();
  p.ldc = c.stride(0);
  p.m = static_cast<int>(a.size(0));
  p.n = static_cast<int>(w.size(0));
  p.k = static_cast<int>(a.size(1));
  p.n_chunks = static_cast<int>((a.size(1) + kBK - 1) / kBK);
  p.alpha = alpha;
}

// launch(T{}, TC{}) for bf16 / f16 inputs `in` and output `out` (the input dtype or f32).
template <typename Launch>
void dispatch_dtypes(DType in, DType out, Launch&& launch) {
  if (in == DType::kBF16) {
    if (out == DType::kF32)
      launch(bf16{}, float{});
    else
      launch(bf16{}, bf16{});
  } else {
    if (out == DType::kF32)
      launch(f16{}, float{});
    else
      launch(f16{}, f16{});
  }
}

}  // namespace vela::ops::cuda::gemm_pipeline
