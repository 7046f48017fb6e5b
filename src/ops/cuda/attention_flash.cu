// Fused flash-style dense causal attention of the training path (FlashAttention-2 algorithm, our
// own code): forward and a deterministic backward on tensor cores (bf16 / f16 m16n8k16 mma.sync,
// fp32 accumulation), any head_dim that is a multiple of 8 in [32, 256], GQA (kv head = h / n_rep),
// packed documents.
//
// Tiles: 64 query rows x 64 keys everywhere (kTile), 4 warps of 16 rows per block. Operand tiles
// go through swizzled shared memory with cp.async, double buffered (the next live tile loads while
// the current one is multiplied). Score accumulators turn straight into A fragments of the next
// product (no shared-memory round trip for P or dS).
//
// Masks and tile skipping: with BM == BN a key tile is causal-masked only on the diagonal. For
// documents a pre-kernel stores each 64-position tile's [min, max] doc id; a (query tile, key tile)
// pair whose ranges are disjoint is skipped (no element can match), a pair whose ranges are one and
// the same single id needs no per-element doc test, anything else is masked element by element
// (doc ids need not be sorted; sorted runs just skip more).
//
//   forward     block (query tile, head, batch): online softmax in the log2 domain over the live
//               key tiles, writes out and (optionally) lse = natural-log log-sum-exp, [B, H, T].
//   backward    (0) dot kernel: Dv = rowsum(dO * O) per (b, h, t) into [B, H, T] f32;
//               (1) dQ kernel, block (query tile, head, batch): P = exp(S - lse) recomputed,
//                   dS = P (dO V^T - Dv), dQ = scale * sum over key tiles of dS K;
//               (2) dK/dV kernel, block (key tile, kv head, batch): each warp owns 16 keys and
//                   loops over the group's query heads and the query tiles at or after the key tile
//                   computing S^T = K Q^T and dP^T = V dO^T itself, dV += P^T dO, dK += dS^T Q in
//                   registers; dK = scale * dK.
//               No atomics and fixed loop orders: the gradients are bit-identical run to run.
// Without a saved lse the backward first runs the forward kernel with the output store disabled.
//
// Head sizes: the kernels are compiled for tile widths D = 32, 64, 128, 256 (kExact: head_dim ==
// D, the fast paths) and padded tiles 64, 128, 256 for the other multiples of 8 (columns past
// head_dim zero-filled on load, skipped in the products where a whole 16-column step is padding,
// never stored; attention_common.cuh). At D = 256 the A operands are not held in registers across
// the key / query loop but re-read from shared memory per 16-column step (kFragRegs false), and
// the dK/dV kernel splits the 256 output columns over two blocks (kDOut = 128 each: both compute
// the full S^T and dP^T, each accumulates its half of dK and dV), since 2 x 128 fp32 accumulator
// registers per thread do not fit. Shared memory at D = 256: 160 / 192 / 194 KiB (fwd / dQ / dKV).
#include <cmath>

#include "ops/cuda/attention_common.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_backward_ops.h"

namespace vela::ops::cuda {

namespace {

constexpr int kTile = 64;  // query rows per query tile = keys per key tile
constexpr int kFlashThreads = 128;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
static_assert(kTile == 16 * (kFlashThreads / 32), "one warp per 16 rows");

struct FlashParams {
  const void* q;           // [B, T, H, D]
  const void* k;           // [B, T, Hkv, D]
  const void* v;           // [B, T, Hkv, D]
  const void* dout;        // [B, T, H, D]
  const int32_t* docs;     // [B, T] or null
  const int2* doc_ranges;  // [B, n_tiles] (min, max) doc id per tile, or null
  float* lse;              // [B, H, T] natural log; written by the forward, read by the backward
  const float* dvals;      // [B, H, T] rowsum(dO * O)
  void* out;               // [B, T, H, D] (forward; null: statistics only)
  void* dq;                // [B, T, H, D]
  void* dk;                // [B, T, Hkv, D]
  void* dv;                // [B, T, Hkv, D]
  int32_t n_seq, n_heads, n_kv_heads, group, n_tiles;
  int32_t head_dim;  // <= the kernels' tile width D
  float scale, scale_log2;
};

// Whether the kernels keep their A fragments (Q, dO, K, V rows of the warp) in registers.
template <int D>
constexpr bool frags_in_registers() {
  return D <= 128;
}
// Output columns of dK / dV per block (D / kDOut blocks per key tile and kv head).
template <int D>
constexpr int dkv_cols() {
  return D <= 128 ? D : 128;
}

template <int D>
constexpr int fwd_smem_bytes() {
  return (kTile * D + 4 * kTile * D) * 2;  // Q + 2 x (K, V)
}
template <int D>
constexpr int dq_smem_bytes() {
  return (2 * kTile * D + 4 * kTile * D) * 2;  // Q, dO + 2 x (K, V)
}
template <int D>
constexpr int dkv_smem_bytes() {
  return (2 * kTile * D + 4 * kTile * D) * 2 + 2 * 3 * kTile * 4;  // K, V + 2 x (Q, dO, stats)
}

__device__ __forceinline__ bool ranges_disjoint(int2 a, int2 b) { return a.y < b.x || b.y < a.x; }
__device__ __forceinline__ bool ranges_one_doc(int2 a, int2 b) {
  return a.x == a.y && b.x == b.y && a.x == b.x;
}

// Copies rows [row0, row0 + kTile) of a [T, row_stride] operand (columns 0..hd-1 of each row;
// columns hd..D-1 and rows past n_seq zero-filled) into a swizzled [kTile][D] shared tile.
template <typename T, int D>
__device__ __forceinline__ void load_tile(T* dst, const T* base, int64_t row_stride, int row0,
                                          int n_seq, int hd) {
  constexpr int kChunks = D / 8;
  constexpr int kLoads = kTile * kChunks / kFlashThreads;
  static_assert(kLoads >= 1, "tile shape");
#pragma unroll
  for (int i = 0; i < kLoads; ++i) {
    const int idx = threadIdx.x + i * kFlashThreads, r = idx / kChunks, c = idx % kChunks;
    const bool valid = row0 + r < n_seq && c * 8 < hd;
    cp_async16(dst + smem_swizzle<D>(r, c),
               base + (valid ? static_cast<int64_t>(row0 + r) * row_stride + c * 8 : 0), valid);
  }
}

// acc[2 * nt2 + {0, 1}] += A (16 x D, fragments a[D / 16]) * B^T for the 64 rows of a row-major
// [kTile][D] shared tile b_tile (B = keys / queries as the n dimension): a 16 x 64 product. Only
// the 16-column steps that hold some of the hd live columns are multiplied.
template <typename T, int D>
__device__ __forceinline__ void mma_rows_x_tile(float (&acc)[kTile / 8][4],
                                                const uint32_t (&a)[D / 16][4], const T* b_tile,
                                                int lane, int hd) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    if (kk * 16 >= hd) break;
#pragma unroll
    for (int nt2 = 0; nt2 < kTile / 16; ++nt2) {
      uint32_t b[4];
      const int row = nt2 * 16 + (lane & 7) + ((lane >> 4) << 3);
      ldmatrix_x4(b, b_tile + smem_swizzle<D>(row, 2 * kk + ((lane >> 3) & 1)));
      mma_16816<T>(acc[2 * nt2], a[kk], b[0], b[1]);
      mma_16816<T>(acc[2 * nt2 + 1], a[kk], b[2], b[3]);
    }
  }
}

// The same product with A = the warp's 16 rows of the swizzled [kTile][D] shared tile a_tile,
// read per 16-column step (D = 256: no registers for the whole A next to the accumulators).
template <typename T, int D>
__device__ __forceinline__ void mma_smem_rows_x_tile(float (&acc)[kTile / 8][4], const T* a_tile,
                                                     const T* b_tile, int warp, int lane, int hd) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    if (kk * 16 >= hd) break;
    uint32_t a[4];
    ldmatrix_x4(a, a_tile + smem_swizzle<D>(warp * 16 + (lane & 15), 2 * kk + (lane >> 4)));
#pragma unroll
    for (int nt2 = 0; nt2 < kTile / 16; ++nt2) {
      uint32_t b[4];
      const int row = nt2 * 16 + (lane & 7) + ((lane >> 4) << 3);
      ldmatrix_x4(b, b_tile + smem_swizzle<D>(row, 2 * kk + ((lane >> 3) & 1)));
      mma_16816<T>(acc[2 * nt2], a, b[0], b[1]);
      mma_16816<T>(acc[2 * nt2 + 1], a, b[2], b[3]);
    }
  }
}

// S = A B^T over the warp's 16 rows of a_tile (fragments `frags` when they are held in registers).
template <typename T, int D, typename Frags>
__device__ __forceinline__ void mma_a_x_tile(float (&acc)[kTile / 8][4], const Frags& frags,
                                             const T* a_tile, const T* b_tile, int warp, int lane,
                                             int hd) {
  if constexpr (frags_in_registers<D>()) {
    mma_rows_x_tile<T, D>(acc, frags, b_tile, lane, hd);
  } else {
    mma_smem_rows_x_tile<T, D>(acc, a_tile, b_tile, warp, lane, hd);
  }
}

// acc (16 x kDOut) += P (16 x 64, the C fragments of a 16 x 64 product) * B[:, c0 : c0 + kDOut],
// B the row-major [kTile][D] shared tile b_tile (its 64 rows are the k dimension); 16-column steps
// entirely past hd are skipped (their accumulators stay zero).
template <typename T, int D, int kDOut = D>
__device__ __forceinline__ void mma_scores_x_tile(float (&acc)[kDOut / 8][4],
                                                  const float (&p)[kTile / 8][4], const T* b_tile,
                                                  int lane, int hd, int c0 = 0) {
#pragma unroll
  for (int kk = 0; kk < kTile / 16; ++kk) {
    const uint32_t pa[4] = {
        pack2<T>(p[2 * kk][0], p[2 * kk][1]), pack2<T>(p[2 * kk][2], p[2 * kk][3]),
        pack2<T>(p[2 * kk + 1][0], p[2 * kk + 1][1]), pack2<T>(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
    for (int dt2 = 0; dt2 < kDOut / 16; ++dt2) {
      if (c0 + dt2 * 16 >= hd) break;
      uint32_t b[4];
      const int row = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
      ldmatrix_x4_trans(b, b_tile + smem_swizzle<D>(row, c0 / 8 + 2 * dt2 + (lane >> 4)));
      mma_16816<T>(acc[2 * dt2], pa, b[0], b[1]);
      mma_16816<T>(acc[2 * dt2 + 1], pa, b[2], b[3]);
    }
  }
}

// A fragments of the warp's 16 rows of a swizzled [kTile][D] shared tile.
template <int D, typename T, int N>
__device__ __forceinline__ void load_a_frags(uint32_t (&a)[N][4], const T* tile, int warp,
                                             int lane) {
  if constexpr (frags_in_registers<D>()) {  // else read per step (mma_a_x_tile)
    static_assert(N == D / 16, "fragment count");
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      ldmatrix_x4(a[kk], tile + smem_swizzle<D>(warp * 16 + (lane & 15), 2 * kk + (lane >> 4)));
  }
}

// A-fragment registers of one operand: D / 16 fragments, or a placeholder when read per step.
template <int D>
using AFrags = uint32_t[frags_in_registers<D>() ? D / 16 : 1][4];

template <int N>
__device__ __forceinline__ void zero(float (&x)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i) x[i][0] = x[i][1] = x[i][2] = x[i][3] = 0.0f;
}

}  // namespace

// [min, max] doc id of every 64-position tile of every batch row: ranges[b * n_tiles + tile].
static __global__ void doc_ranges_kernel(const int32_t* docs, int n_seq, int n_tiles, int n_batch,
                                         int2* ranges) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n_tiles * n_batch) return;
  const int b = i / n_tiles, t0 = (i % n_tiles) * kTile, t1 = min(t0 + kTile, n_seq);
  const int32_t* row = docs + static_cast<int64_t>(b) * n_seq;
  int lo = row[t0], hi = row[t0];
  for (int t = t0 + 1; t < t1; ++t) {
    lo = min(lo, row[t]);
    hi = max(hi, row[t]);
  }
  ranges[i] = make_int2(lo, hi);
}

// dvals[b, h, t] = dout[b, t, h, :] . out[b, t, h, :] in fp32; one warp per (b, t, h) row.
template <typename T>
static __global__ void flash_dot_kernel(const T* out, const T* dout, float* dvals, int64_t n_rows,
                                        int n_seq, int n_heads, int head_dim) {
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (row >= n_rows) return;
  const T* o = out + row * head_dim;
  const T* d = dout + row * head_dim;
  float s = 0.0f;
  for (int i = lane; i < head_dim; i += 32) s += to_float(o[i]) * to_float(d[i]);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
  if (lane == 0) {
    const int64_t h = row % n_heads, t = (row / n_heads) % n_seq, b = row / (n_heads * n_seq);
    dvals[(b * n_heads + h) * n_seq + t] = s;
  }
}

template <typename T, int D, bool kExact>
static __global__ void __launch_bounds__(kFlashThreads) flash_fwd_kernel(FlashParams a) {
  const int hd = kExact ? D : a.head_dim;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sq = reinterpret_cast<T*>(smem_raw);  // [kTile][D]
  T* sk = sq + kTile * D;                  // [2][kTile][D]
  T* sv = sk + 2 * kTile * D;              // [2][kTile][D]

  const int qt = gridDim.x - 1 - blockIdx.x;  // the costliest (last) query tiles first
  const int h = blockIdx.y, b = blockIdx.z, g = h / a.group;
  const int n_seq = a.n_seq, q0 = qt * kTile, n_rows = min(kTile, n_seq - q0);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int64_t q_stride = static_cast<int64_t>(a.n_heads) * hd;
  const int64_t kv_stride = static_cast<int64_t>(a.n_kv_heads) * hd;
  const T* qbase = static_cast<const T*>(a.q) + static_cast<int64_t>(b) * n_seq * q_stride + h * hd;
  const T* kbase =
      static_cast<const T*>(a.k) + static_cast<int64_t>(b) * n_seq * kv_stride + g * hd;
  const T* vbase =
      static_cast<const T*>(a.v) + static_cast<int64_t>(b) * n_seq * kv_stride + g * hd;
  const int32_t* doc_row = a.docs ? a.docs + static_cast<int64_t>(b) * n_seq : nullptr;
  const int2* ranges = a.doc_ranges ? a.doc_ranges + static_cast<int64_t>(b) * a.n_tiles : nullptr;
  const int2 q_range = ranges ? ranges[qt] : make_int2(0, 0);

  const int last_kt = qt;  // equal query/key tiles: the diagonal is the last live tile
  auto next_live = [&](int kt) {
    while (ranges != nullptr && kt < last_kt && ranges_disjoint(q_range, ranges[kt])) ++kt;
    return kt;  // the diagonal tile always overlaps the query tile's own docs
  };

  load_tile<T, D>(sq, qbase, q_stride, q0, n_seq, hd);
  int kt = next_live(0);
  load_tile<T, D>(sk, kbase, kv_stride, kt * kTile, n_seq, hd);
  load_tile<T, D>(sv, vbase, kv_stride, kt * kTile, n_seq, hd);
  cp_async_commit();

  // This thread's rows (C-fragment rows lane/4 and lane/4 + 8 of the warp's 16) and positions;
  // rows past the end take the last row's position (harmless, never stored).
  const int row_a = warp * 16 + (lane >> 2), row_b = row_a + 8;
  const int pos_a = q0 + min(row_a, n_rows - 1), pos_b = q0 + min(row_b, n_rows - 1);
  const int doc_a = doc_row ? doc_row[pos_a] : 0, doc_b = doc_row ? doc_row[pos_b] : 0;

  AFrags<D> qf;
  float o[D / 8][4];
  zero(o);
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  for (int buf = 0, first = 1; kt <= last_kt; buf ^= 1, first = 0) {
    cp_async_wait<0>();
    __syncthreads();  // tile kt landed for all threads; everyone is done with the previous one
    if (first) load_a_frags<D>(qf, sq, warp, lane);
    const int kt_next = next_live(kt + 1);
    if (kt_next <= last_kt) {
      load_tile<T, D>(sk + (buf ^ 1) * kTile * D, kbase, kv_stride, kt_next * kTile, n_seq, hd);
      load_tile<T, D>(sv + (buf ^ 1) * kTile * D, vbase, kv_stride, kt_next * kTile, n_seq, hd);
    }
    cp_async_commit();

    float s[kTile / 8][4];
    zero(s);
    mma_a_x_tile<T, D>(s, qf, sq, sk + buf * kTile * D, warp, lane, hd);

    const int kb = kt * kTile;
    const bool causal = kt == qt;
    const bool by_doc = ranges != nullptr && !ranges_one_doc(q_range, ranges[kt]);
    if (causal || by_doc) {
#pragma unroll
      for (int nt = 0; nt < kTile / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = kb + nt * 8 + 2 * (lane & 3) + (e & 1);
          const int pos = e < 2 ? pos_a : pos_b;
          if (key > pos || (by_doc && doc_row[key] != (e < 2 ? doc_a : doc_b)))
            s[nt][e] = -INFINITY;
        }
      }
    }
    // Online softmax per row (a row's 64 scores are spread over the 4 lanes of a quad).
    online_softmax_tile(s, m, l, o, a.scale_log2);
    mma_scores_x_tile<T, D>(o, s, sv + buf * kTile * D, lane, hd);
    kt = kt_next;
  }
  cp_async_wait<0>();

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = r == 0 ? row_a : row_b;
    if (row >= n_rows) continue;
    if (a.lse != nullptr && (lane & 3) == 0)
      a.lse[(static_cast<int64_t>(b) * a.n_heads + h) * n_seq + q0 + row] =
          (m[r] + log2f(l[r])) * kLn2;
    if (a.out == nullptr) continue;
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    T* orow =
        static_cast<T*>(a.out) + (static_cast<int64_t>(b) * n_seq + q0 + row) * q_stride + h * hd;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      if (dt * 8 >= hd) break;
      *reinterpret_cast<uint32_t*>(orow + dt * 8 + 2 * (lane & 3)) =
          pack2<T>(o[dt][2 * r] * inv, o[dt][2 * r + 1] * inv);
    }
  }
}

// dQ for one (query tile, head, batch): S = Q K^T, P = exp(S - lse), dP = dO V^T,
// dS = P (dP - Dv), dQ += dS K over the live key tiles; dQ = scale * dQ.
//
// Occupancy: uncapped, the d64 kernel takes 234 registers, i.e. 2 blocks (8 warps) per SM, too few
// to hide the ldmatrix -> mma -> exp2 latencies of 16-row warp tiles. Capped at 168 (3 blocks,
// 12 warps; ptxas spills 16 bytes) it runs 0.19 ms (~20%) faster at bench-1b's shape. d128 stays
// uncapped (already at 255 with spills).
template <int D>
constexpr int dq_min_blocks() {
  return D <= 64 ? 3 : 1;
}

template <typename T, int D, bool kExact>
static __global__ void __launch_bounds__(kFlashThreads, dq_min_blocks<D>())
    flash_bwd_dq_kernel(FlashParams a) {
  const int hd = kExact ? D : a.head_dim;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sq = reinterpret_cast<T*>(smem_raw);  // [kTile][D]
  T* sdo = sq + kTile * D;                 // [kTile][D]
  T* sk = sdo + kTile * D;                 // [2][kTile][D]
  T* sv = sk + 2 * kTile * D;              // [2][kTile][D]

  const int qt = gridDim.x - 1 - blockIdx.x;
  const int h = blockIdx.y, b = blockIdx.z, g = h / a.group;
  const int n_seq = a.n_seq, q0 = qt * kTile, n_rows = min(kTile, n_seq - q0);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int64_t q_stride = static_cast<int64_t>(a.n_heads) * hd;
  const int64_t kv_stride = static_cast<int64_t>(a.n_kv_heads) * hd;
  const int64_t q_off = static_cast<int64_t>(b) * n_seq * q_stride + h * hd;
  const int64_t kv_off = static_cast<int64_t>(b) * n_seq * kv_stride + g * hd;
  const T* kbase = static_cast<const T*>(a.k) + kv_off;
  const T* vbase = static_cast<const T*>(a.v) + kv_off;
  const int32_t* doc_row = a.docs ? a.docs + static_cast<int64_t>(b) * n_seq : nullptr;
  const int2* ranges = a.doc_ranges ? a.doc_ranges + static_cast<int64_t>(b) * a.n_tiles : nullptr;
  const int2 q_range = ranges ? ranges[qt] : make_int2(0, 0);
  const int last_kt = qt;
  auto next_live = [&](int kt) {
    while (ranges != nullptr && kt < last_kt && ranges_disjoint(q_range, ranges[kt])) ++kt;
    return kt;
  };

  load_tile<T, D>(sq, static_cast<const T*>(a.q) + q_off, q_stride, q0, n_seq, hd);
  load_tile<T, D>(sdo, static_cast<const T*>(a.dout) + q_off, q_stride, q0, n_seq, hd);
  int kt = next_live(0);
  load_tile<T, D>(sk, kbase, kv_stride, kt * kTile, n_seq, hd);
  load_tile<T, D>(sv, vbase, kv_stride, kt * kTile, n_seq, hd);
  cp_async_commit();

  const int row_a = warp * 16 + (lane >> 2), row_b = row_a + 8;
  const int pos_a = q0 + min(row_a, n_rows - 1), pos_b = q0 + min(row_b, n_rows - 1);
  const int doc_a = doc_row ? doc_row[pos_a] : 0, doc_b = doc_row ? doc_row[pos_b] : 0;
  const int64_t stat_row = (static_cast<int64_t>(b) * a.n_heads + h) * n_seq;
  const float lse2[2] = {a.lse[stat_row + pos_a] * kLog2e, a.lse[stat_row + pos_b] * kLog2e};
  // d <= 64: Dv is loaded with the fragments (fewer registers live across the prologue, so less
  // spilling under the 168 cap); d128 keeps the early load (measured faster there).
  float dval[2] = {0.0f, 0.0f};
  if constexpr (dq_min_blocks<D>() == 1) {
    dval[0] = a.dvals[stat_row + pos_a];
    dval[1] = a.dvals[stat_row + pos_b];
  }

  AFrags<D> qf, dof;
  float dq[D / 8][4];
  zero(dq);

  for (int buf = 0, first = 1; kt <= last_kt; buf ^= 1, first = 0) {
    cp_async_wait<0>();
    __syncthreads();
    if (first) {
      load_a_frags<D>(qf, sq, warp, lane);
      load_a_frags<D>(dof, sdo, warp, lane);
      if constexpr (dq_min_blocks<D>() > 1) {
        dval[0] = a.dvals[stat_row + pos_a];
        dval[1] = a.dvals[stat_row + pos_b];
      }
    }
    const int kt_next = next_live(kt + 1);
    if (kt_next <= last_kt) {
      load_tile<T, D>(sk + (buf ^ 1) * kTile * D, kbase, kv_stride, kt_next * kTile, n_seq, hd);
      load_tile<T, D>(sv + (buf ^ 1) * kTile * D, vbase, kv_stride, kt_next * kTile, n_seq, hd);
    }
    cp_async_commit();
    const T* skb = sk + buf * kTile * D;

    float s[kTile / 8][4], dp[kTile / 8][4];
    zero(s);
    zero(dp);
    mma_a_x_tile<T, D>(s, qf, sq, skb, warp, lane, hd);
    mma_a_x_tile<T, D>(dp, dof, sdo, sv + buf * kTile * D, warp, lane, hd);

    const int kb = kt * kTile;
    const bool causal = kt == qt;
    const bool by_doc = ranges != nullptr && !ranges_one_doc(q_range, ranges[kt]);
#pragma unroll
    for (int nt = 0; nt < kTile / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1;
        float p = exp2_ftz(fmaf(s[nt][e], a.scale_log2, -lse2[r]));
        if (causal || by_doc) {
          const int key = kb + nt * 8 + 2 * (lane & 3) + (e & 1);
          if (key > (r == 0 ? pos_a : pos_b) ||
              (by_doc && doc_row[key] != (r == 0 ? doc_a : doc_b)))
            p = 0.0f;
        }
        s[nt][e] = p * (dp[nt][e] - dval[r]);  // dS (without the scale)
      }
    }
    mma_scores_x_tile<T, D>(dq, s, skb, lane, hd);
    kt = kt_next;
  }
  cp_async_wait<0>();

  T* dqp = static_cast<T*>(a.dq) + q_off;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = r == 0 ? row_a : row_b;
    if (row >= n_rows) continue;
    T* drow = dqp + static_cast<int64_t>(q0 + row) * q_stride;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      if (dt * 8 >= hd) break;
      *reinterpret_cast<uint32_t*>(drow + dt * 8 + 2 * (lane & 3)) =
          pack2<T>(dq[dt][2 * r] * a.scale, dq[dt][2 * r + 1] * a.scale);
    }
  }
}

// dK, dV for one (key tile, kv head, batch). Work items, in this fixed order: for each query head
// of the group, the query tiles from the key tile's own to the last (earlier ones see none of its
// keys), minus the doc-disjoint ones. Warp w owns keys w*16..w*16+15 of the tile; per item it
// computes S^T = K Q^T and dP^T = V dO^T (16 keys x 64 queries), P^T = exp(S^T - lse),
// dS^T = P^T (dP^T - Dv), and accumulates dV += P^T dO, dK += dS^T Q in registers.
template <typename T, int D, bool kExact>
static __global__ void __launch_bounds__(kFlashThreads) flash_bwd_dkv_kernel(FlashParams a) {
  constexpr int kDOut = dkv_cols<D>(), kColBlocks = D / kDOut;
  const int hd = kExact ? D : a.head_dim;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sk = reinterpret_cast<T*>(smem_raw);                         // [kTile][D]
  T* sv = sk + kTile * D;                                         // [kTile][D]
  T* sq = sv + kTile * D;                                         // [2][kTile][D]
  T* sdo = sq + 2 * kTile * D;                                    // [2][kTile][D]
  float* s_lse2 = reinterpret_cast<float*>(sdo + 2 * kTile * D);  // [2][kTile] lse * log2(e)
  float* s_dval = s_lse2 + 2 * kTile;                             // [2][kTile]
  int* s_doc = reinterpret_cast<int*>(s_dval + 2 * kTile);        // [2][kTile]

  const int kt = blockIdx.x;  // key tile 0 has the most query tiles: scheduled first
  const int g = blockIdx.y / kColBlocks, b = blockIdx.z;
  const int c0 = (blockIdx.y % kColBlocks) * kDOut;  // this block's first dK / dV column
  const int n_seq = a.n_seq, k0 = kt * kTile;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int64_t q_stride = static_cast<int64_t>(a.n_heads) * hd;
  const int64_t kv_stride = static_cast<int64_t>(a.n_kv_heads) * hd;
  const int64_t kv_off = static_cast<int64_t>(b) * n_seq * kv_stride + g * hd;
  const int32_t* doc_row = a.docs ? a.docs + static_cast<int64_t>(b) * n_seq : nullptr;
  const int2* ranges = a.doc_ranges ? a.doc_ranges + static_cast<int64_t>(b) * a.n_tiles : nullptr;
  const int2 k_range = ranges ? ranges[kt] : make_int2(0, 0);
  const int n_qt = a.n_tiles - kt;  // query tiles kt .. n_tiles - 1
  const int n_items = a.group * n_qt;
  auto next_live = [&](int i) {
    while (ranges != nullptr && i < n_items && ranges_disjoint(k_range, ranges[kt + i % n_qt])) ++i;
    return i;  // each head's diagonal item is live, so the first call finds one
  };
  auto load_item = [&](int buf, int i) {
    const int h = g * a.group + i / n_qt, q0 = (kt + i % n_qt) * kTile;
    const int64_t q_off = static_cast<int64_t>(b) * n_seq * q_stride + h * hd;
    load_tile<T, D>(sq + buf * kTile * D, static_cast<const T*>(a.q) + q_off, q_stride, q0, n_seq,
                    hd);
    load_tile<T, D>(sdo + buf * kTile * D, static_cast<const T*>(a.dout) + q_off, q_stride, q0,
                    n_seq, hd);
    if (tid < kTile) {  // plain stores: visible after the __syncthreads that starts the item
      const int t = q0 + tid;
      const bool valid = t < n_seq;
      const int64_t stat = (static_cast<int64_t>(b) * a.n_heads + h) * n_seq + t;
      s_lse2[buf * kTile + tid] = valid ? a.lse[stat] * kLog2e : INFINITY;  // padding: P = 0
      s_dval[buf * kTile + tid] = valid ? a.dvals[stat] : 0.0f;
      s_doc[buf * kTile + tid] = valid && doc_row ? doc_row[t] : 0;
    }
  };

  load_tile<T, D>(sk, static_cast<const T*>(a.k) + kv_off, kv_stride, k0, n_seq, hd);
  load_tile<T, D>(sv, static_cast<const T*>(a.v) + kv_off, kv_stride, k0, n_seq, hd);
  int i = next_live(0);
  load_item(0, i);
  cp_async_commit();

  const int key_a = k0 + warp * 16 + (lane >> 2), key_b = key_a + 8;
  const int doc_ka = doc_row && key_a < n_seq ? doc_row[key_a] : 0;
  const int doc_kb = doc_row && key_b < n_seq ? doc_row[key_b] : 0;

  float dk[kDOut / 8][4], dv[kDOut / 8][4];
  zero(dk);
  zero(dv);
  for (int buf = 0; i < n_items; buf ^= 1) {
    cp_async_wait<0>();
    __syncthreads();
    const int i_next = next_live(i + 1);
    if (i_next < n_items) load_item(buf ^ 1, i_next);
    cp_async_commit();
    const int qt = kt + i % n_qt, q0 = qt * kTile;
    const T* sqb = sq + buf * kTile * D;
    const T* sdob = sdo + buf * kTile * D;
    const float* lse2 = s_lse2 + buf * kTile;
    const float* dval = s_dval + buf * kTile;
    const int* qdoc = s_doc + buf * kTile;

    float st[kTile / 8][4], dpt[kTile / 8][4];  // [16 keys x 64 queries] per warp
    zero(st);
    zero(dpt);
    {
      AFrags<D> ka;
      load_a_frags<D>(ka, sk, warp, lane);
      mma_a_x_tile<T, D>(st, ka, sk, sqb, warp, lane, hd);
      load_a_frags<D>(ka, sv, warp, lane);
      mma_a_x_tile<T, D>(dpt, ka, sv, sdob, warp, lane, hd);
    }
    const bool causal = qt == kt;
    const bool by_doc = ranges != nullptr && !ranges_one_doc(k_range, ranges[qt]);
#pragma unroll
    for (int nt = 0; nt < kTile / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = nt * 8 + 2 * (lane & 3) + (e & 1);  // query row within the tile
        float p = exp2_ftz(fmaf(st[nt][e], a.scale_log2, -lse2[col]));
        if (causal || by_doc) {
          const int key = e < 2 ? key_a : key_b;
          if (q0 + col < key || (by_doc && qdoc[col] != (e < 2 ? doc_ka : doc_kb))) p = 0.0f;
        }
        st[nt][e] = p;
        dpt[nt][e] = p * (dpt[nt][e] - dval[col]);
      }
    }
    mma_scores_x_tile<T, D, kDOut>(dv, st, sdob, lane, hd, c0);
    mma_scores_x_tile<T, D, kDOut>(dk, dpt, sqb, lane, hd, c0);
    i = i_next;
  }
  cp_async_wait<0>();

  T* dkp = static_cast<T*>(a.dk) + kv_off;
  T* dvp = static_cast<T*>(a.dv) + kv_off;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = r == 0 ? key_a : key_b;
    if (key >= n_seq) continue;
    T* krow = dkp + static_cast<int64_t>(key) * kv_stride;
    T* vrow = dvp + static_cast<int64_t>(key) * kv_stride;
#pragma unroll
    for (int dt = 0; dt < kDOut / 8; ++dt) {
      if (c0 + dt * 8 >= hd) break;
      const int c = c0 + dt * 8 + 2 * (lane & 3);
      *reinterpret_cast<uint32_t*>(krow + c) =
          pack2<T>(dk[dt][2 * r] * a.scale, dk[dt][2 * r + 1] * a.scale);
      *reinterpret_cast<uint32_t*>(vrow + c) = pack2<T>(dv[dt][2 * r], dv[dt][2 * r + 1]);
    }
  }
}

namespace {

// Common parameters; the doc ranges (if any) go into `ranges`, which must outlive the launches.
FlashParams make_params(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_ids,
                        float scale, Tensor& ranges) {
  FlashParams a{};
  a.q = q.data_ptr();
  a.k = k.data_ptr();
  a.v = v.data_ptr();
  a.n_seq = static_cast<int32_t>(q.size(1));
  a.n_heads = static_cast<int32_t>(q.size(2));
  a.n_kv_heads = static_cast<int32_t>(k.size(2));
  a.group = a.n_heads / a.n_kv_heads;
  a.n_tiles = (a.n_seq + kTile - 1) / kTile;
  a.head_dim = static_cast<int32_t>(q.size(3));
  a.scale = scale;
  a.scale_log2 = scale * kLog2e;
  if (doc_ids.defined()) {
    const int n_batch = static_cast<int>(q.size(0));
    ranges = Tensor::empty({n_batch, a.n_tiles, 2}, DType::kI32, q.device());
    a.docs = doc_ids.data<int32_t>();
    a.doc_ranges = reinterpret_cast<const int2*>(ranges.data<int32_t>());
    const int n = n_batch * a.n_tiles;
    doc_ranges_kernel<<<(n + 127) / 128, 128, 0, current_stream()>>>(
        a.docs, a.n_seq, a.n_tiles, n_batch, reinterpret_cast<int2*>(ranges.data<int32_t>()));
    VELA_CUDA_CHECK_LAUNCH();
  }
  return a;
}

// f(T{}, integral_constant<D>, bool_constant<kExact>) for q's dtype and head_dim (a multiple of 8
// in [32, 256]: exact tiles 32, 64, 128, 256, padded tiles 64, 128, 256).
template <typename F>
void dispatch_flash(const Tensor& q, F&& f) {
  auto by_dim = [&](auto tag) {
    using T = decltype(tag);
    const int64_t d = q.size(3);
    VELA_CHECK_T(Unsupported, d % 8 == 0 && d >= 32 && d <= kMaxHeadDim,
                 "flash attention: head_dim must be a multiple of 8 in [32, ", kMaxHeadDim,
                 "], got ", d);
    switch (d) {
      case 32:
        return f(T{}, std::integral_constant<int, 32>{}, std::true_type{});
      case 64:
        return f(T{}, std::integral_constant<int, 64>{}, std::true_type{});
      case 128:
        return f(T{}, std::integral_constant<int, 128>{}, std::true_type{});
      case 256:
        return f(T{}, std::integral_constant<int, 256>{}, std::true_type{});
      default:
        break;
    }
    if (d < 64) return f(T{}, std::integral_constant<int, 64>{}, std::false_type{});
    if (d < 128) return f(T{}, std::integral_constant<int, 128>{}, std::false_type{});
    return f(T{}, std::integral_constant<int, 256>{}, std::false_type{});
  };
  if (q.dtype() == DType::kBF16) {
    by_dim(bf16{});
  } else if (q.dtype() == DType::kF16) {
    by_dim(f16{});
  } else {
    VELA_THROW(Unsupported, "flash attention: dtype ", dtype_name(q.dtype()));
  }
}

template <typename T, int D, bool kExact>
void launch_forward(const FlashParams& a, int n_batch) {
  static const bool configured = [] {
    opt_in_smem(flash_fwd_kernel<T, D, kExact>, fwd_smem_bytes<D>());
    return true;
  }();
  (void)configured;
  const dim3 grid(static_cast<unsigned>(a.n_tiles), static_cast<unsigned>(a.n_heads),
                  static_cast<unsigned>(n_batch));
  flash_fwd_kernel<T, D, kExact><<<grid, kFlashThreads, fwd_smem_bytes<D>(), current_stream()>>>(a);
  VELA_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool flash_attention_supported(const Tensor& q, const Tensor& k, const Tensor& v) {
  const int64_t d = q.size(3);
  if (q.dtype() != DType::kBF16 && q.dtype() != DType::kF16) return false;
  if (d % 8 != 0 || d < 32 || d > kMaxHeadDim) return false;
  if (q.size(0) > 65535 || q.size(2) > 65535 || q.size(1) >= (int64_t{1} << 30)) return false;
  return is_aligned(q.data_ptr(), 16) && is_aligned(k.data_ptr(), 16) &&
         is_aligned(v.data_ptr(), 16);
}

void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& doc_ids, float scale, Tensor& out, const Tensor& lse) {
  if (q.numel() == 0) return;
  Tensor ranges;
  FlashParams a = make_params(q, k, v, doc_ids, scale, ranges);
  a.out = out.data_ptr();
  a.lse = lse.defined() ? lse.data<float>() : nullptr;
  dispatch_flash(q, [&](auto tag, auto dim, auto exact) {
    launch_forward<decltype(tag), decltype(dim)::value, decltype(exact)::value>(
        a, static_cast<int>(q.size(0)));
  });
}

void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& doc_ids, float scale, const Tensor& out,
                              const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv,
                              const Tensor& lse) {
  if (q.numel() == 0) return;
  const int n_batch = static_cast<int>(q.size(0));
  Tensor ranges;
  FlashParams a = make_params(q, k, v, doc_ids, scale, ranges);
  Tensor stats = Tensor::empty({q.size(0), q.size(2), q.size(1)}, DType::kF32, q.device());
  Tensor own_lse = lse;
  if (!own_lse.defined())
    own_lse = Tensor::empty({q.size(0), q.size(2), q.size(1)}, DType::kF32, q.device());
  a.dout = dout.data_ptr();
  a.lse = own_lse.data<float>();
  a.dvals = stats.data<float>();
  a.dq = dq.data_ptr();
  a.dk = dk.data_ptr();
  a.dv = dv.data_ptr();
  cudaStream_t stream = current_stream();
  dispatch_flash(q, [&](auto tag, auto dim, auto exact) {
    using T = decltype(tag);
    constexpr int D = decltype(dim)::value;
    constexpr bool kExact = decltype(exact)::value;
    if (!lse.defined()) launch_forward<T, D, kExact>(a, n_batch);  // a.out null: statistics only
    const int64_t n_rows = q.numel() / a.head_dim;
    flash_dot_kernel<T><<<static_cast<unsigned>((n_rows * 32 + 255) / 256), 256, 0, stream>>>(
        static_cast<const T*>(out.data_ptr()), static_cast<const T*>(dout.data_ptr()),
        stats.data<float>(), n_rows, a.n_seq, a.n_heads, a.head_dim);
    VELA_CUDA_CHECK_LAUNCH();
    static const bool configured = [] {
      opt_in_smem(flash_bwd_dq_kernel<T, D, kExact>, dq_smem_bytes<D>());
      opt_in_smem(flash_bwd_dkv_kernel<T, D, kExact>, dkv_smem_bytes<D>());
      return true;
    }();
    (void)configured;
    const dim3 grid_q(static_cast<unsigned>(a.n_tiles), static_cast<unsigned>(a.n_heads),
                      static_cast<unsigned>(n_batch));
    flash_bwd_dq_kernel<T, D, kExact><<<grid_q, kFlashThreads, dq_smem_bytes<D>(), stream>>>(a);
    VELA_CUDA_CHECK_LAUNCH();
    const dim3 grid_kv(static_cast<unsigned>(a.n_tiles),
                       static_cast<unsigned>(a.n_kv_heads * (D / dkv_cols<D>())),
                       static_cast<unsigned>(n_batch));
    flash_bwd_dkv_kernel<T, D, kExact><<<grid_kv, kFlashThreads, dkv_smem_bytes<D>(), stream>>>(a);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace vela::ops::cuda
