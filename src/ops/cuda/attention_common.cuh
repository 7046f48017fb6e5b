// Device building blocks shared by the attention kernels (ops/cuda/attention_*.cu only): cp.async
// copies into shared memory (with zero fill for masked rows), ldmatrix and the m16n8k16 bf16/f16
// tensor-core mma with fp32 accumulation, the split-KV chunking rule both the decode kernel and its
// merge use, and the head_dim dispatch (exact tiles and zero-padded ones).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/dtype.h"
#include "core/error.h"

namespace vela::ops::cuda {

// ---- cp.async (sm_80+): 16 bytes global -> shared, zero-filled when !valid (src still must be a
// mapped address; callers pass the tensor base) ----
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// ---- ldmatrix / mma ----
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

// d += a (16x16, row) * b (16x8, col); T is bf16 or f16 (vela storage types).
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
  if constexpr (std::is_same_v<T, bf16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Two floats as one 32-bit pair of T (x in the low half: the lower column / k index).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float x, float y) {
  uint32_t w;
  if constexpr (std::is_same_v<T, bf16>) {
    __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    memcpy(&w, &h, 4);
  } else {
    __half2 h = __floats2half2_rn(x, y);
    memcpy(&w, &h, 4);
  }
  return w;
}

// Element offset of 16-byte chunk `chunk` of row `row` in a [rows][D] 16-bit tile in shared memory:
// the chunk index is XORed with the row so that ldmatrix's 8 rows of one chunk hit distinct banks.
template <int D>
__device__ __forceinline__ int smem_swizzle(int row, int chunk) {
  constexpr int kChunks = D / 8;
  constexpr int kMask = (kChunks < 8 ? kChunks : 8) - 1;
  return row * D + ((chunk ^ (row & kMask)) << 3);
}

// ---- split-KV chunking (decode kernel and merge must agree) ----
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

// ---- 2^x without the denormal fix-up ----
// exp2f compiles to ex2.approx.f32, which on sm_5x+ wraps MUFU.EX2 in a compare and two predicated
// multiplies to get denormal results right; ex2.approx.ftz.f32 is the MUFU alone. The softmax's
// P values below 2^-126 are flushed to 0, which changes no sum they join (l >= 1, O's scale) and
// saves three of the ~7 instructions a score costs in the issue-bound prefill kernels.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// ---- online softmax over one key tile of a 16-row mma tile ----
// The update shared by the tensor-core kernels (flash forward, prefill, GQA decode). s holds the
// tile's raw scores as NT m16n8 accumulator fragments: element e of fragment nt belongs to row
// lane / 4 (e < 2) or lane / 4 + 8 (e >= 2), so a row's scores are spread over the 4 lanes of a
// quad. Per row half r: the running max m[r] (log2 domain, scores times scale_log2) takes the
// tile's, the scores become P = 2^(s * scale_log2 - m) in place, l[r] becomes l * corr + sum(P) and
// the O accumulators o[OT][4] are rescaled by corr = 2^(m_old - m_new). Fully masked rows (-inf)
// keep m = -inf and P = 0.
//
// online_softmax_scores is the update without the O rescale (corr[r] out), for a kernel whose O
// is still being written by an asynchronous MMA when the next tile's scores are ready (the wgmma
// prefill's overlapped loop); online_softmax_rescale applies corr afterwards.
template <int NT>
__device__ __forceinline__ void online_softmax_scores(float (&s)[NT][4], float (&m)[2],
                                                      float (&l)[2], float (&corr)[2],
                                                      float scale_log2) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float mx = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(m[r], mx * scale_log2);
    const float m_use = m_new == -INFINITY ? 0.0f : m_new;
    corr[r] = exp2_ftz(m[r] - m_use);
    m[r] = m_new;
    float sum = 0.0f;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int e = 2 * r; e < 2 * r + 2; ++e) {
        s[nt][e] = exp2_ftz(fmaf(s[nt][e], scale_log2, -m_use));
        sum += s[nt][e];
      }
    }
    l[r] = l[r] * corr[r] + sum;
  }
}
template <int OT>
__device__ __forceinline__ void online_softmax_rescale(float (&o)[OT][4], const float (&corr)[2]) {
  // Once a row's max has settled corr is exactly 1 (the usual case past the first tiles): a warp
  // whose rows all kept their max skips the multiplies (x * 1 == x, so the bits are the same).
  if (!__any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f)) return;
#pragma unroll
  for (int dt = 0; dt < OT; ++dt) {
    o[dt][0] *= corr[0];
    o[dt][1] *= corr[0];
    o[dt][2] *= corr[1];
    o[dt][3] *= corr[1];
  }
}
template <int NT, int OT>
__device__ __forceinline__ void online_softmax_tile(float (&s)[NT][4], float (&m)[2], float (&l)[2],
                                                    float (&o)[OT][4], float scale_log2) {
  float corr[2];
  online_softmax_scores(s, m, l, corr, scale_log2);
  online_softmax_rescale(o, corr);
}

// ---- kernel arguments ----
// The paged-cache operands every paged attention kernel reads first in its arguments (the decode /
// rows kernels' RowsArgs and the prefill kernels' PrefillArgs derive from it).
struct PagedAttnArgs {
  const void* q;
  int64_t q_token_stride;  // elements
  const void* k_cache;     // [n_slots, n_kv_heads, head_dim]
  const void* v_cache;
  const int32_t* req_to_token;
  int64_t r2t_stride;
  const int32_t* req_pool_indices;
  const int32_t* seq_lens;
  const int32_t* qo_indptr;  // decode / rows: nullptr = decode (row = sequence)
};

// ---- head_dim dispatch ----
// The kernels are compiled for tile widths D (the compile-time head size of their shared-memory
// tiles and register fragments). head_dim 16, 32, 64, 128 and 256 run their exact tile (kExact:
// the fast paths, every bound a constant); any other multiple of 8 up to 256 runs the next wider
// tile of 32, 64, 128 or 256 with the columns at and past head_dim zero-filled on load (q and k
// zero there add nothing to the scores, v zero there only feeds output columns that are never
// stored) and global addressing by the runtime head_dim. A multiple of 8 keeps every 16-byte
// (8 x 16-bit) chunk entirely inside or outside a row.
inline constexpr int kMaxHeadDim = 256;  // ops::kMaxCudaHeadDim (ops/attention.h)

// Calls f(std::integral_constant<int, D>{}, std::bool_constant<kExact>{}) for head_dim: D is the
// tile width, kExact whether head_dim == D. Unsupported for head_dim not a multiple of 8 in
// [8, 256].
template <typename F>
void dispatch_head_dim(int64_t head_dim, const char* op, F&& f) {
  VELA_CHECK_T(Unsupported, head_dim > 0 && head_dim % 8 == 0 && head_dim <= kMaxHeadDim, op,
               ": CUDA attention kernels support head_dim a multiple of 8 up to ", kMaxHeadDim,
               ", got ", head_dim);
  using exact = std::true_type;
  using padded = std::false_type;
  switch (head_dim) {
    case 16:
      return f(std::integral_constant<int, 16>{}, exact{});
    case 32:
      return f(std::integral_constant<int, 32>{}, exact{});
    case 64:
      return f(std::integral_constant<int, 64>{}, exact{});
    case 128:
      return f(std::integral_constant<int, 128>{}, exact{});
    case 256:
      return f(std::integral_constant<int, 256>{}, exact{});
    default:
      break;
  }
  if (head_dim < 32) return f(std::integral_constant<int, 32>{}, padded{});
  if (head_dim < 64) return f(std::integral_constant<int, 64>{}, padded{});
  if (head_dim < 128) return f(std::integral_constant<int, 128>{}, padded{});
  return f(std::integral_constant<int, 256>{}, padded{});
}

}  // namespace vela::ops::cuda
