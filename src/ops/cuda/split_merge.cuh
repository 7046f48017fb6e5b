// The split-KV rule of decode attention: how a row's keys are cut into splits (the decode kernels
// and every merge must agree), and the merge of one (row, head)'s split partials, written once for
// the merge kernel (attention_decode.cu) and the o projection that merges its own input
// (gemv_kernel.cuh, GemvIn::kSplitMerge), so both round the same bits.
#pragma once

#include <cuda_runtime.h>

#include <cmath>

#include "ops/cuda/common.cuh"

namespace vela::ops::cuda {

inline constexpr int kSplitChunkAlign = 32;

// Keys per split for a row of n_keys keys cut into n_splits chunks (a multiple of 32; 0 if empty).
__host__ __device__ __forceinline__ int split_chunk(int n_keys, int n_splits) {
  if (n_keys <= 0) return 0;
  const int c = (n_keys + n_splits - 1) / n_splits;
  return (c + kSplitChunkAlign - 1) / kSplitChunkAlign * kSplitChunkAlign;
}
// Splits that hold at least one key.
__host__ __device__ __forceinline__ int live_splits(int n_keys, int n_splits) {
  const int chunk = split_chunk(n_keys, n_splits);
  return chunk == 0 ? 0 : (n_keys + chunk - 1) / chunk;
}

// The tile width the attention kernels compile for a head_dim (dispatch_head_dim's rule): the
// merge's lanes are a tile's features / 4, so a padded head_dim sums in the same order everywhere.
__host__ __device__ constexpr int head_dim_tile(int head_dim) {
  return head_dim == 16    ? 16
         : head_dim <= 32  ? 32
         : head_dim <= 64  ? 64
         : head_dim <= 128 ? 128
                           : 256;
}

constexpr int kMergeThreads = 256;  // a merging block's threads: (4 features) x (split ways)

struct SplitMergeSmem {
  float w[kMergeThreads];
  float red[2][kMergeThreads / 32];
  float4 acc[kMergeThreads];
};

__device__ __forceinline__ void fma4(float w, const float4& o, float4& acc) {
  acc.x = fmaf(w, o.x, acc.x);
  acc.y = fmaf(w, o.y, acc.y);
  acc.z = fmaf(w, o.z, acc.z);
  acc.w = fmaf(w, o.w, acc.w);
}
__device__ __forceinline__ void add4(const float4& o, float4& acc) {
  acc.x += o.x;
  acc.y += o.y;
  acc.z += o.z;
  acc.w += o.w;
}

// Combines the n_live live splits of one (row, head) with weights 2^(lse_i - max) (log2 domain):
// op = the head's partials [n_splits][hd] (f32), lse = its [n_splits] log2-sum-exps. Every thread
// of the kMergeThreads-thread block calls it; the block's threads cover (lanes_d lanes of 4
// features) x (split ways), so the partials stream in parallel, and each way sums its splits in
// order, the ways then in order. Returns true on the threads that hold features 4 * dl .. + 3 of
// the merged row (normalised, not yet rounded) in out. A caller that calls it again syncs the block
// first (s is still being read).
__device__ __forceinline__ bool merge_split_head(const float* op, const float* lse_row, int n_live,
                                                 int hd, int lanes_d, bool exact, SplitMergeSmem& s,
                                                 int& dl, float (&out)[4]) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int ways = kMergeThreads / lanes_d;
  dl = tid % lanes_d;
  const int way = tid / lanes_d;
  const bool live_d = exact || dl * 4 < hd;
  const int n_mine = live_d ? n_live : 0;  // this thread sums splits way, way + ways, ...
  op += dl * 4;
  // The first kPre partials this thread sums load together with the lse (one L2 round trip
  // instead of two before the weighted sum; the sum's order is unchanged).
  constexpr int kPre = 4;
  float4 pre[kPre];
#pragma unroll
  for (int p = 0; p < kPre; ++p) {
    const int i = way + p * ways;
    if (i < n_mine) pre[p] = *reinterpret_cast<const float4*>(op + static_cast<int64_t>(i) * hd);
  }
  const float lse = tid < n_live ? lse_row[tid] : -INFINITY;
  const float wmax = warp_max(lse);
  if (lane == 0) s.red[0][warp] = wmax;
  __syncthreads();
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < kMergeThreads / 32; ++i) mx = fmaxf(mx, s.red[0][i]);
  const float w = mx == -INFINITY || tid >= n_live ? 0.0f : exp2f(lse - mx);
  s.w[tid] = w;
  const float wsum = warp_sum(w);
  if (lane == 0) s.red[1][warp] = wsum;
  __syncthreads();
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kMergeThreads / 32; ++i) sum += s.red[1][i];
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int p = 0; p < kPre; ++p) {
    const int i = way + p * ways;
    if (i < n_mine) fma4(s.w[i], pre[p], acc);
  }
#pragma unroll 4
  for (int i = way + kPre * ways; i < n_mine; i += ways) {
    const float4 o = *reinterpret_cast<const float4*>(op + static_cast<int64_t>(i) * hd);
    const float wi = s.w[i];
    fma4(wi, o, acc);
  }
  s.acc[tid] = acc;
  __syncthreads();
  const bool mine = way == 0 && live_d;
  if (mine) {
    for (int k = 1; k < ways; ++k) {
      const float4 o = s.acc[k * lanes_d + dl];
      add4(o, acc);
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    out[0] = acc.x * inv;
    out[1] = acc.y * inv;
    out[2] = acc.z * inv;
    out[3] = acc.w * inv;
  }
  return mine;
}

}  // namespace vela::ops::cuda
