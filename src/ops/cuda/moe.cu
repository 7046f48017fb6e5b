// CUDA mixture-of-experts ops (ops/moe.h), twins of ops/cpu/moe.cpp. Nothing here reads a
// routing decision on the host: expert segments live in the device `offsets` tensor and every
// kernel finds its rows there, so a decode step stays capturable in a CUDA graph. Results are
// deterministic (no atomics; fixed reduction orders).
//
//   route           one warp per token: softmax in fp32 (probabilities kept in shared memory),
//                   k rounds of a warp argmax (ties to the lower expert), renormalisation
//   permute         one block per expert: each warp counts its chunk of the (token, slot) list
//                   (ballots), a block scan gives every warp its start, a second pass writes the
//                   rows in (token, slot) order; offsets[e] = number of ids below e
//   grouped_gemm    (a) few rows (decode): one block per (expert, 64 output columns); each warp
//                   streams a weight row once for up to 8 of the expert's rows; empty experts
//                   read nothing — the bytes moved are the routed experts' weights
//                   (b) many rows: 64 x 64 output tiles per (expert, column tile), looping over
//                   the expert's rows; tensor cores (WMMA, bf16/f16 in, fp32 accumulate), fp32
//                   CUDA cores for f32
//                   (c) prefill-sized (>= moe_cublas_min_rows() rows, not capturing, 16-bit):
//                   cuBLAS grouped GEMM (moe_cublas.cpp), one host sync on the offsets
//   wgrad           64 x 64 tiles of dw[e] per block, the segment's rows reduced in order
//   combine         one block per token, the k rows added in slot order in fp32
#include <mma.h>

#include "ops/cuda/common.cuh"
#include "ops/cuda/moe_cublas.h"
#include "ops/moe_impl.h"

namespace vela::ops::cuda {

namespace {

constexpr int kRouteWarps = 4;

template <typename T>
struct Native;
template <>
struct Native<bf16> {
  using type = __nv_bfloat16;
  static __device__ __forceinline__ type of(bf16 v) { return __ushort_as_bfloat16(v.bits); }
  static __device__ __forceinline__ type zero() { return __float2bfloat16(0.0f); }
};
template <>
struct Native<f16> {
  using type = __half;
  static __device__ __forceinline__ type of(f16 v) { return __ushort_as_half(v.bits); }
  static __device__ __forceinline__ type zero() { return __float2half(0.0f); }
};

}  // namespace

// ---- routing ----

// Warp argmax over p[0, n) (p >= 0, taken entries are -1): the largest, ties to the lower index.
static __device__ __forceinline__ int warp_argmax(const float* p, int n) {
  const int lane = threadIdx.x & 31;
  float best = -2.0f;
  int idx = 0x7fffffff;
  for (int e = lane; e < n; e += 32) {
    if (p[e] > best) {  // e increases within a lane, so ties keep the lower index
      best = p[e];
      idx = e;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ob = __shfl_xor_sync(0xffffffffu, best, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (ob > best || (ob == best && oi < idx)) {
      best = ob;
      idx = oi;
    }
  }
  return idx;
}

// Writes softmax(l) into p and returns logsumexp (whole warp).
static __device__ __forceinline__ float warp_softmax(const float* l, float* p, int n) {
  const int lane = threadIdx.x & 31;
  float m = -INFINITY;
  for (int e = lane; e < n; e += 32) m = fmaxf(m, l[e]);
  m = warp_max(m);
  float s = 0;
  for (int e = lane; e < n; e += 32) {
    const float v = __expf(l[e] - m);
    p[e] = v;
    s += v;
  }
  s = warp_sum(s);
  const float inv = 1.0f / s;
  __syncwarp();
  for (int e = lane; e < n; e += 32) p[e] *= inv;
  __syncwarp();
  return m + __logf(s);
}

static __global__ void route_kernel(const float* __restrict__ logits, float* __restrict__ weights,
                                    int32_t* __restrict__ ids, int n, int n_exp, int k,
                                    bool normalize) {
  extern __shared__ float smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = blockIdx.x * kRouteWarps + warp;
  if (row >= n) return;
  float* p = smem + warp * n_exp;
  warp_softmax(logits + static_cast<int64_t>(row) * n_exp, p, n_exp);
  float sum = 0;
  for (int j = 0; j < k; ++j) {
    const int e = warp_argmax(p, n_exp);
    const float v = p[e];
    sum += v;
    __syncwarp();
    if (lane == 0) {
      weights[static_cast<int64_t>(row) * k + j] = v;
      ids[static_cast<int64_t>(row) * k + j] = e;
      p[e] = -1.0f;
    }
    __syncwarp();
  }
  if (normalize)
    for (int j = lane; j < k; j += 32) weights[static_cast<int64_t>(row) * k + j] /= sum;
}

static __global__ void route_backward_kernel(const float* __restrict__ logits,
                                             const int32_t* __restrict__ ids,
                                             const float* __restrict__ dweights,
                                             const float* __restrict__ bias, float z_scale,
                                             float* __restrict__ dlogits, int n, int n_exp, int k,
                                             bool normalize) {
  extern __shared__ float smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = blockIdx.x * kRouteWarps + warp;
  if (row >= n) return;
  float* p = smem + warp * 2 * n_exp;
  float* dp = p + n_exp;
  const float lse = warp_softmax(logits + static_cast<int64_t>(row) * n_exp, p, n_exp);
  for (int e = lane; e < n_exp; e += 32) dp[e] = bias ? bias[e] : 0.0f;
  __syncwarp();
  const int32_t* id = ids + static_cast<int64_t>(row) * k;
  const float* g = dweights + static_cast<int64_t>(row) * k;
  if (lane == 0) {  // k is small: one lane, in slot order (as the CPU twin)
    if (normalize) {
      float s = 0, dot = 0;
      for (int j = 0; j < k; ++j) s += p[id[j]];
      for (int j = 0; j < k; ++j) dot += g[j] * p[id[j]] / s;
      for (int j = 0; j < k; ++j) dp[id[j]] += (g[j] - dot) / s;
    } else {
      for (int j = 0; j < k; ++j) dp[id[j]] += g[j];
    }
  }
  __syncwarp();
  float dot = 0;
  for (int e = lane; e < n_exp; e += 32) dot += p[e] * dp[e];
  dot = warp_sum(dot);
  const float z = 2.0f * z_scale * lse;
  for (int e = lane; e < n_exp; e += 32)
    dlogits[static_cast<int64_t>(row) * n_exp + e] = p[e] * (dp[e] - dot + z);
}

// ---- permute ----

constexpr int kPermuteWarps = 16;

static __global__ void permute_kernel(const int32_t* __restrict__ ids,
                                      int32_t* __restrict__ offsets, int32_t* __restrict__ src_rows,
                                      int32_t* __restrict__ dst_rows, int m, int k, int n_exp) {
  __shared__ int s_eq[kPermuteWarps], s_lt[kPermuteWarps];
  const int e = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int chunk = ((m + kPermuteWarps - 1) / kPermuteWarps + 31) / 32 * 32;
  const int begin = warp * chunk, end = min(m, begin + chunk);
  int eq = 0, lt = 0;
  for (int i = begin + lane; i - lane < end; i += 32) {
    const int v = i < end ? ids[i] : n_exp;
    eq += __popc(__ballot_sync(0xffffffffu, v == e));
    lt += __popc(__ballot_sync(0xffffffffu, v < e));
  }
  if (lane == 0) {
    s_eq[warp] = eq;
    s_lt[warp] = lt;
  }
  __syncthreads();
  int base = 0, before = 0;
  for (int w = 0; w < kPermuteWarps; ++w) {
    base += s_lt[w];
    if (w < warp) before += s_eq[w];
  }
  if (threadIdx.x == 0) {
    offsets[e] = base;
    if (e == n_exp - 1) offsets[n_exp] = m;
  }
  int row = base + before;
  const unsigned lower = (1u << lane) - 1u;
  for (int i = begin + lane; i - lane < end; i += 32) {
    const bool hit = i < end && ids[i] == e;
    const unsigned b = __ballot_sync(0xffffffffu, hit);
    if (hit) {
      const int r = row + __popc(b & lower);
      src_rows[r] = i / k;
      dst_rows[i] = r;
    }
    row += __popc(b);
  }
}

// ---- grouped GEMM ----

struct GemmArgs {
  int64_t m, n, k;  // a [m, k], out [m, n]
  bool trans_w;     // w [E, n, k] when true, else [E, k, n]
};

// Decode shape: block = (64 output columns, expert); warp w owns columns c0 + w, c0 + w + 8, ...
// For up to 8 rows of the segment at a time each weight row is read once (16-byte loads when
// k % 8 == 0 and aligned, else scalar).
constexpr int kGemvRows = 8;
constexpr int kGemvCols = 64;
constexpr int kGemvWarps = 8;

template <typename T, typename Tout>
static __global__ void grouped_gemv_kernel(const T* __restrict__ a, const T* __restrict__ w,
                                           const int32_t* __restrict__ offsets,
                                           Tout* __restrict__ out, GemmArgs args, bool vec) {
  const int e = blockIdx.y;
  const int lo = offsets[e], hi = offsets[e + 1];
  if (lo >= hi) return;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t k = args.k, n = args.n;
  const T* we = w + static_cast<int64_t>(e) * n * k;
  for (int r0 = lo; r0 < hi; r0 += kGemvRows) {
    const int nr = min(kGemvRows, hi - r0);
    const int64_t c_end = min(n, static_cast<int64_t>(blockIdx.x + 1) * kGemvCols);
    for (int64_t c = static_cast<int64_t>(blockIdx.x) * kGemvCols + warp; c < c_end;
         c += kGemvWarps) {
      const T* wr = we + static_cast<int64_t>(c) * k;
      float acc[kGemvRows];
#pragma unroll
      for (int r = 0; r < kGemvRows; ++r) acc[r] = 0.0f;
      if (vec) {
        constexpr int V = kVec16<T>;
        for (int64_t kk = lane * V; kk < k; kk += 32 * V) {
          float wv[V];
          load_float<V>(wr + kk, wv);
#pragma unroll
          for (int r = 0; r < kGemvRows; ++r) {
            if (r < nr) {
              float xv[V];
              load_float<V>(a + static_cast<int64_t>(r0 + r) * k + kk, xv);
#pragma unroll
              for (int i = 0; i < V; ++i) acc[r] += wv[i] * xv[i];
            }
          }
        }
      } else {
        for (int64_t kk = lane; kk < k; kk += 32) {
          const float wv = to_float(wr[kk]);
#pragma unroll
          for (int r = 0; r < kGemvRows; ++r)
            if (r < nr) acc[r] += wv * to_float(a[static_cast<int64_t>(r0 + r) * k + kk]);
        }
      }
#pragma unroll
      for (int r = 0; r < kGemvRows; ++r) {
        const float s = warp_sum(acc[r]);
        if (lane == 0 && r < nr) out[static_cast<int64_t>(r0 + r) * n + c] = from_float<Tout>(s);
      }
    }
  }
}

// Tiled shape: block = (64-column tile, expert), looping over the expert's 64-row tiles.
constexpr int kTileM = 64, kTileN = 64, kTileK = 32, kTilePad = 8;

// Element (kk, col) of op(w[e]) — the B operand, B[k][n].
template <typename T>
static __device__ __forceinline__ T load_b(const T* we, const GemmArgs& args, int64_t kk,
                                           int64_t col) {
  return args.trans_w ? we[col * args.k + kk] : we[kk * args.n + col];
}

// 16-bit inputs: WMMA 16x16x16, 4 warps each owning a 32 x 32 quarter of the tile.
template <typename T, typename Tout>
static __global__ void __launch_bounds__(128)
    grouped_gemm_wmma_kernel(const T* __restrict__ a, const T* __restrict__ w,
                             const int32_t* __restrict__ offsets, Tout* __restrict__ out,
                             GemmArgs args) {
  using namespace nvcuda;
  using N = typename Native<T>::type;
  __shared__ __align__(32) N sa[kTileM][kTileK + kTilePad];
  __shared__ __align__(32) N sb[kTileN][kTileK + kTilePad];  // [col][k]: B column-major
  __shared__ __align__(32) float sc[kTileM][kTileN + 4];
  const int e = blockIdx.y;
  const int lo = offsets[e], hi = offsets[e + 1];
  if (lo >= hi) return;
  const int warp = threadIdx.x >> 5;
  const int wm = (warp >> 1) * 32, wn = (warp & 1) * 32;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kTileN;
  const T* we = w + static_cast<int64_t>(e) * args.n * args.k;
  for (int m0 = lo; m0 < hi; m0 += kTileM) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
    for (int64_t k0 = 0; k0 < args.k; k0 += kTileK) {
      for (int idx = threadIdx.x; idx < kTileM * kTileK; idx += blockDim.x) {
        const int r = idx / kTileK, kk = idx % kTileK;
        const int64_t gr = m0 + r, gk = k0 + kk;
        sa[r][kk] =
            (gr < hi && gk < args.k) ? Native<T>::of(a[gr * args.k + gk]) : Native<T>::zero();
      }
      if (args.trans_w) {
        for (int idx = threadIdx.x; idx < kTileN * kTileK; idx += blockDim.x) {
          const int cc = idx / kTileK, kk = idx % kTileK;  // k fastest: coalesced along w rows
          const int64_t gc = c0 + cc, gk = k0 + kk;
          sb[cc][kk] = (gc < args.n && gk < args.k) ? Native<T>::of(load_b(we, args, gk, gc))
                                                    : Native<T>::zero();
        }
      } else {
        for (int idx = threadIdx.x; idx < kTileN * kTileK; idx += blockDim.x) {
          const int cc = idx % kTileN, kk = idx / kTileN;  // n fastest: coalesced along w rows
          const int64_t gc = c0 + cc, gk = k0 + kk;
          sb[cc][kk] = (gc < args.n && gk < args.k) ? Native<T>::of(load_b(we, args, gk, gc))
                                                    : Native<T>::zero();
        }
      }
      __syncthreads();
#pragma unroll
      for (int ks = 0; ks < kTileK; ks += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, N, wmma::row_major> fa[2];
        wmma::fragment<wmma::matrix_b, 16, 16, 16, N, wmma::col_major> fb[2];
#pragma unroll
        for (int i = 0; i < 2; ++i)
          wmma::load_matrix_sync(fa[i], &sa[wm + 16 * i][ks], kTileK + kTilePad);
#pragma unroll
        for (int j = 0; j < 2; ++j)
          wmma::load_matrix_sync(fb[j], &sb[wn + 16 * j][ks], kTileK + kTilePad);
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
      }
      __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j)
        wmma::store_matrix_sync(&sc[wm + 16 * i][wn + 16 * j], acc[i][j], kTileN + 4,
                                wmma::mem_row_major);
    __syncthreads();
    for (int idx = threadIdx.x; idx < kTileM * kTileN; idx += blockDim.x) {
      const int r = idx / kTileN, cc = idx % kTileN;
      const int64_t gr = m0 + r, gc = c0 + cc;
      if (gr < hi && gc < args.n) out[gr * args.n + gc] = from_float<Tout>(sc[r][cc]);
    }
    __syncthreads();
  }
}

// f32 inputs: 256 threads, each 4 x 4 outputs of the 64 x 64 tile, fp32 FMA.
template <typename T, typename Tout>
static __global__ void __launch_bounds__(256)
    grouped_gemm_simt_kernel(const T* __restrict__ a, const T* __restrict__ w,
                             const int32_t* __restrict__ offsets, Tout* __restrict__ out,
                             GemmArgs args) {
  __shared__ float sa[kTileK][kTileM + 4];  // [k][row]
  __shared__ float sb[kTileK][kTileN + 4];  // [k][col]
  const int e = blockIdx.y;
  const int lo = offsets[e], hi = offsets[e + 1];
  if (lo >= hi) return;
  const int tr = (threadIdx.x / 16) * 4, tc = (threadIdx.x % 16) * 4;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kTileN;
  const T* we = w + static_cast<int64_t>(e) * args.n * args.k;
  for (int m0 = lo; m0 < hi; m0 += kTileM) {
    float acc[4][4] = {};
    for (int64_t k0 = 0; k0 < args.k; k0 += kTileK) {
      for (int idx = threadIdx.x; idx < kTileM * kTileK; idx += blockDim.x) {
        const int r = idx / kTileK, kk = idx % kTileK;
        const int64_t gr = m0 + r, gk = k0 + kk;
        sa[kk][r] = (gr < hi && gk < args.k) ? to_float(a[gr * args.k + gk]) : 0.0f;
      }
      for (int idx = threadIdx.x; idx < kTileN * kTileK; idx += blockDim.x) {
        int cc, kk;
        if (args.trans_w) {
          cc = idx / kTileK;
          kk = idx % kTileK;
        } else {
          cc = idx % kTileN;
          kk = idx / kTileN;
        }
        const int64_t gc = c0 + cc, gk = k0 + kk;
        sb[kk][cc] = (gc < args.n && gk < args.k) ? to_float(load_b(we, args, gk, gc)) : 0.0f;
      }
      __syncthreads();
#pragma unroll 8
      for (int kk = 0; kk < kTileK; ++kk) {
        float av[4], bv[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          av[i] = sa[kk][tr + i];
          bv[i] = sb[kk][tc + i];
        }
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
      }
      __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t gr = m0 + tr + i, gc = c0 + tc + j;
        if (gr < hi && gc < args.n) out[gr * args.n + gc] = from_float<Tout>(acc[i][j]);
      }
  }
}

// dw[e][nn][kk] += sum over the segment's rows r (in order) of dy[r][nn] * x[r][kk].
constexpr int kWgradRows = 16;

template <typename T>
static __global__ void __launch_bounds__(256)
    grouped_wgrad_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                         const int32_t* __restrict__ offsets, float* __restrict__ dw, int64_t n,
                         int64_t k) {
  __shared__ float sd[kWgradRows][kTileN + 4];
  __shared__ float sx[kWgradRows][kTileN + 4];
  const int e = blockIdx.z;
  const int lo = offsets[e], hi = offsets[e + 1];
  if (lo >= hi) return;
  const int tr = (threadIdx.x / 16) * 4, tc = (threadIdx.x % 16) * 4;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kTileN,
                k0 = static_cast<int64_t>(blockIdx.y) * kTileN;
  float acc[4][4] = {};
  for (int r0 = lo; r0 < hi; r0 += kWgradRows) {
    for (int idx = threadIdx.x; idx < kWgradRows * kTileN; idx += blockDim.x) {
      const int r = idx / kTileN, c = idx % kTileN;
      const int64_t gr = r0 + r;
      sd[r][c] = (gr < hi && n0 + c < n) ? to_float(dy[gr * n + n0 + c]) : 0.0f;
      sx[r][c] = (gr < hi && k0 + c < k) ? to_float(x[gr * k + k0 + c]) : 0.0f;
    }
    __syncthreads();
#pragma unroll 4
    for (int r = 0; r < kWgradRows; ++r) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += sd[r][tr + i] * sx[r][tc + j];
    }
    __syncthreads();
  }
  float* dwe = dw + static_cast<int64_t>(e) * n * k;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t gn = n0 + tr + i, gk = k0 + tc + j;
      if (gn < n && gk < k) dwe[gn * k + gk] += acc[i][j];
    }
}

// ---- combine ----

template <typename T>
static __global__ void combine_kernel(const T* __restrict__ y, const int32_t* __restrict__ dst,
                                      const float* __restrict__ weights,
                                      const T* __restrict__ shared,
                                      const float* __restrict__ shared_logit, T* __restrict__ out,
                                      int64_t h, int k) {
  const int64_t t = blockIdx.x;
  float gate = 0;
  if (shared) gate = 1.0f / (1.0f + __expf(-shared_logit[t]));
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    float acc = 0;
    for (int j = 0; j < k; ++j) {
      const float wj = weights ? weights[t * k + j] : 1.0f;
      acc += wj * to_float(y[static_cast<int64_t>(dst[t * k + j]) * h + c]);
    }
    if (shared) acc += gate * to_float(shared[t * h + c]);
    out[t * h + c] = from_float<T>(acc);
  }
}

template <typename T>
static __global__ void combine_backward_kernel(
    const T* __restrict__ dout, const T* __restrict__ y, const int32_t* __restrict__ dst,
    const float* __restrict__ weights, const T* __restrict__ shared,
    const float* __restrict__ shared_logit, T* __restrict__ dy, float* __restrict__ dweights,
    T* __restrict__ dshared, float* __restrict__ dshared_logit, int64_t h, int k) {
  __shared__ float red[32];
  const int64_t t = blockIdx.x;
  const T* d = dout + t * h;
  for (int j = 0; j < k; ++j) {
    const int64_t row = dst[t * k + j];
    const float wj = weights[t * k + j];
    float dot = 0;
    for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
      const float dv = to_float(d[c]);
      dot += dv * to_float(y[row * h + c]);
      dy[row * h + c] = from_float<T>(wj * dv);
    }
    dot = block_sum(dot, red);
    if (threadIdx.x == 0) dweights[t * k + j] = dot;
  }
  if (shared) {
    const float g = 1.0f / (1.0f + __expf(-shared_logit[t]));
    float dot = 0;
    for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
      const float dv = to_float(d[c]);
      dot += dv * to_float(shared[t * h + c]);
      dshared[t * h + c] = from_float<T>(g * dv);
    }
    dot = block_sum(dot, red);
    if (threadIdx.x == 0) dshared_logit[t] = dot * g * (1.0f - g);
  }
}

// ---- launchers ----

void moe_route(const Tensor& logits, int64_t k, bool normalize, Tensor& weights,
               Tensor& expert_ids) {
  DeviceGuard guard(logits.device().index);
  const int n = static_cast<int>(logits.size(0)), n_exp = static_cast<int>(logits.size(1));
  const size_t smem = sizeof(float) * kRouteWarps * n_exp;
  VELA_CHECK_T(Unsupported, smem <= 48 * 1024, "moe_route: ", n_exp, " experts is too many");
  route_kernel<<<static_cast<unsigned>(ceil_div(n, kRouteWarps)), 32 * kRouteWarps, smem,
                 current_stream()>>>(logits.data<float>(), weights.data<float>(),
                                     expert_ids.data<int32_t>(), n, n_exp, static_cast<int>(k),
                                     normalize);
  VELA_CUDA_CHECK_LAUNCH();
}

void moe_route_backward(const Tensor& logits, const Tensor& expert_ids, const Tensor& dweights,
                        bool normalize, const Tensor& dprob_bias, float z_scale, Tensor& dlogits) {
  DeviceGuard guard(logits.device().index);
  const int n = static_cast<int>(logits.size(0)), n_exp = static_cast<int>(logits.size(1));
  const size_t smem = sizeof(float) * kRouteWarps * 2 * n_exp;
  VELA_CHECK_T(Unsupported, smem <= 48 * 1024, "moe_route_backward: ", n_exp,
               " experts is too many");
  route_backward_kernel<<<static_cast<unsigned>(ceil_div(n, kRouteWarps)), 32 * kRouteWarps, smem,
                          current_stream()>>>(
      logits.data<float>(), expert_ids.data<int32_t>(), dweights.data<float>(),
      dprob_bias.defined() ? dprob_bias.data<float>() : nullptr, z_scale, dlogits.data<float>(), n,
      n_exp, static_cast<int>(expert_ids.size(1)), normalize);
  VELA_CUDA_CHECK_LAUNCH();
}

void moe_permute(const Tensor& expert_ids, int64_t n_experts, Tensor& offsets, Tensor& src_rows,
                 Tensor& dst_rows) {
  DeviceGuard guard(expert_ids.device().index);
  const int m = static_cast<int>(expert_ids.numel()), k = static_cast<int>(expert_ids.size(1));
  permute_kernel<<<static_cast<unsigned>(n_experts), 32 * kPermuteWarps, 0, current_stream()>>>(
      expert_ids.data<int32_t>(), offsets.data<int32_t>(), src_rows.data<int32_t>(),
      dst_rows.data<int32_t>(), m, k, static_cast<int>(n_experts));
  VELA_CUDA_CHECK_LAUNCH();
}

namespace {

template <typename T, typename Tout>
void launch_grouped_gemm(const Tensor& a, const Tensor& w, const Tensor& offsets, bool trans_w,
                         Tensor& out) {
  GemmArgs args{a.size(0), out.size(1), a.size(1), trans_w};
  const unsigned n_exp = static_cast<unsigned>(w.size(0));
  const T* pa = static_cast<const T*>(a.data_ptr());
  const T* pw = static_cast<const T*>(w.data_ptr());
  Tout* po = static_cast<Tout*>(out.data_ptr());
  const int32_t* po_off = offsets.data<int32_t>();
  // Many rows (prefill, training) outside a graph capture: cuBLAS grouped GEMM (moe_cublas.h).
  const int64_t cublas_rows = moe_cublas_min_rows();
  if (cublas_rows > 0 && args.m >= cublas_rows && grouped_gemm_cublas(a, w, offsets, trans_w, out))
    return;
  // Few rows in all (decode): stream each weight row once per 8 rows of its expert.
  if (trans_w && args.m <= kGemvRows * static_cast<int64_t>(n_exp)) {
    const bool vec = args.k % kVec16<T> == 0 && is_aligned(pa, 16) && is_aligned(pw, 16);
    dim3 grid(static_cast<unsigned>(ceil_div(args.n, kGemvCols)), n_exp);
    grouped_gemv_kernel<T, Tout>
        <<<grid, 32 * kGemvWarps, 0, current_stream()>>>(pa, pw, po_off, po, args, vec);
  } else if constexpr (std::is_same_v<T, float>) {
    dim3 grid(static_cast<unsigned>(ceil_div(args.n, kTileN)), n_exp);
    grouped_gemm_simt_kernel<T, Tout><<<grid, 256, 0, current_stream()>>>(pa, pw, po_off, po, args);
  } else {
    dim3 grid(static_cast<unsigned>(ceil_div(args.n, kTileN)), n_exp);
    grouped_gemm_wmma_kernel<T, Tout><<<grid, 128, 0, current_stream()>>>(pa, pw, po_off, po, args);
  }
  VELA_CUDA_CHECK_LAUNCH();
}

}  // namespace

void grouped_gemm(const Tensor& a, const Tensor& w, const Tensor& offsets, bool trans_w,
                  Tensor& out) {
  DeviceGuard guard(a.device().index);
  dispatch_float(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (out.dtype() == DType::kF32)
      launch_grouped_gemm<T, float>(a, w, offsets, trans_w, out);
    else
      launch_grouped_gemm<T, T>(a, w, offsets, trans_w, out);
  });
}

void grouped_gemm_wgrad(const Tensor& dy, const Tensor& x, const Tensor& offsets, Tensor& dw) {
  DeviceGuard guard(dy.device().index);
  const int64_t n = dy.size(1), k = x.size(1);
  dim3 grid(static_cast<unsigned>(ceil_div(n, kTileN)), static_cast<unsigned>(ceil_div(k, kTileN)),
            static_cast<unsigned>(dw.size(0)));
  dispatch_float(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    grouped_wgrad_kernel<T><<<grid, 256, 0, current_stream()>>>(
        static_cast<const T*>(dy.data_ptr()), static_cast<const T*>(x.data_ptr()),
        offsets.data<int32_t>(), dw.data<float>(), n, k);
  });
  VELA_CUDA_CHECK_LAUNCH();
}

void moe_combine(const Tensor& y, const Tensor& dst_rows, const Tensor& weights,
                 const Tensor& shared, const Tensor& shared_logit, Tensor& out) {
  DeviceGuard guard(y.device().index);
  const int64_t h = y.size(1);
  const int threads = row_block_threads(h, 2, 256);
  dispatch_float(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    combine_kernel<T><<<static_cast<unsigned>(out.size(0)), threads, 0, current_stream()>>>(
        static_cast<const T*>(y.data_ptr()), dst_rows.data<int32_t>(),
        weights.defined() ? weights.data<float>() : nullptr,
        shared.defined() ? static_cast<const T*>(shared.data_ptr()) : nullptr,
        shared.defined() ? shared_logit.data<float>() : nullptr, static_cast<T*>(out.data_ptr()), h,
        static_cast<int>(dst_rows.size(1)));
  });
  VELA_CUDA_CHECK_LAUNCH();
}

void moe_combine_backward(const Tensor& dout, const Tensor& y, const Tensor& dst_rows,
                          const Tensor& weights, const Tensor& shared, const Tensor& shared_logit,
                          Tensor& dy, Tensor& dweights, Tensor& dshared, Tensor& dshared_logit) {
  DeviceGuard guard(y.device().index);
  const int64_t h = y.size(1);
  const int threads = row_block_threads(h, 2, 256);
  dispatch_float(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const bool s = shared.defined();
    combine_backward_kernel<T>
        <<<static_cast<unsigned>(dout.size(0)), threads, 0, current_stream()>>>(
            static_cast<const T*>(dout.data_ptr()), static_cast<const T*>(y.data_ptr()),
            dst_rows.data<int32_t>(), weights.data<float>(),
            s ? static_cast<const T*>(shared.data_ptr()) : nullptr,
            s ? shared_logit.data<float>() : nullptr, static_cast<T*>(dy.data_ptr()),
            dweights.data<float>(), s ? static_cast<T*>(dshared.data_ptr()) : nullptr,
            s ? dshared_logit.data<float>() : nullptr, h, static_cast<int>(dst_rows.size(1)));
  });
  VELA_CUDA_CHECK_LAUNCH();
}

}  // namespace vela::ops::cuda
