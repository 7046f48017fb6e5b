// The decode GEMV kernel (included by gemv.cu and gemv_fused.cu): skinny GEMM
// c[M, N] = alpha * a[M, K] @ w[N, K]^T with M <= 8 (the batch rows of a decode step) and bf16/f16
// inputs, plus the fused forms of a decode layer (ops/fused_gemm.h):
//   in kRmsNorm:  the input is rms_norm(x) * norm_w: every warp takes the rows' rms itself, the
//                 block stages the normalised rows in shared memory (or, past 48 KB, every warp
//                 normalises each chunk of x as it loads it)
//   in kSiluMul:  the input is silu(gate) * up of a [M, 2K] gate|up row, staged by every block in
//                 shared memory
//   out kAdd:     the output is added into c (the residual) instead of stored
//   out kSiluMul: the warp's two columns are gate j and up j, the output silu(gate) * up
//   out kRotary:  the warp's two columns are dimensions i and i + D/2 of a head: rotary on q / k,
//                 q stored to its tensor, k and v to the row's cache slot
// Each of them is rounded to the storage type exactly where the unfused ops round, so the fused
// and unfused paths differ only in fp32 summation order.
//
// It is a matrix-vector product per row of a, bound by reading w once: each warp owns C adjacent
// output columns (W warps split their K when the output is too narrow to fill the SMs), streams
// their rows with 16-byte loads (kUnroll per column in flight plus the next kUnroll prefetched
// while the current ones are used) and dots them with the M rows of a (L1/L2, or shared memory for
// the staged forms). The first loads of w are issued before pdl_wait(): under programmatic
// dependent launch (pdl.cuh) the weights of the next GEMV stream while the previous kernel drains.
// A grid larger than the resident blocks is launched persistent (VELA_GEMV_PERSIST, default on):
// one resident wave of blocks, each taking column groups blockIdx.x, + gridDim.x, ..., with the
// next group's first weight loads (and kAdd's residual) issued before the current group's
// reduction, and the per-block prologue (RMSNorm staged in shared memory) paid once. Which block
// computes a column does not change its sum, so the results are the same bits either way.
#pragma once

#include <algorithm>
#include <atomic>

#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/pdl.cuh"

namespace vela::ops::cuda::gemv_detail {

constexpr int kGemvWarps = 8;  // warps per block
constexpr int kGemvVec = 8;    // elements per 16-byte load of bf16/f16
constexpr int kUnroll = 4;     // 16-byte loads of w per lane per step (and as many prefetched)
constexpr int kStageMaxBytes = 96 * 1024;  // shared memory for a staged (fused) input

enum class GemvIn { kPlain, kRmsNorm, kSiluMul };
// kSiluMul out: the warp's C = 2 columns are gate row j and up row j + n (w is [2n, k] = gate |
// up) and the epilogue stores silu(gate) * up (each rounded as the unfused gemm + silu_and_mul).
// kRotary out (the fused q|k|v projection of a decode layer): the warp's C = 2 columns are
// dimension i and i + D/2 of one head, the epilogue rotates q and k heads by the row's position
// and stores q to its own tensor, k and v into the cache slot (ops::rms_norm_gemm_rotary_kv_write).
enum class GemvOut { kStore, kAdd, kSiluMul, kRotary };

// kRotary: where the rotated heads go (one position and cache slot per row).
struct GemvRotary {
  const int32_t* positions;  // [m]
  const float* table;        // [max_positions, 2 * half]: cos | sin
  int64_t max_positions;
  int half;  // head_dim / 2 (full-width rotary)
  int n_heads, n_kv_heads;
  const int32_t* loc;  // [m] cache slots
  int64_t n_slots;
  void* q_out;    // [m, n_heads, head_dim]
  void* k_cache;  // [n_slots, n_kv_heads, head_dim]
  void* v_cache;
};

struct GemvArgs {
  const void* a;  // plain: [m, k]; kRmsNorm: x [m, k]; kSiluMul: [m, 2k] = gate | up
  int64_t lda;
  const void* w;  // [n, k]
  int64_t ldw;
  void* c;  // [m, n]: out (kStore) or residual (kAdd, updated in place)
  int64_t ldc;
  const void* norm_w;  // kRmsNorm: [k], f32 or the input dtype
  bool norm_f32;
  float eps;
  int64_t n, k;
  int m;  // rows actually present (<= the kernel's M)
  float alpha;
  bool norm_staged;  // kRmsNorm: the normalised rows staged in shared memory (set by launch_gemv)
  GemvRotary rot;    // kRotary
};

// The two weight rows of pair p: kSiluMul gate p and up p (w = gate | up, n pairs); kRotary
// dimensions i and i + half of head p / half (i = p % half).
template <GemvOut OUT>
__device__ __forceinline__ int64_t pair_row(const GemvArgs& args, int64_t p, int c) {
  if constexpr (OUT == GemvOut::kRotary) {
    const int64_t half = args.rot.half;
    return (p / half) * 2 * half + p % half + c * half;
  } else {
    return p + c * args.n;
  }
}

// Pair p of the fused q|k|v output: head h (q heads, then k, then v) and dimension i < half.
struct RotaryPair {
  int h, i;
  bool is_q, is_v;
};
__device__ __forceinline__ RotaryPair rotary_pair(const GemvRotary& r, int64_t p) {
  const int h = static_cast<int>(p / r.half);
  return {h, static_cast<int>(p % r.half), h < r.n_heads, h >= r.n_heads + r.n_kv_heads};
}

// kRotary epilogue of row mi: g0, g1 are dimensions i and i + half of head h (already rounded to
// T as the projection is stored); rotary as qkv_rotary_kv_write computes it, then q to q_out,
// k / v to the row's cache slot. Positions outside the table are not rotated and slots outside
// the cache not written, as the unfused op treats trusted device metadata.
template <typename T>
__device__ __forceinline__ void store_rotary(const GemvRotary& r, int mi, int64_t p, float g0,
                                             float g1) {
  const auto [h, i, is_q, is_v] = rotary_pair(r, p);
  const int d = 2 * r.half;
  if (!is_v) {
    const int64_t pos = r.positions[mi];
    if (pos >= 0 && pos < r.max_positions) {
      const float* tab = r.table + pos * d;
      const float y0 = rope_lo(g0, g1, tab[i], tab[r.half + i]);
      const float y1 = rope_hi(g0, g1, tab[i], tab[r.half + i]);
      g0 = y0;
      g1 = y1;
    }
  }
  T* dst;
  if (is_q) {
    dst = static_cast<T*>(r.q_out) + (static_cast<int64_t>(mi) * r.n_heads + h) * d;
  } else {
    const int64_t slot = r.loc[mi];
    if (slot < 0 || slot >= r.n_slots) return;
    const int kvh = is_v ? h - r.n_heads - r.n_kv_heads : h - r.n_heads;
    dst = static_cast<T*>(is_v ? r.v_cache : r.k_cache) + (slot * r.n_kv_heads + kvh) * d;
  }
  dst[i] = from_float<T>(g0);
  dst[i + r.half] = from_float<T>(g1);
}

// store_rotary's reads for row mi and pair p, fetched into L1 ahead of it: the position, the two
// table entries it rotates by, the cache slot.
__device__ __forceinline__ void prefetch_rotary(const GemvRotary& r, int mi, int64_t p) {
  const RotaryPair pr = rotary_pair(r, p);
  if (!pr.is_v) {
    const int64_t pos = r.positions[mi];
    if (pos >= 0 && pos < r.max_positions) {
      const float* tab = r.table + pos * 2 * r.half;
      prefetch_l1(tab + pr.i);
      prefetch_l1(tab + r.half + pr.i);
    }
  }
  if (!pr.is_q) prefetch_l1(r.loc + mi);
}

__device__ __forceinline__ uint4 load_w(const void* p) {
  // Weights are read once per step: keep them out of L1.
  return __ldcs(reinterpret_cast<const uint4*>(p));
}

// kRmsNorm: the norm weight's elements kk .. kk + kGemvVec - 1 (f32 or T) as floats.
template <typename T>
__device__ __forceinline__ void load_norm_w(const GemvArgs& args, int64_t kk,
                                            float (&nwf)[kGemvVec]) {
  if (args.norm_f32)
    load_float<kGemvVec>(static_cast<const float*>(args.norm_w) + kk, nwf);
  else
    load_float<kGemvVec>(static_cast<const T*>(args.norm_w) + kk, nwf);
}

// kSiluMul input: fills xs [m, k] (T) with silu(gate) * up, rounded to T as silu_and_mul stores
// it (the whole block, then a barrier).
template <typename T, int M, GemvIn IN>
__device__ void stage_input(const GemvArgs& args, T* xs) {
  const T* a = static_cast<const T*>(args.a);
  const int nv = static_cast<int>(args.k / kGemvVec);
  constexpr int kThreads = kGemvWarps * 32;
  for (int mi = 0; mi < args.m; ++mi) {
    const T* g = a + mi * args.lda;
    const T* u = g + args.k;
    for (int v = threadIdx.x; v < nv; v += kThreads) {
      float gv[kGemvVec], uv[kGemvVec];
      load_float<kGemvVec>(g + v * kGemvVec, gv);
      load_float<kGemvVec>(u + v * kGemvVec, uv);
#pragma unroll
      for (int i = 0; i < kGemvVec; ++i) gv[i] = gv[i] / (1.0f + expf(-gv[i])) * uv[i];
      store_float<kGemvVec>(xs + mi * args.k + v * kGemvVec, gv);
    }
  }
  __syncthreads();
}

// Each warp owns C adjacent output columns (their loads are in flight together, so a short row
// still keeps the memory pipe full), W warps split their K.
template <typename T, typename TC, int M, int W, int C, GemvIn IN, GemvOut OUT>
static __global__ void __launch_bounds__(kGemvWarps * 32) gemv_kernel(GemvArgs args) {
  constexpr bool kPairs = OUT == GemvOut::kSiluMul || OUT == GemvOut::kRotary;
  static_assert(!kPairs || C == 2, "the pair epilogues take two columns per warp");
  constexpr int kColsPerBlock = kGemvWarps / W * (kPairs ? 1 : C);
  constexpr bool kStaged = IN == GemvIn::kSiluMul;
  constexpr bool kNorm = IN == GemvIn::kRmsNorm;
  extern __shared__ uint4 stage_smem[];
  __shared__ float partial[kGemvWarps][C][M];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int part = warp % W;
  const int64_t n = args.n, k = args.k;
  const int m = args.m;
  // A block takes column groups blockIdx.x, + gridDim.x, ...: one group per block when the grid
  // covers them all, several when the host sized the grid to the resident blocks (persistent).
  const int64_t n_groups = (n + kColsPerBlock - 1) / kColsPerBlock;
  int64_t group = blockIdx.x;
  int64_t col0 = 0;
  const T* wr[C];
  bool live[C];
  constexpr int64_t kStep = 32 * kGemvVec * W;  // elements between a lane's consecutive loads
  const int64_t k_first = (static_cast<int64_t>(part) * 32 + lane) * kGemvVec;
  uint4 cur[C][kUnroll];
  // Points wr / live at group g's columns and issues their first kUnroll loads into cur.
  auto start_group = [&](int64_t g) {
    col0 = g * kColsPerBlock + (warp / W) * (kPairs ? 1 : C);
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int64_t row = kPairs ? pair_row<OUT>(args, col0, c) : col0 + c;
      live[c] = kPairs ? col0 < n : col0 + c < n;
      wr[c] = static_cast<const T*>(args.w) + (live[c] ? row : 0) * args.ldw;
    }
#pragma unroll
    for (int c = 0; c < C; ++c) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t kk = k_first + u * kStep;
        if (live[c] && kk < k) cur[c][u] = load_w(wr[c] + kk);
      }
    }
  };

  // Weights do not depend on the previous kernel: start streaming them before waiting on it.
  start_group(group);
  // So do the norm weight, and the rotary's position, table row and cache slot (host-written
  // metadata): into L1 now, so the staged norm and the epilogue after the wait do not each pay a
  // round trip to L2 or DRAM.
  if constexpr (kNorm) {
    if (args.norm_staged) {
      const int64_t esz = args.norm_f32 ? 4 : static_cast<int64_t>(sizeof(T));
      for (int64_t v = threadIdx.x; v < k / kGemvVec; v += kGemvWarps * 32)
        prefetch_l1(static_cast<const char*>(args.norm_w) + v * kGemvVec * esz);
    }
  }
  if constexpr (OUT == GemvOut::kRotary) {
    if (part == 0 && lane < m && col0 < n) prefetch_rotary(args.rot, lane, col0);
  }
  pdl_wait();
  pdl_launch_dependents();

  const T* xs;
  int64_t ldx;
  if constexpr (kStaged) {
    T* s = reinterpret_cast<T*>(stage_smem);
    stage_input<T, M, IN>(args, s);
    xs = s;
    ldx = k;
  } else {
    xs = static_cast<const T*>(args.a);
    ldx = args.lda;
  }
  // kRmsNorm: every warp takes the rows' sums of squares itself (L1-resident, no block barrier);
  // the block then stages the normalised rows in shared memory once for all its column groups
  // (norm_staged), or, where they do not fit, every warp normalises each chunk as it uses it.
  float rstd[M];
#pragma unroll
  for (int mi = 0; mi < M; ++mi) rstd[mi] = 0.0f;
  if constexpr (kNorm) {
    // kNormLoads 16-byte loads of x per lane in flight at once (a dependent loop of single loads
    // paid one L2 latency per 256 elements before any weight was used); the sum runs in the
    // same order as one load at a time, so rstd is the same bits.
    constexpr int kNormLoads = 8;
    constexpr int64_t kNormStep = 32 * kGemvVec;
#pragma unroll
    for (int mi = 0; mi < M; ++mi) {
      if (mi < m) {
        float ss = 0.0f;
        for (int64_t base = lane * kGemvVec; base < k; base += kNormLoads * kNormStep) {
          uint4 v[kNormLoads];
#pragma unroll
          for (int j = 0; j < kNormLoads; ++j)
            if (base + j * kNormStep < k)
              v[j] = *reinterpret_cast<const uint4*>(xs + mi * ldx + base + j * kNormStep);
#pragma unroll
          for (int j = 0; j < kNormLoads; ++j) {
            if (base + j * kNormStep < k) {
              float f[kGemvVec];
              unpack16<T>(v[j], f);
#pragma unroll
              for (int i = 0; i < kGemvVec; ++i) ss += f[i] * f[i];
            }
          }
        }
        rstd[mi] = rsqrtf(warp_sum(ss) / static_cast<float>(k) + args.eps);
      }
    }
  }
  const bool norm_inline = kNorm && !args.norm_staged;
  if (kNorm && args.norm_staged) {
    // rms_norm's stored value round(x * rstd * w), once per block (mi unrolled: rstd stays in
    // registers).
    T* st = reinterpret_cast<T*>(stage_smem);
    const int nv = static_cast<int>(k / kGemvVec);
#pragma unroll
    for (int mi = 0; mi < M; ++mi) {
      if (mi >= m) break;
      for (int v = threadIdx.x; v < nv; v += kGemvWarps * 32) {
        float xf[kGemvVec], nwf[kGemvVec];
        load_float<kGemvVec>(xs + mi * ldx + v * kGemvVec, xf);
        load_norm_w<T>(args, v * kGemvVec, nwf);
#pragma unroll
        for (int i = 0; i < kGemvVec; ++i) xf[i] = xf[i] * rstd[mi] * nwf[i];
        store_float<kGemvVec>(st + mi * k + v * kGemvVec, xf);
      }
    }
    __syncthreads();
    xs = st;
    ldx = k;
  }
  // kAdd: the residual this lane adds to, read ahead of the reduction that needs it and kept as
  // loaded (TC): converted only in the epilogue, so no warp waits for it before its main loop or
  // the next group's reduction (the conversion at the load cost an L2 round trip there).
  TC resid = from_float<TC>(0.0f);
  auto load_resid = [&]() {
    if constexpr (OUT == GemvOut::kAdd) {
      const int c = lane / M, mi = lane % M;
      if (part == 0 && lane < C * M && mi < m && col0 + c < n)
        resid = static_cast<const TC*>(args.c)[mi * args.ldc + col0 + c];
    }
  };
  load_resid();

  while (true) {
    float acc[C][M];
#pragma unroll
    for (int c = 0; c < C; ++c)
#pragma unroll
      for (int mi = 0; mi < M; ++mi) acc[c][mi] = 0.0f;
    for (int64_t base = k_first; base < k; base += kUnroll * kStep) {
      uint4 nxt[C][kUnroll];
#pragma unroll
      for (int c = 0; c < C; ++c) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int64_t kk = base + (kUnroll + u) * kStep;
          if (live[c] && kk < k) nxt[c][u] = load_w(wr[c] + kk);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t kk = base + u * kStep;
        if (kk < k) {
          float nwf[kGemvVec];
          if (norm_inline) load_norm_w<T>(args, kk, nwf);
#pragma unroll
          for (int mi = 0; mi < M; ++mi) {
            if (mi < m) {
              float xf[kGemvVec];
              load_float<kGemvVec>(xs + mi * ldx + kk, xf);
              if (norm_inline) {
                // rms_norm's stored value: round(x * rstd * w)
#pragma unroll
                for (int i = 0; i < kGemvVec; ++i)
                  xf[i] = to_float(from_float<T>(xf[i] * rstd[mi] * nwf[i]));
              }
#pragma unroll
              for (int c = 0; c < C; ++c) {
                float wf[kGemvVec];
                unpack16<T>(cur[c][u], wf);
#pragma unroll
                for (int i = 0; i < kGemvVec; ++i) acc[c][mi] += wf[i] * xf[i];
              }
            }
          }
        }
      }
#pragma unroll
      for (int c = 0; c < C; ++c)
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) cur[c][u] = nxt[c][u];
    }

    // The next group's first loads go out before this group's reduction and store.
    const int64_t out_col0 = col0;
    const TC out_resid = resid;
    const int64_t next = group + gridDim.x;
    if (next < n_groups) {
      start_group(next);
      load_resid();
    }

    // Lane c * M + mi of the columns' first warp ends up holding (column c, row mi).
    float result = 0.0f;
#pragma unroll
    for (int c = 0; c < C; ++c) {
#pragma unroll
      for (int mi = 0; mi < M; ++mi) {
        const float s = warp_sum(acc[c][mi]);
        if constexpr (W == 1) {
          if (lane == c * M + mi) result = s;
        } else if (lane == 0) {
          partial[warp][c][mi] = s;
        }
      }
    }
    if constexpr (W > 1) {
      __syncthreads();
      if (part == 0 && lane < C * M) {
#pragma unroll
        for (int p = 0; p < W; ++p) result += partial[warp + p][lane / M][lane % M];
      }
      if (next < n_groups) __syncthreads();  // partial is rewritten by the next group
    }
    if constexpr (OUT == GemvOut::kRotary) {
      // Lane mi holds dimension i of row mi, lane M + mi dimension i + half: bring it over.
      const float hi = __shfl_down_sync(0xffffffffu, result, M);
      if (part == 0 && lane < m && out_col0 < n)
        store_rotary<T>(args.rot, lane, out_col0, to_float(from_float<T>(args.alpha * result)),
                        to_float(from_float<T>(args.alpha * hi)));
    } else if constexpr (kPairs) {
      // Lane mi holds gate row mi, lane M + mi the up row: bring the up value over.
      const float up = __shfl_down_sync(0xffffffffu, result, M);
      if (part == 0 && lane < m && out_col0 < n) {
        const float g = to_float(from_float<T>(args.alpha * result));
        const float u = to_float(from_float<T>(args.alpha * up));
        static_cast<TC*>(args.c)[lane * args.ldc + out_col0] =
            from_float<TC>(g / (1.0f + expf(-g)) * u);
      }
    } else {
      const int c = lane / M, mi = lane % M;
      if (part == 0 && lane < C * M && mi < m && out_col0 + c < n) {
        TC* out = static_cast<TC*>(args.c) + mi * args.ldc + out_col0 + c;
        if constexpr (OUT == GemvOut::kAdd) {
          // residual += round(a @ w^T), rounded again: what gemm + add_rms_norm store.
          const float y = to_float(from_float<T>(args.alpha * result));
          *out = from_float<TC>(y + to_float(out_resid));
        } else {
          *out = from_float<TC>(args.alpha * result);
        }
      }
    }
    if (next >= n_groups) break;
    group = next;
  }
}

extern std::atomic<int> g_max_grid;  // gemv.cu: gemv_set_max_grid (tests)

// Whether launch_gemv sizes a multi-wave grid to the resident blocks, each block then taking
// several column groups (gemv.cu: on unless VELA_GEMV_PERSIST=0).
bool gemv_persistent();

template <typename T, typename TC, int M, int W, int C, GemvIn IN, GemvOut OUT>
void launch_gemv(const GemvArgs& args) {
  constexpr bool kPairs = OUT == GemvOut::kSiluMul || OUT == GemvOut::kRotary;
  constexpr int kColsPerBlock = kGemvWarps / W * (kPairs ? 1 : C);
  const unsigned blocks = static_cast<unsigned>((args.n + kColsPerBlock - 1) / kColsPerBlock);
  size_t smem = 0;
  auto kernel = gemv_kernel<T, TC, M, W, C, IN, OUT>;
  GemvArgs a = args;
  if constexpr (IN == GemvIn::kSiluMul) {
    smem = static_cast<size_t>(args.m) * static_cast<size_t>(args.k) * sizeof(T);
    if (smem > 48 * 1024) opt_in_smem(kernel, kStageMaxBytes);  // once per device: the largest
  } else if constexpr (IN == GemvIn::kRmsNorm) {
    // Stage the normalised rows where they fit the default shared memory (no opt-in).
    const size_t bytes = static_cast<size_t>(args.m) * static_cast<size_t>(args.k) * sizeof(T);
    a.norm_staged = bytes <= 48 * 1024;
    if (a.norm_staged) smem = bytes;
  }
  unsigned grid = blocks;
  if (gemv_persistent()) {
    // Resident blocks of this instantiation (the occupancy query is a host call: cached).
    static thread_local size_t cached_smem = static_cast<size_t>(-1);
    static thread_local unsigned resident = 0;
    if (cached_smem != smem) {
      int per_sm = 0;
      VELA_CUDA_CHECK(
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kGemvWarps * 32, smem));
      resident = static_cast<unsigned>(std::max(per_sm, 1) * n_sms());
      cached_smem = smem;
    }
    grid = std::min(blocks, resident);
  }
  if (const int cap = g_max_grid.load(std::memory_order_relaxed); cap > 0)
    grid = std::min(grid, static_cast<unsigned>(cap));
  launch_pdl(kernel, dim3(grid), dim3(kGemvWarps * 32), smem, a);
}

template <typename T, typename TC, int M, int W, GemvIn IN, GemvOut OUT>
void dispatch_c(const GemvArgs& args, int cols) {
  if constexpr (OUT == GemvOut::kSiluMul || OUT == GemvOut::kRotary) {
    launch_gemv<T, TC, M, W, 2, IN, OUT>(args);
  } else {
    if constexpr (M == 1)
      if (cols == 2) return launch_gemv<T, TC, M, W, 2, IN, OUT>(args);
    launch_gemv<T, TC, M, W, 1, IN, OUT>(args);
  }
}

// The split: W warps per column and C columns per warp (graph-timed at bench-1b's shapes,
// docs/kernels.md): wide outputs (>= 4 blocks per SM at one warp per column: gate_up, the LM head)
// W = 1 at one row, 2 at more, and 2 behind the RMSNorm at one row too (gate|up + SiLU 17.80 ->
// 17.15 us on an H100, session 61); long rows (K >= 4096: down) W = 8; the narrow short ones
// (q|k|v, o) W = 2 and, at one row, C = 2. gemv_set_split() overrides both (benchmarks);
// VELA_GEMV_NORM_WIDE_PARTS and VELA_GEMV_ADD_LONG_PARTS move the two one-row choices (A/B runs).
extern std::atomic<int> g_force_parts, g_force_cols;  // gemv.cu
int gemv_norm_wide_parts();  // gemv.cu: W of a one-row RMSNorm GEMV with a wide output (2)
int gemv_add_long_parts();   // gemv.cu: W of a one-row residual-add GEMV over long rows (8)

template <typename T, typename TC, int M, GemvIn IN, GemvOut OUT>
void dispatch_w(const GemvArgs& args) {
  const int64_t n = args.n, k = args.k;
  const int64_t sms = n_sms();
  int parts = 1, cols = 1;
  const int64_t columns = OUT == GemvOut::kSiluMul || OUT == GemvOut::kRotary ? 2 * n : n;
  if (columns / kGemvWarps >= 4 * sms) {
    parts = M > 1 ? 2 : 1;
    if (M == 1 && IN == GemvIn::kRmsNorm) parts = gemv_norm_wide_parts();
  } else if (k >= 4096) {
    parts = 8;
    // The residual-add form at one row: W = 8 (bench-1b's down 8.79 -> 8.29 us on an H100 in
    // session 61; W = 2 had won on the H200 in session 28, before the persistent grids), but
    // W = 2 behind the staged SiLU input (silu_mul_gemm_add 14.6 vs 17.5 us at W = 8).
    if (M == 1 && OUT == GemvOut::kAdd) parts = IN == GemvIn::kPlain ? gemv_add_long_parts() : 2;
  } else {
    parts = 2;
    cols = M == 1 ? 2 : 1;
  }
  while (parts > 1 && k < static_cast<int64_t>(parts) * 32 * kGemvVec) parts /= 2;
  if (g_force_parts.load(std::memory_order_relaxed) > 0) parts = g_force_parts.load();
  if (g_force_cols.load(std::memory_order_relaxed) > 0) cols = g_force_cols.load();
  switch (parts) {
    case 1:
      return dispatch_c<T, TC, M, 1, IN, OUT>(args, cols);
    case 2:
      return dispatch_c<T, TC, M, 2, IN, OUT>(args, cols);
    case 4:
      return dispatch_c<T, TC, M, 4, IN, OUT>(args, cols);
    default:
      return dispatch_c<T, TC, M, 8, IN, OUT>(args, cols);
  }
}

// Plain GEMV: M exact (1..8). Fused forms: M rounded up to 1, 2, 4 or 8 (rows past args.m idle).
template <typename T, typename TC, GemvIn IN, GemvOut OUT>
void dispatch_m(const GemvArgs& args) {
  if constexpr (IN == GemvIn::kPlain && OUT == GemvOut::kStore) {
    switch (args.m) {
      case 1:
        return dispatch_w<T, TC, 1, IN, OUT>(args);
      case 2:
        return dispatch_w<T, TC, 2, IN, OUT>(args);
      case 3:
        return dispatch_w<T, TC, 3, IN, OUT>(args);
      case 4:
        return dispatch_w<T, TC, 4, IN, OUT>(args);
      case 5:
        return dispatch_w<T, TC, 5, IN, OUT>(args);
      case 6:
        return dispatch_w<T, TC, 6, IN, OUT>(args);
      case 7:
        return dispatch_w<T, TC, 7, IN, OUT>(args);
      default:
        return dispatch_w<T, TC, 8, IN, OUT>(args);
    }
  } else {
    if (args.m == 1) return dispatch_w<T, TC, 1, IN, OUT>(args);
    if (args.m == 2) return dispatch_w<T, TC, 2, IN, OUT>(args);
    if (args.m <= 4) return dispatch_w<T, TC, 4, IN, OUT>(args);
    return dispatch_w<T, TC, 8, IN, OUT>(args);
  }
}

// Operands the GEMV (and the small-batch GEMMs, with their own max_rows) read with 16-byte loads:
// 1..max_rows bf16/f16 rows of a, a [N, k] weight of the same dtype, unit inner strides, rows of a
// and w on 16-byte boundaries.
inline bool gemv_operands_ok(const Tensor& a, int64_t k, const Tensor& w, const Tensor& c,
                             int64_t max_rows = 8) {
  const DType dt = a.dtype();
  if ((dt != DType::kBF16 && dt != DType::kF16) || w.dtype() != dt) return false;
  if (a.dim() != 2 || w.dim() != 2 || c.dim() != 2) return false;
  const int64_t m = a.size(0);
  if (m < 1 || m > max_rows || k % kGemvVec != 0 || w.size(1) != k) return false;
  if (a.stride(1) != 1 || w.stride(1) != 1 || c.stride(1) != 1) return false;
  if (a.stride(0) % kGemvVec != 0 || w.stride(0) % kGemvVec != 0) return false;
  return is_aligned(a.data_ptr(), 16) && is_aligned(w.data_ptr(), 16);
}

inline GemvArgs make_args(const Tensor& a, const Tensor& w, Tensor& c, int64_t k, float alpha) {
  GemvArgs args{};
  args.a = a.data_ptr();
  args.lda = a.stride(0);
  args.w = w.data_ptr();
  args.ldw = w.stride(0);
  args.c = c.data_ptr();
  args.ldc = c.stride(0);
  args.n = w.size(0);
  args.k = k;
  args.m = static_cast<int>(a.size(0));
  args.alpha = alpha;
  return args;
}

template <GemvIn IN, GemvOut OUT>
void dispatch_fused(DType dt, const GemvArgs& args) {
  if (dt == DType::kBF16)
    dispatch_m<bf16, bf16, IN, OUT>(args);
  else
    dispatch_m<f16, f16, IN, OUT>(args);
}

}  // namespace vela::ops::cuda::gemv_detail
