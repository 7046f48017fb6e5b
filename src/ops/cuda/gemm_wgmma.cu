// Hopper GEMM for small batches: c[M, N] = alpha * a[M, K] @ w[N, K]^T for 3..64 rows of bf16/f16
// a (batched decode, speculative verify) on sm_90, the weight streamed once, and the same with
// SiLU * up in the epilogue for the gate|up projection (gemm_wgmma_silu_mul) or with QK-norm,
// rotary and the KV-cache write for q|k|v (gemm_wgmma_rotary_kv_write), or with the residual add
// and the next norm's pieces for o / down (gemm_wgmma_add); gate|up and q|k|v can also take their
// input as norm pieces and scale each output row by its rstd (docs/kernels_history.md, "Done:
// the norms inside the multi-row GEMMs"). Graph-timed on the
// H200 (docs/kernels.md, "Small batches on Hopper"): bench-1b's q|k|v / o / gate_up / down at 64
// rows 5.7 / 4.4 / 14.6 / 10.1 us against cuBLASLt's 5.5 / 4.8 / 14.0 / 9.9, and in the engine,
// where it runs under programmatic dependent launch, batch64 34,694 -> 35,422-35,954 tok/s (and
// ~37,000 with both epilogues).
//
// One warpgroup (128 threads) per block owns BN = 128 output columns and a range of K. Every
// 64-wide K chunk of w [128 x 64] and of a [64 x 64] (rows past M zero) goes global -> shared
// through a 4-stage pipeline in the 128-byte swizzled layout wgmma reads (row r's 16-byte chunk c
// at chunk c ^ (r % 8) of a 128-byte row, 1024-byte aligned tiles), and four wgmma.m64n128k16 per
// chunk accumulate the 64 x 128 tile in fp32 registers. The loads are TMA copies issued by one
// thread onto the stage's mbarrier (wgmma_tma_gemm_kernel, the default), or cp.async copies from
// every thread (wgmma_gemm_kernel, VELA_WGMMA_TMA=0). When the column tiles alone would leave SMs
// idle (q|k|v, o, down), K is split over the blocks of a thread-block cluster (at most 16): each
// block stages its partial tile in its shared memory and, after a cluster barrier, sums every
// splits-th row of the tile over the cluster's blocks in rank order through distributed shared
// memory (no global round trip; the same bits whichever block finishes first, so graph replays
// equal eager calls). Launched with programmatic dependent launch: the first weight chunks load
// before pdl_wait().
//
// Built for sm_90a only (wgmma, TMA), in the vela_sm90a object library (CMakeLists.txt);
// gemm_cublaslt.cpp and ops/fused_gemm.cpp call it where VELA_HAS_SM90A is defined and the device
// is sm_90.
#include <cooperative_groups.h>

#include <algorithm>
#include <atomic>

#include "core/env.h"
#include "core/log.h"
#include "ops/cuda/attention_common.cuh"
#include "ops/cuda/cluster_launch.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/gemm_pipeline.cuh"
#include "ops/cuda/gemv_kernel.cuh"
#include "ops/cuda/pdl.cuh"
#include "ops/cuda/phase_probe.cuh"
#include "ops/cuda/tma.cuh"
#include "ops/cuda/wgmma.cuh"
#include "ops/rms_norm.h"
#include "ops/sampling.h"

namespace vela::ops::cuda {

namespace {

constexpr int kBN = 128;                 // output columns per block (wgmma N)
constexpr int kBK = gemm_pipeline::kBK;  // K per stage: one 128-byte swizzled row
constexpr int kRows = 64;                // wgmma M: rows of a per block (past M: zeros)
// Stages in flight: at most 4 (97 KiB), so two blocks fit an SM, and under programmatic dependent
// launch the next GEMM's block becomes resident beside this one and streams its weights early (5
// stages, 121 KiB, measured up to 1.8x slower per GEMM in a chain of GEMMs for exactly that
// reason). The TMA kernel launches fewer where a split has fewer chunks (tma_stages).
constexpr int kStages = 4;
constexpr int kThreads = 128;   // one warpgroup
// splits = cluster size: up to the non-portable 16 where the device holds such clusters
// (VELA_WGMMA_MAX_CLUSTER, 2..16), so a GEMM of few column tiles still has about a block per SM
// (bench-1b's o and down at 64 rows: 12 tiles x 11 splits, not x 8: H100, batch16 / 32 / 64
// -2.2 / -1.5 / -0.6% a step, docs/kernels.md). kPortableCluster / kMaxCluster: cluster_launch.cuh.
constexpr int kWBytes = kBN * kBK * 2;
constexpr int kABytes = kRows * kBK * 2;
constexpr int kStageBytes = kWBytes + kABytes;  // a multiple of 1024: every tile stays aligned
constexpr int kRedStride = kBN + 8;             // floats per row of the staged partial tile
constexpr int kSmemBytes = kStages * kStageBytes + 1024;  // + slack to align the base to 1024
static_assert(kStageBytes % 1024 == 0 && kWBytes % 1024 == 0, "128-byte swizzle atoms");
static_assert(kRows * kRedStride * 4 <= 2 * kStageBytes, "partial tile fits two stages");
static_assert(kRowSqGroup == kBN, "kAddRes writes a row's sum of squares per column tile");

struct WgmmaArgs : gemm_pipeline::Operands {
  int splits;  // K ranges per column tile = the cluster size
  float alpha;
  bool pairs;  // c's rows and pointer allow 2-element stores (4 / 8 bytes)
};

}  // namespace

// c[row, col .. col + kN - 1] = alpha * v (columns past N skipped), one vector store where the
// row allows.
template <typename TC, int kN>
__device__ __forceinline__ void store_cols(TC* c, const WgmmaArgs& p, int row, int col,
                                           const float (&v)[kN]) {
  TC* dst = c + static_cast<int64_t>(row) * p.ldc + col;
  if (p.pairs && col + kN <= p.n) {
    if constexpr (std::is_same_v<TC, float>) {
      if constexpr (kN == 2) {
        *reinterpret_cast<float2*>(dst) = make_float2(p.alpha * v[0], p.alpha * v[1]);
        return;
      }
    } else {
#pragma unroll
      for (int e = 0; e < kN; e += 2) {
        TC pair[2] = {from_float<TC>(p.alpha * v[e]), from_float<TC>(p.alpha * v[e + 1])};
        *reinterpret_cast<uint32_t*>(dst + e) = *reinterpret_cast<const uint32_t*>(pair);
      }
      return;
    }
  }
#pragma unroll
  for (int e = 0; e < kN; ++e)
    if (col + e < p.n) dst[e] = from_float<TC>(p.alpha * v[e]);
}

// The block's fp32 partial tile [64 x kBN] (accumulator layout of wgmma.cuh) into shared `red`
// (row stride kRedStride), for the split-K reduction.
__device__ __forceinline__ void stage_partial(const float (&acc)[kBN / 8][4], float* red,
                                              int row_base, int lane) {
#pragma unroll
  for (int j = 0; j < kBN / 2; j += 2) {
    const int row = row_base + ((j >> 1) & 1) * 8;
    const int col = (j >> 2) * 8 + 2 * (lane & 3);
    *reinterpret_cast<float2*>(red + row * kRedStride + col) =
        make_float2(acc[j >> 2][j & 3], acc[j >> 2][(j & 3) + 1]);
  }
}

// r += v, component by component.
__device__ __forceinline__ void add4(float (&r)[4], const float4& v) {
  r[0] += v.x;
  r[1] += v.y;
  r[2] += v.z;
  r[3] += v.w;
}

// r = columns col4 .. col4 + 3 of `row` summed over the partial tiles of the cluster's `splits`
// blocks in rank order (every rank's part loaded first, so the loads are in flight together: one
// round trip through distributed shared memory for up to 16 ranks, the largest cluster; session
// 54's phase probe read the epilogues at 64 rows as chains of such round trips).
__device__ __forceinline__ void cluster_sum4(cooperative_groups::cluster_group& cluster,
                                             const float* red, int splits, int row, int col4,
                                             float (&r)[4]) {
  const float4* local = reinterpret_cast<const float4*>(red + row * kRedStride + col4);
  r[0] = r[1] = r[2] = r[3] = 0.0f;
  for (int s0 = 0; s0 < splits; s0 += kMaxCluster) {
    float4 part[kMaxCluster];
#pragma unroll
    for (int s = 0; s < kMaxCluster; ++s)
      if (s0 + s < splits) part[s] = *cluster.map_shared_rank(local, s0 + s);
#pragma unroll
    for (int s = 0; s < kMaxCluster; ++s)
      if (s0 + s < splits) add4(r, part[s]);
  }
}

// cluster_sum4 of two column groups of `row` (a and b) with both groups' loads in flight together
// (8 ranks at a time: one round trip for up to 8 ranks); each sum in rank order, as cluster_sum4.
__device__ __forceinline__ void cluster_sum4x2(cooperative_groups::cluster_group& cluster,
                                               const float* red, int splits, int row, int col_a,
                                               int col_b, float (&ra)[4], float (&rb)[4]) {
  const float4* la = reinterpret_cast<const float4*>(red + row * kRedStride + col_a);
  const float4* lb = reinterpret_cast<const float4*>(red + row * kRedStride + col_b);
  ra[0] = ra[1] = ra[2] = ra[3] = 0.0f;
  rb[0] = rb[1] = rb[2] = rb[3] = 0.0f;
  for (int s0 = 0; s0 < splits; s0 += kPortableCluster) {
    float4 pa[kPortableCluster], pb[kPortableCluster];
#pragma unroll
    for (int s = 0; s < kPortableCluster; ++s) {
      if (s0 + s < splits) {
        pa[s] = *cluster.map_shared_rank(la, s0 + s);
        pb[s] = *cluster.map_shared_rank(lb, s0 + s);
      }
    }
#pragma unroll
    for (int s = 0; s < kPortableCluster; ++s) {
      if (s0 + s < splits) {
        add4(ra, pa[s]);
        add4(rb, pb[s]);
      }
    }
  }
}

// The pipelined epilogues (kFormPipe): an item's parts (columns col4 .. col4 + 3 of `row`) from
// each of the cluster's first `splits` <= N ranks, loaded into registers (load_parts), then summed
// in rank order (sum_parts: cluster_sum4's order, so the same bits). kAddRes holds N = kMaxCluster
// (the largest cluster the host launches); kSiluMul N = 8, taken only up to 8 splits.
template <int N>
__device__ __forceinline__ void load_parts(cooperative_groups::cluster_group& cluster,
                                           const float* red, int splits, int row, int col4,
                                           float4 (&part)[N]) {
  const float4* local = reinterpret_cast<const float4*>(red + row * kRedStride + col4);
#pragma unroll
  for (int s = 0; s < N; ++s)
    if (s < splits) part[s] = *cluster.map_shared_rank(local, s);
}

template <int N>
__device__ __forceinline__ void sum_parts(const float4 (&part)[N], int splits, float (&r)[4]) {
  r[0] = r[1] = r[2] = r[3] = 0.0f;
#pragma unroll
  for (int s = 0; s < N; ++s)
    if (s < splits) add4(r, part[s]);
}

template <typename T, typename TC>
static __global__ void __launch_bounds__(kThreads) wgmma_gemm_kernel(WgmmaArgs p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw_addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  unsigned char* smem = smem_raw + ((1024 - (raw_addr & 1023)) & 1023);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int tile = blockIdx.x, split = blockIdx.y;
  const int col0 = tile * kBN;
  // This split's K chunks (splits <= n_chunks, so never empty).
  const gemm_pipeline::ChunkRange range = gemm_pipeline::split_chunks(split, p.splits, p.n_chunks);
  const int c_begin = range.begin, n_local = range.end - range.begin;
  const T* w = static_cast<const T*>(p.w);
  const T* a = static_cast<const T*>(p.a);
  auto stage_w = [&](int st) { return reinterpret_cast<T*>(smem + st * kStageBytes); };
  auto stage_a = [&](int st) { return reinterpret_cast<T*>(smem + st * kStageBytes + kWBytes); };

  // Chunk `ci` into stage `st`; rows past N / M and elements past K are zero.
  auto load_w = [&](int ci, int st) {
    gemm_pipeline::load_chunk<kBN, kThreads>(stage_w(st), w, p.ldw, col0, p.n, ci * kBK, p.k, tid);
  };
  auto load_a = [&](int ci, int st) {
    gemm_pipeline::load_chunk<kRows, kThreads>(stage_a(st), a, p.lda, 0, p.m, ci * kBK, p.k, tid);
  };
  gemm_pipeline::prologue<kStages>(c_begin, n_local, load_w, load_a);

  float acc[kBN / 8][4];
#pragma unroll
  for (int j = 0; j < kBN / 2; ++j) acc[j >> 2][j & 3] = 0.0f;

  for (int i = 0; i < n_local; ++i) {
    cp_async_wait<kStages - 2>();
    wgmma::fence_proxy_async();
    __syncthreads();  // stage i landed everywhere; every warp's wgmma on stage i - 1 completed
    {
      const int nxt = i + kStages - 1;
      if (nxt < n_local) {
        load_w(c_begin + nxt, nxt % kStages);
        load_a(c_begin + nxt, nxt % kStages);
      }
      cp_async_commit();
    }
    const int st = i % kStages;
    const uint64_t da = wgmma::desc_k_major(stage_a(st)), db = wgmma::desc_k_major(stage_w(st));
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk)  // 16 elements = 32 bytes along the swizzled row
      wgmma::mma_ss<T, kBN>(acc, wgmma::desc_add(da, 32 * kk), wgmma::desc_add(db, 32 * kk), 1);
    wgmma::commit();
    wgmma::wait_all();
  }
  cp_async_wait<0>();

  TC* c = static_cast<TC*>(p.c);
  const int row_base = warp * 16 + (lane >> 2);
  if (p.splits == 1) {
#pragma unroll
    for (int j = 0; j < 64; j += 2) {
      const int row = row_base + ((j >> 1) & 1) * 8;
      const int col = col0 + (j >> 2) * 8 + 2 * (lane & 3);
      const float v[2] = {acc[j >> 2][j & 3], acc[j >> 2][(j & 3) + 1]};
      if (row < p.m) store_cols<TC, 2>(c, p, row, col, v);
    }
    return;
  }
  // Split-K: stage the partial tile, then sum rows rank, rank + splits, ... over the cluster.
  __syncthreads();  // every warp is done reading the pipeline's shared memory
  stage_partial(acc, reinterpret_cast<float*>(smem), row_base, lane);
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every block's partial is staged and visible to the cluster
  const int rank = static_cast<int>(cluster.block_rank());
  const int my_rows = p.m > rank ? (p.m - rank + p.splits - 1) / p.splits : 0;
  const float* red = reinterpret_cast<const float*>(smem);
  for (int idx = tid; idx < my_rows * (kBN / 4); idx += kThreads) {
    const int row = rank + (idx / (kBN / 4)) * p.splits, col4 = (idx % (kBN / 4)) * 4;
    float r[4];
    cluster_sum4(cluster, red, p.splits, row, col4, r);
    store_cols<TC, 4>(c, p, row, col0 + col4, r);
  }
  cluster.sync();  // no block leaves while another still reads its shared memory
#endif
}

// ---- TMA kernel: the same tiles with the loads issued by one thread (3..64 rows), and epilogues
// ----
//
// Every copy of a stage is one TMA (the weight as two boxes of 64 rows, a as one 64-row box, rows
// past M zero-filled) completing on the stage's mbarrier, so the math warps issue no loads: thread
// 0 refills a stage after the block barrier that follows its wgmma. kSilu: the weight is gate | up
// ([2 * inter, k]) and the block's 128 rows are gate rows j .. j + 63 and up rows inter + j ..
// inter + j + 63 (j = 64 * tile), so a thread holds gate and up of the same columns and stores
// silu(gate) * up, each rounded where gemm + silu_and_mul round. kRotaryKv (split-K only, head_dim
// kD = 64 or 128, so a 128-column tile holds whole heads): the weight is q | k | v of a layer and
// the reduction does what qkv_rotary_kv_write does after the GEMM (QK-norm, rotary, q to its
// tensor, k and v to the token's cache slot), each thread taking features j .. j + 3 of a head and
// their rotate_half partners j + kD / 2 .. (rotary_epilogue). kAddRes (split-K only): c is the
// residual, the reduction adds to it and writes the next norm's pieces (add_residual_epilogue).
// kRowScale (with kSiluMul or kRotaryKv): each output row times its rstd, summed from the norm
// pieces' row sums of squares after the wait, where the epilogue applies alpha. kArgmaxOut (no
// split-K, f32 out: the LM head): each row's largest sample_rank over the tile's 128 columns, the
// sampler's argmax piece (ops::argmax_chunks), from the values stored. Two warpgroups
// per block (256
// columns) and a producer warp with empty barriers were measured and dropped: even or slower on
// most bench-1b and Qwen3-1.7B projections (docs/kernels.md).

enum TmaEpilogue : int { kPlainOut = 0, kSiluMul = 1, kRotaryKv = 2, kAddRes = 3, kArgmaxOut = 4 };

// qkv_rotary_kv_write's operands (ops/qkv_rotary.h) for the kRotaryKv epilogue.
struct RotaryKv {
  const int32_t* positions;
  const float* table;  // [max_positions, head_dim]: cos | sin
  int64_t max_positions;
  const void* q_norm;  // QK-norm weights [head_dim] (f32 when norm_f32, else T) or null
  const void* k_norm;
  bool norm_f32;
  float eps;
  const int32_t* loc;  // cache slot per row
  int64_t n_slots;
  void* q_out;    // [m, n_heads, head_dim]
  void* k_cache;  // [n_slots, n_kv_heads, head_dim]
  void* v_cache;
  int n_heads, n_kv_heads;
};

// kRowScale: `a` holds the weight-scaled rows of rms_norm's input (ops/rms_norm.h, NormPieces) and
// each output row is scaled by the row's rstd, summed from its row sums of squares, before the
// epilogue rounds it.
struct RowScale {
  const float* row_sq;  // [m, groups]
  int groups;
  int k;  // the norm's width (a's)
  float eps;
};

// The phase probe's rows of the TMA kernels (probe_row) and, for its gaps, the row of the kind
// that runs before each in a multi-row decode layer: gate|up after o, down after gate|up, q|k|v
// and the LM head after down, o after q|k|v (attention between them); -1: none.
enum ProbeRow : int {
  kProbeRowPlain,
  kProbeRowGateUp,
  kProbeRowQkv,
  kProbeRowO,
  kProbeRowDown,
  kProbeRowLmHead
};
static_assert(kProbeRowLmHead < kProbeRows, "phase_probe.h holds every row");
__host__ __device__ constexpr int probe_pred(int row) {
  switch (row) {
    case kProbeRowGateUp:
      return kProbeRowO;
    case kProbeRowDown:
      return kProbeRowGateUp;
    case kProbeRowQkv:
    case kProbeRowLmHead:
      return kProbeRowDown;
    case kProbeRowO:
      return kProbeRowQkv;
    default:
      return -1;
  }
}

struct TmaArgs {
  CUtensorMap w_map;  // [n (kSiluMul: 2 * inter), k] in [64 x 64] boxes
  CUtensorMap a_map;  // [m, k] in [64 x 64] boxes
  void* c;
  int64_t ldc;
  int m, n;  // n: output columns (kSiluMul: inter)
  int n_chunks, splits;
  int stages;  // 2..kStages: the shared-memory stages launched (tma_stages)
  float alpha;
  bool pairs;
  RotaryKv rot;  // kRotaryKv only
  RowScale scale;  // kRowScale only
  // kAddRes: the next norm's pieces of the updated residual c: [m, n_tiles] sums of squares, and
  // round(c * next_w) (scaled, row stride ld_scaled), next_w f32 when next_w_f32, else T.
  float* row_sq_out;
  void* scaled;
  int64_t ld_scaled;
  const void* next_w;
  bool next_w_f32;
  // kArgmaxOut: ops::argmax_chunks of the f32 output, [m, n_tiles] u64 (row stride ld_chunk_max).
  uint64_t* chunk_max;
  int64_t ld_chunk_max;
  unsigned long long* probe;  // phase probe builds: this kind's row (phase_probe.h), else null
};
static_assert(kBN == kArgmaxChunkCols, "kArgmaxOut: a column tile is one argmax chunk");

template <typename TC>
__device__ __forceinline__ float silu_mul_rounded(float g, float u, float alpha) {
  const float gr = to_float(from_float<TC>(alpha * g)), ur = to_float(from_float<TC>(alpha * u));
  return gr / (1.0f + expf(-gr)) * ur;
}

// Four T at dst (8 bytes: dst is 8-byte aligned).
template <typename T>
__device__ __forceinline__ void store4(T* dst, const float (&v)[4]) {
  T out[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) out[e] = from_float<T>(v[e]);
  *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(out);
}

// Item idx of a kRotaryKv block's reduction (my_rows * kBN / 8 items: kD / 8 threads per head,
// each taking features f .. f + 3 and their rotate_half partners): its row, the head h in the
// tile and its index among q | k | v heads, and whether that is a q, k or v head.
struct RotaryItem {
  int row, h, f, head, kv_head;
  bool is_q, is_v;
};
template <int kD>
__device__ __forceinline__ RotaryItem rotary_item(const TmaArgs& p, int rank, int tile, int idx) {
  constexpr int kLanes = kD / 8, kPerRow = kBN / 8;
  RotaryItem it;
  const int j = idx % kPerRow;
  it.row = rank + (idx / kPerRow) * p.splits;
  it.h = j / kLanes;
  it.f = (j % kLanes) * 4;
  it.head = (tile * kBN) / kD + it.h;  // q heads, then k heads, then v heads
  it.kv_head = it.head - p.rot.n_heads;
  it.is_q = it.kv_head < 0;
  it.is_v = it.kv_head >= p.rot.n_kv_heads;
  return it;
}

// kRotaryKv, before the wait: what rotary_epilogue reads besides the partial tiles, for every item
// of this thread, into L1 (the positions are host-written, so they may be read before the wait;
// the cos / sin table and the QK-norm weights are constants, the slots host-written).
template <typename T, int kD>
__device__ __forceinline__ void prefetch_rotary_epilogue(const TmaArgs& p, int rank, int my_rows,
                                                         int tile, int tid) {
  const RotaryKv& r = p.rot;
  for (int idx = tid; idx < my_rows * (kBN / 8); idx += kThreads) {
    const RotaryItem it = rotary_item<kD>(p, rank, tile, idx);
    if (it.kv_head >= 2 * r.n_kv_heads) continue;
    if (!it.is_q) prefetch_l1(r.loc + it.row);
    if (it.is_v) continue;
    if (const void* nw = it.is_q ? r.q_norm : r.k_norm; nw != nullptr) {
      const int64_t esz = r.norm_f32 ? 4 : static_cast<int64_t>(sizeof(T));
      prefetch_l1(static_cast<const char*>(nw) + it.f * esz);
      prefetch_l1(static_cast<const char*>(nw) + (kD / 2 + it.f) * esz);
    }
    const int64_t pos = r.positions[it.row];
    if (pos >= 0 && pos < r.max_positions) {
      prefetch_l1(r.table + pos * kD + it.f);
      prefetch_l1(r.table + pos * kD + kD / 2 + it.f);
    }
  }
}

// The kRotaryKv split-K reduction of one block: rows rank, rank + splits, ... of the tile summed
// over the cluster (times the row's rstd when given: kRowScale), rounded to T (the projection),
// then per head as qkv_rotary_kv_write: QK-norm (the sum of squares over the head's kD / 8 lanes),
// rotary by the row's position, q stored to q_out, k and v to the row's cache slot (positions
// outside the table: not rotated; slots outside the cache: k and v not written).
template <typename T, int kD>
__device__ __forceinline__ void rotary_epilogue(cooperative_groups::cluster_group& cluster,
                                                const float* red, const TmaArgs& p, int rank,
                                                int my_rows, int tile, int tid, const float* rstd) {
  constexpr int kLanes = kD / 8;    // threads per head: 4 features and their partners each
  constexpr int kPerRow = kBN / 8;  // threads per tile row
  static_assert(kBN % kD == 0 && kLanes <= 32, "whole heads in a tile, a head within a warp");
  const RotaryKv& r = p.rot;
  const int n_items = my_rows * kPerRow;
  // Every lane runs every iteration (the QK-norm shuffles need the whole warp).
  for (int base = 0; base < n_items; base += kThreads) {
    const int idx = base + tid;
    const bool live = idx < n_items;
    const RotaryItem it = rotary_item<kD>(p, rank, tile, idx);
    const int row = it.row, h = it.h, f = it.f;  // head in the tile, first feature
    float lo[4] = {0.0f, 0.0f, 0.0f, 0.0f}, hi[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (live) cluster_sum4x2(cluster, red, p.splits, row, h * kD + f, h * kD + kD / 2 + f, lo, hi);
    if (base == 0 && live) phase_mark(p.probe, 6);  // thread 0's first sums landed
    float ss = 0.0f;
    const float alpha = rstd != nullptr && live ? p.alpha * rstd[row] : p.alpha;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      lo[e] = to_float(from_float<T>(alpha * lo[e]));
      hi[e] = to_float(from_float<T>(alpha * hi[e]));
      ss += lo[e] * lo[e] + hi[e] * hi[e];
    }
#pragma unroll
    for (int o = kLanes / 2; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const int head = it.head, kv_head = it.kv_head;
    if (!live || kv_head >= 2 * r.n_kv_heads) continue;
    const bool is_q = it.is_q, is_v = it.is_v;
    const int64_t slot = r.loc[row];
    if (!is_q && !(slot >= 0 && slot < r.n_slots)) continue;
    const void* nw = is_q ? r.q_norm : r.k_norm;
    if (!is_v && nw != nullptr) {
      const float qk_rstd = rsqrtf(ss / static_cast<float>(kD) + r.eps);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float wl = r.norm_f32 ? static_cast<const float*>(nw)[f + e]
                                    : to_float(static_cast<const T*>(nw)[f + e]);
        const float wh = r.norm_f32 ? static_cast<const float*>(nw)[kD / 2 + f + e]
                                    : to_float(static_cast<const T*>(nw)[kD / 2 + f + e]);
        lo[e] = to_float(from_float<T>(lo[e] * qk_rstd * wl));
        hi[e] = to_float(from_float<T>(hi[e] * qk_rstd * wh));
      }
    }
    const int64_t pos = r.positions[row];
    if (!is_v && pos >= 0 && pos < r.max_positions) {
      const float* tab = r.table + pos * kD;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float c = tab[f + e], sn = tab[kD / 2 + f + e];
        const float x0 = lo[e], x1 = hi[e];
        lo[e] = rope_lo(x0, x1, c, sn);
        hi[e] = rope_hi(x0, x1, c, sn);
      }
    }
    T* dst = is_q ? static_cast<T*>(r.q_out) + (static_cast<int64_t>(row) * r.n_heads + head) * kD
                  : static_cast<T*>(is_v ? r.v_cache : r.k_cache) +
                        (slot * r.n_kv_heads + (is_v ? kv_head - r.n_kv_heads : kv_head)) * kD;
    store4(dst + f, lo);
    store4(dst + kD / 2 + f, hi);
  }
}

// kRowScale: rstd[r] of rows 0 .. 63 from their row sums of squares, as rms_norm computes it from
// a whole row (rows past M: unused). Two threads a row, each loading up to 8 of its groups at once
// (every load in flight together): row_sq_first issues a thread's first 8 right after the wait
// and row_rstd sums them (and any further groups) once the main loop is done, so the main loop
// does not wait for them (the same order of additions, so the same bits).
__device__ __forceinline__ void row_sq_first(const RowScale& rs, int m, int tid, float (&v)[8]) {
  static_assert(kThreads == 2 * kRows, "two threads per row");
  const int row = tid >> 1, part = tid & 1;
  const float* sq = rs.row_sq + static_cast<int64_t>(row) * rs.groups;
#pragma unroll
  for (int u = 0; u < 8; ++u) v[u] = row < m && part + 2 * u < rs.groups ? sq[part + 2 * u] : 0.0f;
}

__device__ __forceinline__ void row_rstd(const RowScale& rs, int m, float* rstd, int tid,
                                         const float (&first)[8]) {
  const int row = tid >> 1, part = tid & 1;
  float ss = 0.0f;
  if (row < m) {
#pragma unroll
    for (int u = 0; u < 8; ++u) ss += first[u];
    const float* sq = rs.row_sq + static_cast<int64_t>(row) * rs.groups;
    for (int g0 = part + 16; g0 < rs.groups; g0 += 16) {
      float v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) v[u] = g0 + 2 * u < rs.groups ? sq[g0 + 2 * u] : 0.0f;
#pragma unroll
      for (int u = 0; u < 8; ++u) ss += v[u];
    }
  }
  ss += __shfl_xor_sync(0xffffffffu, ss, 1);
  if (part == 0) rstd[row] = rsqrtf(ss / static_cast<float>(rs.k) + rs.eps);
}

// kAddRes: the residual elements a thread adds to in the split-K reduction (at most 8 items of 4
// columns: a block reduces at most 32 rows, splits >= 2), loaded right after the previous kernel
// finishes so the loads overlap the main loop: kept as loaded (T) and converted only in the
// epilogue, so nothing waits for them before the loop (a conversion here held every thread about
// one L2 round trip before its first chunk, session 54's phase probe). Item `it` is
// idx = tid + it * 128 of the block's my_rows * 32: row rank + (idx / 32) * splits, columns
// tile * 128 + (idx % 32) * 4 ..
constexpr int kAddItems = (kRows / 2) * (kBN / 4) / kThreads;

// kAddRes, before the wait: the next norm's weights of this thread's columns into L1 (every item
// of a thread has the same 4 columns: idx % 32 = tid % 32).
template <typename T>
__device__ __forceinline__ void prefetch_next_w(const TmaArgs& p, int tile, int tid) {
  const int col = tile * kBN + (tid % (kBN / 4)) * 4;
  if (col >= p.n) return;
  prefetch_l1(p.next_w_f32 ? static_cast<const void*>(static_cast<const float*>(p.next_w) + col)
                           : static_cast<const void*>(static_cast<const T*>(p.next_w) + col));
}

template <typename T>
__device__ __forceinline__ void load_residual(const TmaArgs& p, int rank, int my_rows, int tile,
                                              int tid, T (&res)[kAddItems][4]) {
  const T* c = static_cast<const T*>(p.c);
#pragma unroll
  for (int it = 0; it < kAddItems; ++it) {
    const int idx = tid + it * kThreads;
    const int row = rank + (idx / (kBN / 4)) * p.splits, col = tile * kBN + (idx % (kBN / 4)) * 4;
#pragma unroll
    for (int e = 0; e < 4; ++e)
      res[it][e] = idx < my_rows * (kBN / 4) && col + e < p.n
                       ? c[static_cast<int64_t>(row) * p.ldc + col + e]
                       : from_float<T>(0.0f);
  }
}

// kAddRes's split-K reduction, one item: its 4 columns summed over the cluster (r), rounded to T
// (the projection), added to the residual (res) and rounded again (gemm_add), stored; then the
// next norm's pieces of the stored residual (norm_pieces): round(c * next_w) to `scaled`, and each
// row's sum of squares over the tile's 128 columns to row_sq_out[row, tile] (a warp holds a whole
// row, 4 columns a lane, summed in the order of ops/cuda/rms_norm.cu's kernel: the same bits).
// The whole warp calls it (the shuffles).
template <typename T>
__device__ __forceinline__ void add_residual_item(const TmaArgs& p, T* c, int row, int col,
                                                  int tile, int n_tiles, int tid, const T (&res)[4],
                                                  const float (&r)[4]) {
  T* dst = c + static_cast<int64_t>(row) * p.ldc + col;
  T* sc = static_cast<T*>(p.scaled) + static_cast<int64_t>(row) * p.ld_scaled + col;
  float ss = 0.0f;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    if (col + e < p.n) {
      const T sum = from_float<T>(to_float(res[e]) + to_float(from_float<T>(p.alpha * r[e])));
      dst[e] = sum;
      const float s = to_float(sum);
      ss += s * s;
      const float w = p.next_w_f32 ? static_cast<const float*>(p.next_w)[col + e]
                                   : to_float(static_cast<const T*>(p.next_w)[col + e]);
      sc[e] = from_float<T>(s * w);
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if ((tid & 31) == 0) p.row_sq_out[static_cast<int64_t>(row) * n_tiles + tile] = ss;
}

// kAddRes's split-K reduction of one block: item by item (add_residual_item), each item's cluster
// loads issued after the previous item's stores (kPipe false), or before them (kPipe, kFormPipe:
// item it + 1's parts load while item it is summed and stored).
template <typename T, bool kPipe>
__device__ __forceinline__ void add_residual_epilogue(cooperative_groups::cluster_group& cluster,
                                                      const float* red, const TmaArgs& p, int rank,
                                                      int my_rows, int tile, int tid,
                                                      const T (&res)[kAddItems][4]) {
  static_assert(kBN / 4 == 32, "a warp per tile row");
  T* c = static_cast<T*>(p.c);
  const int n_tiles = (p.n + kBN - 1) / kBN;
  if constexpr (kPipe) {
    const int n_items = my_rows * (kBN / 4);
    // Every item of a thread has the same 4 columns (idx % 32 = tid % 32).
    const int col4 = (tid % (kBN / 4)) * 4, col = tile * kBN + col4;
    auto item_row = [&](int it) { return rank + ((tid + it * kThreads) / (kBN / 4)) * p.splits; };
    float4 cur[kMaxCluster], nxt[kMaxCluster];
    if (tid < n_items) load_parts(cluster, red, p.splits, item_row(0), col4, cur);
#pragma unroll
    for (int it = 0; it < kAddItems; ++it) {
      // The same for the 32 lanes of a warp (one row): the shuffles see the whole warp.
      if (tid + it * kThreads >= n_items) break;
      if (it + 1 < kAddItems && tid + (it + 1) * kThreads < n_items)
        load_parts(cluster, red, p.splits, item_row(it + 1), col4, nxt);
      float r[4];
      sum_parts(cur, p.splits, r);
      if (it == 0) phase_mark(p.probe, 6);  // thread 0's first sums landed
      add_residual_item<T>(p, c, item_row(it), col, tile, n_tiles, tid, res[it], r);
#pragma unroll
      for (int s = 0; s < kMaxCluster; ++s) cur[s] = nxt[s];
    }
  } else {
#pragma unroll
    for (int it = 0; it < kAddItems; ++it) {
      const int idx = tid + it * kThreads;
      // The same for the 32 lanes of a warp (one row): the shuffles see the whole warp.
      if (idx >= my_rows * (kBN / 4)) break;
      const int row = rank + (idx / (kBN / 4)) * p.splits, col4 = (idx % (kBN / 4)) * 4;
      float r[4];
      cluster_sum4(cluster, red, p.splits, row, col4, r);
      if (it == 0) phase_mark(p.probe, 6);  // thread 0's first sums landed
      add_residual_item<T>(p, c, row, tile * kBN + col4, tile, n_tiles, tid, res[it], r);
    }
  }
}

// kSiluMul's split-K reduction of one block with kFormPipe (clusters of up to 8): item it + 1's
// gate and up parts load while item it is summed and stored (each sum in rank order, as
// cluster_sum4x2). Every item of a thread has the same columns (idx % 16 = tid % 16).
template <typename TC, typename RowAlpha>
__device__ __forceinline__ void silu_epilogue_pipelined(cooperative_groups::cluster_group& cluster,
                                                        const float* red, const TmaArgs& p,
                                                        const WgmmaArgs& sp, int rank, int my_rows,
                                                        int tile, int tid, RowAlpha row_alpha) {
  constexpr int kPerRow = kBN / 8, kItems = (kRows / 2) * kPerRow / kThreads;
  const int n_items = my_rows * kPerRow, col4 = (tid % kPerRow) * 4;
  auto item_row = [&](int it) { return rank + ((tid + it * kThreads) / kPerRow) * p.splits; };
  float4 gc[kPortableCluster], uc[kPortableCluster], gn[kPortableCluster], un[kPortableCluster];
  if (tid < n_items) {
    load_parts(cluster, red, p.splits, item_row(0), col4, gc);
    load_parts(cluster, red, p.splits, item_row(0), 64 + col4, uc);
  }
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    if (tid + it * kThreads >= n_items) break;
    if (it + 1 < kItems && tid + (it + 1) * kThreads < n_items) {
      load_parts(cluster, red, p.splits, item_row(it + 1), col4, gn);
      load_parts(cluster, red, p.splits, item_row(it + 1), 64 + col4, un);
    }
    float g[4], u[4], v[4];
    sum_parts(gc, p.splits, g);
    sum_parts(uc, p.splits, u);
    if (it == 0) phase_mark(p.probe, 6);
    const int row = item_row(it);
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = silu_mul_rounded<TC>(g[e], u[e], row_alpha(row));
    store_cols<TC, 4>(static_cast<TC*>(p.c), sp, row, tile * 64 + col4, v);
#pragma unroll
    for (int s = 0; s < kPortableCluster; ++s) {
      gc[s] = gn[s];
      uc[s] = un[s];
    }
  }
}

// The TMA kernel's forms (kForm bits): kFormLate, the dependents launched after the main loop
// instead of right after the wait (late_trigger_rows); kFormPipe, the kAddRes / kSiluMul
// epilogues pipelined over their items (VELA_WGMMA_PIPE_ITEMS). Each its own instantiation.
constexpr int kFormLate = 1, kFormPipe = 2;

template <typename T, typename TC, int kEpi, int kD, bool kRowScale, int kForm = 0>
static __global__ void __launch_bounds__(kThreads)
    wgmma_tma_gemm_kernel(const __grid_constant__ TmaArgs p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  __shared__ uint64_t full[kStages];
  __shared__ float rstd[kRowScale ? kRows : 1];
  const uint32_t raw_addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  unsigned char* smem = smem_raw + ((1024 - (raw_addr & 1023)) & 1023);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int tile = blockIdx.x, split = blockIdx.y;
  const gemm_pipeline::ChunkRange range = gemm_pipeline::split_chunks(split, p.splits, p.n_chunks);
  const int c_begin = range.begin, n_local = range.end - range.begin;
  auto stage_w = [&](int st) { return smem + st * kStageBytes; };
  auto stage_a = [&](int st) { return smem + st * kStageBytes + kWBytes; };
  auto load_w = [&](int ci, int st) {
#pragma unroll
    for (int b = 0; b < 2; ++b) {  // 64-row boxes: gate then up rows with kSiluMul
      const int row = kEpi == kSiluMul ? b * p.n + tile * 64 : tile * kBN + b * 64;
      tma::load_2d(stage_w(st) + b * 64 * 128, &p.w_map, ci * kBK, row, &full[st]);
    }
  };
  auto load_a = [&](int ci, int st) {
    tma::load_2d(stage_a(st), &p.a_map, ci * kBK, 0, &full[st]);
  };
  // Chunk c of this split goes through stage c % S. The prologue issues S - 1 chunks, or all of
  // them when they fit the S stages (then nothing is refilled), so chunk i + ahead refills the
  // stage chunk i - 1 used.
  const int n_stages = p.stages;
  const int ahead = n_local <= n_stages ? n_local : n_stages - 1;
  phase_mark(p.probe, 0);
  if (tid == 0) {
    tma::prefetch_map(&p.w_map);
    tma::prefetch_map(&p.a_map);
    for (int s = 0; s < n_stages; ++s) tma::barrier_init(&full[s], 1);
    tma::fence_barrier_init();
    for (int s = 0; s < ahead; ++s) {
      tma::arrive_expect_tx(&full[s], kStageBytes);
      load_w(c_begin + s, s);  // weights never depend on the previous kernel
    }
  }
  // The rows this block reduces (split-K: its cluster rank is its split, cluster dims
  // (1, splits, 1)).
  const int my_rows = p.m > split ? (p.m - split + p.splits - 1) / p.splits : 0;
  // What the epilogue reads that no kernel of the stream writes, into L1 now, so the epilogue
  // after the reduction does not pay its round trips: the next norm's weights (kAddRes), and the
  // rotary's positions, cos / sin rows, cache slots and QK-norm weights (kRotaryKv).
  if constexpr (kEpi == kAddRes) prefetch_next_w<T>(p, tile, tid);
  if constexpr (kEpi == kRotaryKv) prefetch_rotary_epilogue<T, kD>(p, split, my_rows, tile, tid);
  pdl_wait();
  phase_mark(p.probe, 1);
  phase_gap(p.probe, probe_pred(phase_probe_index(p.probe)));
  if constexpr ((kForm & kFormLate) == 0) pdl_launch_dependents();
  if (tid == 0) {
    for (int s = 0; s < ahead; ++s) load_a(c_begin + s, s);
  }
  // kRowScale: the row sums of squares go out now and are summed after the main loop.
  float sq_first[kRowScale ? 8 : 1];
  if constexpr (kRowScale) row_sq_first(p.scale, p.m, tid, sq_first);
  T res[kEpi == kAddRes ? kAddItems : 1][4];
  if constexpr (kEpi == kAddRes) load_residual<T>(p, split, my_rows, tile, tid, res);
  __syncthreads();  // the barriers are initialised before anyone uses them
  phase_mark(p.probe, 2);

  float acc[kBN / 8][4];
#pragma unroll
  for (int j = 0; j < kBN / 2; ++j) acc[j >> 2][j & 3] = 0.0f;
  for (int i = 0; i < n_local; ++i) {
    if (i > 0) __syncthreads();  // every warp's wgmma on chunk i - 1 completed: refill its stage
    const int nxt = i + ahead;
    if (tid == 0 && nxt < n_local) {
      const int sn = nxt % n_stages;
      tma::arrive_expect_tx(&full[sn], kStageBytes);
      load_w(c_begin + nxt, sn);
      load_a(c_begin + nxt, sn);
    }
    const int st = i % n_stages;
    tma::wait(&full[st], static_cast<uint32_t>((i / n_stages) & 1));
    if (i == 0) phase_mark(p.probe, 3);
    const uint64_t da = wgmma::desc_k_major(stage_a(st)), db = wgmma::desc_k_major(stage_w(st));
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk)
      wgmma::mma_ss<T, kBN>(acc, wgmma::desc_add(da, 32 * kk), wgmma::desc_add(db, 32 * kk), 1);
    wgmma::commit();
    wgmma::wait_all();
  }
  if (n_local == 0) phase_mark(p.probe, 3);  // (every block marks every phase)
  if constexpr (kRowScale) {
    row_rstd(p.scale, p.m, rstd, tid, sq_first);
    __syncthreads();  // rstd is set before the epilogue reads it
  }
  phase_mark(p.probe, 4);
  if constexpr ((kForm & kFormLate) != 0) pdl_launch_dependents();

  TC* c = static_cast<TC*>(p.c);
  WgmmaArgs sp{};  // store_cols' view of the output
  sp.ldc = p.ldc;
  sp.n = p.n;
  sp.alpha = kEpi == kSiluMul ? 1.0f : p.alpha;  // silu_mul_rounded applies alpha itself
  sp.pairs = p.pairs;
  const int row_base = warp * 16 + (lane >> 2);
  // alpha, times the row's rstd with kRowScale (the norm's statistics, applied to the product).
  auto row_alpha = [&](int row) { return kRowScale ? p.alpha * rstd[row] : p.alpha; };
  if (p.splits == 1) {  // (the host sends kRotaryKv and kAddRes only with splits)
    phase_mark(p.probe, 5);  // (no cluster)
    if constexpr (kEpi == kSiluMul) {
#pragma unroll
      for (int j = 0; j < 32; j += 2) {  // gate in acc[0..7], up in acc[8..15]
        const int row = row_base + ((j >> 1) & 1) * 8;
        const int col = tile * 64 + (j >> 2) * 8 + 2 * (lane & 3);
        const float ra = row_alpha(row);
        const float v[2] = {
            silu_mul_rounded<TC>(acc[j >> 2][j & 3], acc[8 + (j >> 2)][j & 3], ra),
            silu_mul_rounded<TC>(acc[j >> 2][(j & 3) + 1], acc[8 + (j >> 2)][(j & 3) + 1], ra)};
        if (row < p.m) store_cols<TC, 2>(c, sp, row, col, v);
      }
    } else if constexpr (kEpi == kPlainOut || kEpi == kArgmaxOut) {
      uint64_t best[2] = {0, 0};  // kArgmaxOut: rows row_base and row_base + 8
#pragma unroll
      for (int j = 0; j < 64; j += 2) {
        const int row = row_base + ((j >> 1) & 1) * 8;
        const int col = tile * kBN + (j >> 2) * 8 + 2 * (lane & 3);
        const float v[2] = {acc[j >> 2][j & 3], acc[j >> 2][(j & 3) + 1]};
        if (row < p.m) store_cols<TC, 2>(c, sp, row, col, v);
        if constexpr (kEpi == kArgmaxOut) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float x = sp.alpha * v[e];  // the value store_cols wrote (TC is float)
            const uint64_t r = sample_rank(sample_key(x != x ? -INFINITY : x), col + e);
            if (col + e < p.n && r > best[(j >> 1) & 1]) best[(j >> 1) & 1] = r;
          }
        }
      }
      if constexpr (kEpi == kArgmaxOut) {  // a row's 128 columns are on the 4 lanes of a quad
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int o = 1; o <= 2; o <<= 1) {
            const uint64_t other = __shfl_xor_sync(0xffffffffu, best[h], o);
            best[h] = other > best[h] ? other : best[h];
          }
          const int row = row_base + 8 * h;
          if ((lane & 3) == 0 && row < p.m)
            p.chunk_max[static_cast<int64_t>(row) * p.ld_chunk_max + tile] = best[h];
        }
      }
    }
    phase_mark(p.probe, 6);  // (no cluster sums)
    phase_mark(p.probe, 7);
    phase_mark(p.probe, 8);
    phase_exit(p.probe);
    return;
  }
  __syncthreads();  // every wgmma has read its stage: the stages hold the partial tile now
  stage_partial(acc, reinterpret_cast<float*>(smem), row_base, lane);
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  phase_mark(p.probe, 5);
  const int rank = static_cast<int>(cluster.block_rank());  // = split
  const float* red = reinterpret_cast<const float*>(smem);
  if constexpr (kEpi == kRotaryKv) {
    rotary_epilogue<T, kD>(cluster, red, p, rank, my_rows, tile, tid, kRowScale ? rstd : nullptr);
  } else if constexpr (kEpi == kAddRes) {
    add_residual_epilogue<T, (kForm & kFormPipe) != 0>(cluster, red, p, rank, my_rows, tile, tid,
                                                       res);
  } else if constexpr (kEpi == kSiluMul) {
    if ((kForm & kFormPipe) != 0 && p.splits <= kPortableCluster) {
      silu_epilogue_pipelined<TC>(cluster, red, p, sp, rank, my_rows, tile, tid, row_alpha);
    } else {
      for (int idx = tid; idx < my_rows * (kBN / 8); idx += kThreads) {
        const int row = rank + (idx / (kBN / 8)) * p.splits, col4 = (idx % (kBN / 8)) * 4;
        float g[4], u[4], v[4];
        cluster_sum4x2(cluster, red, p.splits, row, col4, 64 + col4, g, u);
        if (idx == tid) phase_mark(p.probe, 6);
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = silu_mul_rounded<TC>(g[e], u[e], row_alpha(row));
        store_cols<TC, 4>(c, sp, row, tile * 64 + col4, v);
      }
    }
  } else {
    for (int idx = tid; idx < my_rows * (kBN / 4); idx += kThreads) {
      const int row = rank + (idx / (kBN / 4)) * p.splits, col4 = (idx % (kBN / 4)) * 4;
      float r[4];
      cluster_sum4(cluster, red, p.splits, row, col4, r);
      if (idx == tid) phase_mark(p.probe, 6);
      store_cols<TC, 4>(c, sp, row, tile * kBN + col4, r);
    }
  }
  if (my_rows == 0) phase_mark(p.probe, 6);  // (thread 0 had no item: every block marks 6)
  phase_mark(p.probe, 7);
  cluster.sync();  // no block leaves while another still reads its shared memory
  phase_mark(p.probe, 8);
  phase_exit(p.probe);
#endif
}

namespace {

std::atomic<int> g_wgmma_override{-1};  // gemm_wgmma_set_enabled (benchmarks)

// Whether ops::gemm sends 3..64-row problems here (VELA_WGMMA_GEMM=0: the skinny GEMM and
// cuBLASLt, for A/B runs; the fused epilogues are then off too).
bool wgmma_env_enabled() {
  static const bool on = env_enabled("VELA_WGMMA_GEMM");
  return on;
}

// The cluster size splits may use: VELA_WGMMA_MAX_CLUSTER (2..16, default 16).
int max_cluster() {
  static const int n =
      static_cast<int>(env_int("VELA_WGMMA_MAX_CLUSTER", kMaxCluster, 2, kMaxCluster));
  return n;
}

// The largest cluster size (max_cluster(), then 8 and halved down to 2; 1 when none fits) whose
// clusters of this kernel can be resident on the current device (largest_resident_cluster).
// Queried once per device and thread (every instantiation has the same resources).
int resident_cluster_limit() {
  static thread_local int cached_device = -1, cached = kPortableCluster;
  const int device = vela::cuda::current_device();
  if (cached_device == device) return cached;
  opt_in_smem(wgmma_gemm_kernel<bf16, bf16>, kSmemBytes);
  // A driver that refuses clusters past 8 to this kernel refuses them to its siblings too.
  cached = largest_resident_cluster(wgmma_gemm_kernel<bf16, bf16>, max_cluster(), kThreads,
                                    kSmemBytes, 1);
  cached_device = device;
  return cached;
}

// Launches `kernel` (either GEMM kernel) over n_tiles x p.splits blocks, the splits of a tile one
// thread-block cluster, with programmatic dependent launch.
template <typename Kernel, typename Args>
void launch(Kernel kernel, const Args& p, int n_tiles, int smem_bytes = kSmemBytes) {
  opt_in_smem(kernel, kSmemBytes);
  VELA_CHECK(allow_cluster(kernel, p.splits), "wgmma GEMM: the driver refuses clusters of ",
             p.splits, " blocks (VELA_WGMMA_MAX_CLUSTER=8 keeps the portable size)");
  launch_cluster_pdl(kernel, dim3(static_cast<unsigned>(n_tiles), static_cast<unsigned>(p.splits)),
                     dim3(kThreads), static_cast<size_t>(smem_bytes), cluster_dims(p.splits, 1), p);
}

std::atomic<int> g_tma_override{-1};  // gemm_wgmma_set_tma (benchmarks, tests)

// Whether the plain GEMM takes the TMA kernel (VELA_WGMMA_TMA=0: the cp.async kernel).
bool tma_enabled() {
  const int o = g_tma_override.load(std::memory_order_relaxed);
  if (o >= 0) return o != 0;
  static const bool on = env_enabled("VELA_WGMMA_TMA");
  return on;
}

// Shared-memory stages for the TMA kernel: no more than a split's chunks (at least 2, which hold
// the partial tile), so a split-K GEMM of 3 chunks a block (bench-1b's q|k|v and o at 64 rows:
// 8 splits of 24) launches 73 KiB blocks instead of 97 and the kernels around it under
// programmatic dependent launch (decode attention, gate|up) can be resident beside it.
// VELA_WGMMA_FIT_STAGES=0 keeps kStages for every shape.
int tma_stages(int n_chunks, int splits) {
  static const bool fit = env_enabled("VELA_WGMMA_FIT_STAGES");
  if (!fit) return kStages;
  const int per_split = (n_chunks + splits - 1) / splits;
  return std::clamp(per_split, 2, kStages);
}

// The phase probe's row of a TMA kernel (phase_probe.h): one per epilogue, the residual add split
// into o (k <= n) and down (k > n); null unless this is a probe build run with VELA_PHASE_PROBE=1.
// Each row's gaps are measured from the kind that runs before it in a decode layer (probe_pred).
template <int kEpi>
unsigned long long* probe_row(int64_t n, int64_t k) {
  static const char* const kPhases[kProbePhases] = {"",
                                                    "entry -> wait released (head start)",
                                                    "-> setup done (a loads issued)",
                                                    "-> first chunk landed",
                                                    "-> main loop done",
                                                    "-> partials staged, cluster synced",
                                                    "-> first item's cluster sums landed",
                                                    "-> epilogue done",
                                                    "-> cluster synced, exit"};
  auto row = [&](ProbeRow r, const char* name) {
    return phase_probe_row(r, name, kPhases, probe_pred(r));
  };
  switch (kEpi) {
    case kSiluMul:
      return row(kProbeRowGateUp, "wgmma gate|up (SiLU)");
    case kRotaryKv:
      return row(kProbeRowQkv, "wgmma q|k|v (rotary, KV)");
    case kAddRes:
      return k <= n ? row(kProbeRowO, "wgmma o (+ residual)")
                    : row(kProbeRowDown, "wgmma down (+ residual)");
    case kArgmaxOut:
      return row(kProbeRowLmHead, "wgmma LM head (argmax)");
    default:
      return row(kProbeRowPlain, "wgmma plain");
  }
}

// The fewest rows at which the decode layer's fused forms (q|k|v, o, gate|up, down) let the next
// kernel launch only after their main loop instead of right after their wait:
// VELA_WGMMA_LATE_TRIGGER_ROWS (default 64); VELA_WGMMA_LATE_TRIGGER=1 makes it every row count,
// =0 none (the A/B of tools/gpu_decode.sh trigger). Session 55, one H100, two alternating rounds
// (bench/results/wgmma_late_trigger_h100.txt): batch64 1.839 / 1.850 -> 1.803 / 1.815 ms, batch16
// 1.588 / 1.604 -> 1.614 / 1.617. At 64 rows the epilogues share the SM with the next kernel's
// blocks, resident from the early trigger on and streaming their weights (the phase probe: q|k|v's
// 16 cluster loads took 2.0 us to land); at 16 rows that head start is worth more.
// The fewest rows a decode-layer form takes: `var`=1 every row count, `var`=0 none (kRows + 1),
// else `rows_var` (1..kRows + 1, default kRows).
int form_rows(const char* var, const char* rows_var) {
  if (env_opted_in(var)) return 1;
  if (!env_enabled(var)) return kRows + 1;
  return static_cast<int>(env_int(rows_var, kRows, 1, kRows + 1));
}

int late_trigger_rows() {
  static const int rows = form_rows("VELA_WGMMA_LATE_TRIGGER", "VELA_WGMMA_LATE_TRIGGER_ROWS");
  return rows;
}

// The fewest rows at which the decode layer's kAddRes (o, down) and kSiluMul (gate|up) epilogues
// load an item's cluster parts before the previous item's stores (kFormPipe; the same bits):
// VELA_WGMMA_PIPE_ITEMS_ROWS (default 64); VELA_WGMMA_PIPE_ITEMS=1 makes it every row count, =0
// none (the A/B of tools/gpu_decode.sh pipe). Session 56, one H200, three alternating rounds
// (bench/results/wgmma_pipe_items_h200.txt): batch64 40,443 / 40,355 / 40,172 -> 40,739 / 40,709 /
// 40,554 tok/s; batch32 and batch4 ~0.5% slower, batch16 ~0.5% faster. At 64 rows gate|up holds
// four items a block (the phase probe, session 55: ~0.65 us each after the first).
std::atomic<int> g_pipe_override{-1};  // gemm_wgmma_set_pipe_items (tests)

bool pipe_items(int rows) {
  const int o = g_pipe_override.load(std::memory_order_relaxed);
  if (o >= 0) return o != 0;
  static const int from = form_rows("VELA_WGMMA_PIPE_ITEMS", "VELA_WGMMA_PIPE_ITEMS_ROWS");
  return rows >= from;
}

// The TMA kernel with epilogue kEpi (kD: kRotaryKv's head_dim; kRowScale: p.scale's rstd scales
// each output row) over the 128-row tiles of w for a @ w^T; `p` holds the epilogue's output
// operands, out_dtype c's dtype. False when the driver cannot make the tensor maps, or kRotaryKv /
// kAddRes would run without split-K.
template <int kEpi, int kD = 0, bool kRowScale = false>
bool run_tma(const Tensor& a, const Tensor& w, float alpha, DType out_dtype, TmaArgs& p) {
  const int64_t m = a.size(0), k = a.size(1);
  p.splits = wgmma_gemm_splits(w.size(0), k, n_sms(), resident_cluster_limit());
  if ((kEpi == kRotaryKv || kEpi == kAddRes) && p.splits == 1) return false;
  if (kEpi == kArgmaxOut && p.splits != 1) return false;  // the pieces come from one block's tile
  if (kEpi != kPlainOut && out_dtype != (kEpi == kArgmaxOut ? DType::kF32 : a.dtype()))
    return false;  // the epilogues store a's dtype (kArgmaxOut: f32)
  if (!tma::encode_2d(&p.w_map, w.data_ptr(), w.dtype(), w.size(0), k, w.stride(0), 64) ||
      !tma::encode_2d(&p.a_map, a.data_ptr(), a.dtype(), m, k, a.stride(0), 64))
    return false;
  p.probe = probe_row<kEpi>(w.size(0), k);
  p.m = static_cast<int>(m);
  p.n_chunks = static_cast<int>((k + kBK - 1) / kBK);
  p.stages = tma_stages(p.n_chunks, p.splits);
  p.alpha = alpha;
  // A tile is 128 rows of w: 128 output columns, 64 gate and 64 up rows, or whole heads.
  const int n_tiles = static_cast<int>((w.size(0) + kBN - 1) / kBN);
  gemm_pipeline::dispatch_dtypes(a.dtype(), out_dtype, [&](auto t, auto tc) {
    using T = decltype(t);
    using TC = decltype(tc);
    if constexpr (kEpi == kPlainOut ||
                  std::is_same_v<std::conditional_t<kEpi == kArgmaxOut, float, T>, TC>) {
      // The decode layer's split-K forms trigger their dependents after the main loop from
      // late_trigger_rows() rows on; kAddRes / kSiluMul pipeline their items from pipe_items'
      // rows on (kForm: each a separate instantiation, so the plain form compiles as without
      // them).
      constexpr bool kLayerForm = kEpi == kSiluMul || kEpi == kRotaryKv || kEpi == kAddRes;
      const int smem = p.stages * kStageBytes + 1024;
      auto go = [&](auto form) {
        launch(wgmma_tma_gemm_kernel<T, TC, kEpi, kD, kRowScale, decltype(form)::value>, p, n_tiles,
               smem);
      };
      if constexpr (kLayerForm) {
        const bool late = p.m >= late_trigger_rows();
        if constexpr (kEpi == kSiluMul || kEpi == kAddRes) {
          if (pipe_items(p.m)) {
            if (late)
              go(std::integral_constant<int, kFormLate | kFormPipe>{});
            else
              go(std::integral_constant<int, kFormPipe>{});
            return;
          }
        }
        if (late) {
          go(std::integral_constant<int, kFormLate>{});
          return;
        }
      }
      go(std::integral_constant<int, 0>{});
    }
  });
  return true;
}

// p.scale for kRowScale: row_sq [m, ceil(k / 128)] f32, contiguous (the host op checked it); false
// when it does not suit the kernel.
bool fill_scale(const Tensor& a, const Tensor& row_sq, float eps, RowScale& rs) {
  if (row_sq.dim() != 2 || row_sq.dtype() != DType::kF32 || row_sq.size(0) != a.size(0) ||
      !row_sq.is_contiguous())
    return false;
  rs.row_sq = static_cast<const float*>(row_sq.data_ptr());
  rs.groups = static_cast<int>(row_sq.size(1));
  rs.k = static_cast<int>(a.size(1));
  rs.eps = eps;
  return true;
}

// Whether a [m, k] bf16/f16 `a` and its weight `w` suit the wgmma GEMM on this device (sm_90).
bool wgmma_operands_ok(const Tensor& a, const Tensor& w) {
  if (a.dim() != 2 || w.dim() != 2 || a.dtype() != w.dtype()) return false;
  if (a.dtype() != DType::kBF16 && a.dtype() != DType::kF16) return false;
  const int64_t m = a.size(0), k = a.size(1);
  if (m <= gemv_max_rows() || m > wgmma_max_rows() || w.size(1) != k || k % 8 != 0) return false;
  if (a.stride(1) != 1 || w.stride(1) != 1 || a.stride(0) % 8 != 0 || w.stride(0) % 8 != 0)
    return false;
  if (!is_aligned(a.data_ptr(), 16) || !is_aligned(w.data_ptr(), 16)) return false;
  if (w.size(0) > 0x7fffffff || k > 0x7fffffff) return false;
  DeviceGuard guard(a.device().index);
  const cudaDeviceProp& prop = vela::cuda::device_properties();
  return prop.major == 9 && prop.minor == 0;  // sm_90a code only
}

}  // namespace

bool wgmma_takes_rows(int64_t n_rows, Device device) {
  if (n_rows <= gemv_max_rows() || n_rows > wgmma_max_rows()) return false;
  DeviceGuard guard(device.index);
  const cudaDeviceProp& prop = vela::cuda::device_properties();
  return prop.major == 9 && prop.minor == 0;  // sm_90a code only
}

void gemm_wgmma_set_enabled(int on) { g_wgmma_override = on < 0 ? -1 : (on != 0); }

int wgmma_max_rows() {
  const int o = g_wgmma_override.load(std::memory_order_relaxed);
  if (o == 0 || (o < 0 && !wgmma_env_enabled())) return 0;  // off
  // VELA_WGMMA_ROWS: the row cap (A/B runs against cuBLASLt above it).
  static const int env_rows =
      static_cast<int>(env_int("VELA_WGMMA_ROWS", kWgmmaDefaultRows, 3, kWgmmaMaxRows));
  return o > 0 ? kWgmmaMaxRows : env_rows;
}

int wgmma_gemm_splits(int64_t n, int64_t k, int sm_count, int max_cluster) {
  const int64_t n_tiles = (n + kBN - 1) / kBN;
  const int64_t n_chunks = (k + kBK - 1) / kBK;
  if (n_tiles >= sm_count) return 1;
  int64_t splits = (sm_count + n_tiles - 1) / n_tiles;  // about one block per SM (two: slower)
  // Past the portable 8, no more blocks than SMs (16 tiles: 8 splits, not 9 = 144 blocks; traced
  // on an H100, bench-1b's q|k|v at 9 took 0.5 us longer in the chain than at 8).
  if (splits > kPortableCluster) splits = std::max<int64_t>(kPortableCluster, sm_count / n_tiles);
  // Every split keeps at least two chunks where K allows (one chunk has no pipeline).
  splits = std::min<int64_t>(
      {splits, std::clamp(max_cluster, 1, kMaxCluster), std::max<int64_t>(1, n_chunks / 2)});
  return static_cast<int>(std::max<int64_t>(splits, 1));
}

bool gemm_wgmma(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b,
                float alpha, float beta) {
  if (trans_a || !trans_b || beta != 0.0f) return false;
  // The GEMV's operand rules (aligned bf16/f16 rows, 16-byte rows of w), up to this kernel's rows.
  if (a.dim() != 2 || !gemv_detail::gemv_operands_ok(a, a.size(1), b, c, wgmma_max_rows()))
    return false;
  const int64_t m = a.size(0), k = a.size(1), n = b.size(0);
  if (m <= gemv_max_rows() || n > 0x7fffffff || k > 0x7fffffff) return false;
  const DType dt = a.dtype();
  if (c.dtype() != dt && c.dtype() != DType::kF32) return false;
  DeviceGuard guard(c.device().index);
  const cudaDeviceProp& prop = vela::cuda::device_properties();
  if (prop.major != 9 || prop.minor != 0) return false;  // sm_90a code only
  if (tma_enabled()) {
    TmaArgs t{};
    t.c = c.data_ptr();
    t.ldc = c.stride(0);
    t.n = static_cast<int>(n);
    t.pairs = c.stride(0) % 2 == 0 && is_aligned(c.data_ptr(), 2 * dtype_size(c.dtype()));
    if (run_tma<kPlainOut>(a, b, alpha, c.dtype(), t)) return true;
  }
  WgmmaArgs p{};
  gemm_pipeline::fill_operands(p, a, b, c, alpha);
  p.splits = wgmma_gemm_splits(n, k, n_sms(), resident_cluster_limit());
  p.pairs = c.stride(0) % 2 == 0 && is_aligned(c.data_ptr(), 2 * dtype_size(c.dtype()));
  const int n_tiles = static_cast<int>((n + kBN - 1) / kBN);
  gemm_pipeline::dispatch_dtypes(dt, c.dtype(), [&](auto t, auto tc) {
    launch(wgmma_gemm_kernel<decltype(t), decltype(tc)>, p, n_tiles);
  });
  return true;
}

void gemm_wgmma_set_tma(int on) { g_tma_override = on < 0 ? -1 : (on != 0); }

void gemm_wgmma_set_pipe_items(int on) { g_pipe_override = on < 0 ? -1 : (on != 0); }

int gemm_wgmma_splits_on(Device device, int64_t n, int64_t k) {
  DeviceGuard guard(device.index);
  return wgmma_gemm_splits(n, k, n_sms(), resident_cluster_limit());
}

bool gemm_wgmma_argmax_chunks(const Tensor& a, const Tensor& w, Tensor& logits, Tensor& chunk_max) {
  if (!wgmma_operands_ok(a, w)) return false;
  if (logits.dim() != 2 || logits.dtype() != DType::kF32 || logits.stride(1) != 1) return false;
  DeviceGuard guard(a.device().index);
  TmaArgs p{};
  p.c = logits.data_ptr();
  p.ldc = logits.stride(0);
  p.n = static_cast<int>(w.size(0));
  p.pairs = logits.stride(0) % 2 == 0 && is_aligned(logits.data_ptr(), 8);
  p.chunk_max = reinterpret_cast<uint64_t*>(chunk_max.data_ptr());
  p.ld_chunk_max = chunk_max.stride(0);
  return run_tma<kArgmaxOut>(a, w, 1.0f, DType::kF32, p);
}

bool gemm_wgmma_silu_mul(const Tensor& a, const Tensor& w, Tensor& act, const Tensor& row_sq,
                         float norm_eps) {
  static const bool on = env_enabled("VELA_GEMM_SILU_MUL");
  if (!on || !wgmma_operands_ok(a, w)) return false;
  if (act.dim() != 2 || act.dtype() != a.dtype() || act.stride(1) != 1) return false;
  const int64_t inter = act.size(1);
  if (w.size(0) != 2 * inter || act.size(0) != a.size(0)) return false;
  DeviceGuard guard(act.device().index);
  TmaArgs p{};
  p.c = act.data_ptr();
  p.ldc = act.stride(0);
  p.n = static_cast<int>(inter);
  p.pairs = act.stride(0) % 2 == 0 && is_aligned(act.data_ptr(), 2 * dtype_size(act.dtype()));
  if (!row_sq.defined()) return run_tma<kSiluMul>(a, w, 1.0f, act.dtype(), p);
  return fill_scale(a, row_sq, norm_eps, p.scale) &&
         run_tma<kSiluMul, 0, true>(a, w, 1.0f, act.dtype(), p);
}

bool gemm_wgmma_rotary_kv_write(const Tensor& a, const Tensor& w, const Tensor& positions,
                                const Tensor& table, const Tensor& q_norm, const Tensor& k_norm,
                                float eps, const Tensor& out_cache_loc, Tensor& q_out,
                                Tensor& k_cache, Tensor& v_cache, const Tensor& row_sq,
                                float norm_eps) {
  static const bool on = env_enabled("VELA_GEMM_ROTARY");
  if (!on || !wgmma_operands_ok(a, w)) return false;
  const int64_t d = q_out.size(2);
  if ((d != 64 && d != 128) || table.size(1) != d) return false;  // whole heads, full rotary
  if (q_norm.defined() && q_norm.dtype() != k_norm.dtype()) return false;  // one norm_f32 flag
  for (const Tensor* t : {&q_out, &k_cache, &v_cache})
    if (!is_aligned(t->data_ptr(), 16)) return false;
  DeviceGuard guard(a.device().index);
  TmaArgs p{};
  p.n = static_cast<int>(w.size(0));
  RotaryKv& r = p.rot;
  r.positions = static_cast<const int32_t*>(positions.data_ptr());
  r.table = static_cast<const float*>(table.data_ptr());
  r.max_positions = table.size(0);
  r.q_norm = q_norm.defined() ? q_norm.data_ptr() : nullptr;
  r.k_norm = k_norm.defined() ? k_norm.data_ptr() : nullptr;
  r.norm_f32 = q_norm.defined() && q_norm.dtype() == DType::kF32;
  r.eps = eps;
  r.loc = static_cast<const int32_t*>(out_cache_loc.data_ptr());
  r.n_slots = k_cache.size(0);
  r.q_out = q_out.data_ptr();
  r.k_cache = k_cache.data_ptr();
  r.v_cache = v_cache.data_ptr();
  r.n_heads = static_cast<int>(q_out.size(1));
  r.n_kv_heads = static_cast<int>(k_cache.size(1));
  if (row_sq.defined() && !fill_scale(a, row_sq, norm_eps, p.scale)) return false;
  const DType dt = a.dtype();
  if (row_sq.defined())
    return d == 64 ? run_tma<kRotaryKv, 64, true>(a, w, 1.0f, dt, p)
                   : run_tma<kRotaryKv, 128, true>(a, w, 1.0f, dt, p);
  return d == 64 ? run_tma<kRotaryKv, 64>(a, w, 1.0f, dt, p)
                 : run_tma<kRotaryKv, 128>(a, w, 1.0f, dt, p);
}

bool gemm_wgmma_add(const Tensor& a, const Tensor& w, Tensor& residual, const Tensor& next_w,
                    Tensor& scaled, Tensor& row_sq) {
  if (!wgmma_operands_ok(a, w)) return false;
  if (residual.dim() != 2 || residual.dtype() != a.dtype() || residual.stride(1) != 1 ||
      residual.size(0) != a.size(0) || residual.size(1) != w.size(0))
    return false;
  const int64_t n_tiles = (w.size(0) + kBN - 1) / kBN;
  if (row_sq.dim() != 2 || row_sq.dtype() != DType::kF32 || row_sq.size(0) != a.size(0) ||
      row_sq.size(1) != n_tiles || !row_sq.is_contiguous())
    return false;
  if (scaled.dtype() != a.dtype() || scaled.stride(1) != 1 || next_w.dim() != 1 ||
      next_w.stride(0) != 1 || next_w.size(0) != w.size(0) ||
      (next_w.dtype() != DType::kF32 && next_w.dtype() != a.dtype()))
    return false;
  DeviceGuard guard(a.device().index);
  TmaArgs p{};
  p.c = residual.data_ptr();
  p.ldc = residual.stride(0);
  p.n = static_cast<int>(w.size(0));
  p.row_sq_out = static_cast<float*>(row_sq.data_ptr());
  p.scaled = scaled.data_ptr();
  p.ld_scaled = scaled.stride(0);
  p.next_w = next_w.data_ptr();
  p.next_w_f32 = next_w.dtype() == DType::kF32;
  return run_tma<kAddRes>(a, w, 1.0f, a.dtype(), p);
}

}  // namespace vela::ops::cuda
