// Skinny GEMM on tensor cores: c[M, N] = alpha * a[M, K] @ w[N, K]^T for 3..8 rows of bf16/f16 a
// (small-batch decode, speculative verify), the weight streamed once. Measured against cuBLASLt on
// the H200 (docs/kernels.md, "Small batches"): about even per GEMM at 3..8 rows, bench-1b decode
// at batch 4 1.506 -> 1.416 ms per step, batch 8 even; at 16..64 rows it lost (split-K's extra
// round trips and every warp re-reading the rows of a), so cuBLASLt keeps those.
//
// A block owns BN = 64 output columns (4 warps x 16) and a range of K (split-K when the N tiles
// alone would not give every SM two blocks). Every 64-wide K chunk of w [64 x 64] and of a
// [16 x 64] (rows past M zero) goes global -> shared through a kStages-deep cp.async pipeline
// (swizzled rows, zero-filled past N and K), and every warp runs m16n8k16 mma.sync over its 16
// columns, accumulating in fp32. Without split-K the block stores alpha * acc. With
// it, each block writes its fp32 partial tile to the scratch and takes a ticket from the tile's
// counter; the last block to arrive sums the partials in split order (so the result does not
// depend on which block came last), stores, and resets the counter to zero for the next launch.
// Launched with programmatic dependent launch: the first weight chunks load before pdl_wait().
#include <algorithm>
#include <atomic>

#include "core/env.h"
#include "ops/cuda/attention_common.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/gemm_pipeline.cuh"
#include "ops/cuda/gemv_kernel.cuh"
#include "ops/cuda/pdl.cuh"

namespace vela::ops::cuda {

namespace {

constexpr int kBN = 64;  // output columns per block
constexpr int kBK = gemm_pipeline::kBK;
constexpr int kStages = 4;       // cp.async stages in flight
constexpr int kThreads = 128;    // 4 warps x 16 columns
constexpr int kBlocksPerSm = 2;  // what the split-K rule aims at

struct SkinnyArgs : gemm_pipeline::Operands {
  int splits;  // K ranges per N tile
  float alpha;
  float* partials;  // splits > 1: [n_tiles][splits][16][kBN] fp32
  int* counters;    // splits > 1: [n_tiles], zero between launches
};

constexpr int kRowsA = 16;  // the mma's rows; a's rows past M are zero
constexpr int kSmemBytes = kStages * (kBN + kRowsA) * kBK * 2;
// Dynamic plus static (the ticket) shared memory stays under the default 48 KiB: no opt-in.
static_assert(kSmemBytes + 64 <= 48 * 1024, "skinny GEMM shared memory");

}  // namespace

template <typename T, typename TC>
static __global__ void __launch_bounds__(kThreads) skinny_gemm_kernel(SkinnyArgs p) {
  constexpr int kStageElems = (kBN + kRowsA) * kBK;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* smem = reinterpret_cast<T*>(smem_raw);
  __shared__ int s_ticket;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int tile = blockIdx.x, split = blockIdx.y;
  const int col0 = tile * kBN;
  const gemm_pipeline::ChunkRange range = gemm_pipeline::split_chunks(split, p.splits, p.n_chunks);
  const int c_begin = range.begin, n_local = range.end - range.begin;
  const T* w = static_cast<const T*>(p.w);
  const T* a = static_cast<const T*>(p.a);

  // Chunk `ci` (global chunk index) into stage `st`: w rows (the block's columns) and a rows; rows
  // past N / M and elements past K are zero.
  auto load_w = [&](int ci, int st) {
    gemm_pipeline::load_chunk<kBN, kThreads>(smem + st * kStageElems, w, p.ldw, col0, p.n, ci * kBK,
                                             p.k, tid);
  };
  auto load_a = [&](int ci, int st) {
    gemm_pipeline::load_chunk<kRowsA, kThreads>(smem + st * kStageElems + kBN * kBK, a, p.lda, 0,
                                                p.m, ci * kBK, p.k, tid);
  };
  gemm_pipeline::prologue<kStages>(c_begin, n_local, load_w, load_a);

  float acc[2][4];
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;

  for (int i = 0; i < n_local; ++i) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage i landed everywhere; everyone is done with stage i - 1
    {
      const int nxt = i + kStages - 1;
      if (nxt < n_local) {
        load_w(c_begin + nxt, nxt % kStages);
        load_a(c_begin + nxt, nxt % kStages);
      }
      cp_async_commit();
    }
    const T* sw = smem + (i % kStages) * kStageElems;
    const T* sa = sw + kBN * kBK;
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      uint32_t b[4];
      const int col = warp * 16 + (lane & 7) + ((lane >> 4) << 3);
      ldmatrix_x4(b, sw + smem_swizzle<kBK>(col, 2 * kk + ((lane >> 3) & 1)));
      uint32_t af[4];
      ldmatrix_x4(af, sa + smem_swizzle<kBK>(lane & 15, 2 * kk + (lane >> 4)));
      mma_16816<T>(acc[0], af, b[0], b[1]);
      mma_16816<T>(acc[1], af, b[2], b[3]);
    }
  }
  cp_async_wait<0>();

  // Fragment (nt, e): row lane / 4 (+ 8 for e >= 2), column warp * 16 + nt * 8 + 2 * (lane % 4) +
  // e % 2 of the block's tile.
  TC* c = static_cast<TC*>(p.c);
  if (p.splits == 1) {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = (lane >> 2) + (e >> 1) * 8;
        const int col = col0 + warp * 16 + nt * 8 + 2 * (lane & 3) + (e & 1);
        if (row < p.m && col < p.n) c[row * p.ldc + col] = from_float<TC>(p.alpha * acc[nt][e]);
      }
    }
    return;
  }
  // Split-K: this block's partial tile, then a ticket; the last of the tile's blocks reduces.
  float* part = p.partials + (static_cast<int64_t>(tile) * p.splits + split) * kRowsA * kBN;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = (lane >> 2) + h * 8;
      const int col = warp * 16 + nt * 8 + 2 * (lane & 3);
      *reinterpret_cast<float2*>(part + row * kBN + col) =
          make_float2(acc[nt][2 * h], acc[nt][2 * h + 1]);
    }
  }
  __threadfence();  // the partial is visible device-wide before the ticket is taken
  __syncthreads();
  if (tid == 0) s_ticket = atomicAdd(p.counters + tile, 1);
  __syncthreads();
  if (s_ticket != p.splits - 1) return;
  __threadfence();  // see every other block's partial
  const float* base = p.partials + static_cast<int64_t>(tile) * p.splits * kRowsA * kBN;
  for (int idx = tid; idx < p.m * (kBN / 4); idx += kThreads) {
    const int row = idx / (kBN / 4), col4 = (idx % (kBN / 4)) * 4;
    float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int s = 0; s < p.splits; ++s) {
      const float4 v =
          __ldcg(reinterpret_cast<const float4*>(base + (s * kRowsA + row) * kBN + col4));
      sum.x += v.x;
      sum.y += v.y;
      sum.z += v.z;
      sum.w += v.w;
    }
    const float r[4] = {sum.x, sum.y, sum.z, sum.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int col = col0 + col4 + j;
      if (col < p.n) c[row * p.ldc + col] = from_float<TC>(p.alpha * r[j]);
    }
  }
  if (tid == 0) p.counters[tile] = 0;  // ready for the next launch (graphs replay this one)
}

namespace {

std::atomic<int> g_skinny_override{-1};  // gemm_skinny_set_enabled (benchmarks)

// Whether ops::gemm sends 3..8-row problems here (VELA_SKINNY_GEMM=0: cuBLASLt, for A/B runs).
bool skinny_enabled() {
  static const bool on = env_enabled("VELA_SKINNY_GEMM");
  const int o = g_skinny_override.load(std::memory_order_relaxed);
  return o < 0 ? on : o != 0;
}

template <typename T, typename TC>
void launch_skinny(const SkinnyArgs& p, int n_tiles) {
  launch_pdl(skinny_gemm_kernel<T, TC>,
             dim3(static_cast<unsigned>(n_tiles), static_cast<unsigned>(p.splits)), dim3(kThreads),
             kSmemBytes, p);
}

}  // namespace

void gemm_skinny_set_enabled(int on) { g_skinny_override = on < 0 ? -1 : (on != 0); }

int skinny_gemm_splits(int64_t n, int64_t k, int sm_count) {
  const int64_t n_tiles = (n + kBN - 1) / kBN;
  const int64_t n_chunks = (k + kBK - 1) / kBK;
  const int64_t target = static_cast<int64_t>(kBlocksPerSm) * sm_count;
  int64_t splits = (target + n_tiles - 1) / n_tiles;
  splits = std::min<int64_t>({splits, n_chunks, kSkinnyMaxSplits});
  // Every split keeps at least two chunks where K allows (a pipeline of one chunk is a GEMV).
  splits = std::min<int64_t>(splits, std::max<int64_t>(1, n_chunks / 2));
  return static_cast<int>(std::max<int64_t>(splits, 1));
}

bool gemm_skinny(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b,
                 float alpha, float beta) {
  if (!skinny_enabled() || trans_a || !trans_b || beta != 0.0f) return false;
  // The GEMV's operand rules (1..8 aligned bf16/f16 rows, 16-byte rows of w) are this kernel's.
  if (a.dim() != 2 || !gemv_detail::gemv_operands_ok(a, a.size(1), b, c)) return false;
  const int64_t m = a.size(0), k = a.size(1), n = b.size(0);
  static_assert(kSkinnyMaxRows <= kRowsA, "one m16 tile of rows");
  if (m > kSkinnyMaxRows || m <= gemv_max_rows() || n > 0x7fffffff || k > 0x7fffffff) return false;
  const DType dt = a.dtype();
  if (c.dtype() != dt && c.dtype() != DType::kF32) return false;
  DeviceGuard guard(c.device().index);
  SkinnyArgs p{};
  gemm_pipeline::fill_operands(p, a, b, c, alpha);
  const int n_tiles = static_cast<int>((n + kBN - 1) / kBN);
  p.splits = skinny_gemm_splits(n, k, n_sms());
  if (p.splits > 1) {
    const size_t need = static_cast<size_t>(n_tiles) * p.splits * kRowsA * kBN * sizeof(float);
    SkinnyScratch s = gemm_skinny_scratch(c.device().index);
    if (need > s.partial_bytes || n_tiles > s.n_counters) {
      p.splits = 1;  // too big for the scratch: one K range per tile
    } else {
      p.partials = s.partials;
      p.counters = s.counters;
    }
  }
  gemm_pipeline::dispatch_dtypes(dt, c.dtype(), [&](auto t, auto tc) {
    launch_skinny<decltype(t), decltype(tc)>(p, n_tiles);
  });
  return true;
}

}  // namespace vela::ops::cuda
