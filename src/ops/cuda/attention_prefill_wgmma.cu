// Hopper ragged paged prefill attention (bf16 / f16, head_dim 64 or 128) on wgmma: the 128-row
// work tiles of the host plan (ops::plan_prefill_tiles), the same arguments and results as the
// mma.sync kernel of attention_prefill.cu, which runs everything this one does not take.
//
// One block = (query head, 128-row tile), two warpgroups of 64 query rows each. K/V tiles of 64
// keys are gathered by slot with cp.async (all 256 threads, double buffered, the slots of the tile
// after next prefetched into registers) into the 128-byte swizzled layout wgmma reads (wgmma.cuh;
// at head_dim 128 as two 64-column panels). Per key tile each warpgroup runs S = Q K^T as
// wgmma.m64n64k16 from shared memory (Q and K both K-major), applies the causal mask where a key
// of the tile lies past the warpgroup's first row, updates the online softmax in registers
// (online_softmax_scores: the wgmma accumulator layout is the mma.sync one per warp), rounds P
// straight into A fragments and runs O += P V as wgmma.m64nDk16 with A from registers and V read
// MN-major (tnspB) from the same tile the gather wrote: no transpose anywhere. A warpgroup whose
// rows all precede a key tile (causal) or lie past the sequence skips it.
//
// Overlap: at head_dim 64 the waits are synchronous per warpgroup (S, softmax, PV in turn) and the
// four warpgroups of the two blocks resident per SM overlap each other's softmax with their MMAs.
// At head_dim 128 (one block per SM) each warpgroup issues tile kt's Q K^T together with tile
// kt - 1's P V and runs tile kt's softmax while that PV is in flight (FlashAttention-3's
// intra-warpgroup pipelining; three K/V buffers), rescaling O only once it lands: +1.3-2.4% there,
// 2-3% slower at head_dim 64 (bench/results/prefill_wgmma_h200.txt).
//
// Built for sm_90a only (vela_sm90a object library); attention_prefill.cu calls prefill_wgmma
// where VELA_HAS_SM90A is defined. VELA_WGMMA_PREFILL=0 turns it off (the mma.sync kernel runs
// the 128-row tiles at head_dim <= 64 and prefill_tile_q plans 64-row tiles above).
#include <atomic>

#include "core/cuda/cuda_api.h"
#include "core/env.h"
#include "ops/attention.h"
#include "ops/cuda/attention_common.cuh"
#include "ops/cuda/attention_prefill.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/wgmma.cuh"

namespace vela::ops::cuda {

namespace {

constexpr int kBM = kPrefillWideTileQ;  // query rows per tile: two warpgroups of 64
constexpr int kBN = 64;                 // keys per K/V tile
constexpr int kThreads = 256;
constexpr int kPanel = 64;  // columns per 128-byte swizzled panel
static_assert(kPanel * 2 == 128, "a panel row is one 128-byte swizzle row of 16-bit elements");

// K/V buffers: two for the synchronous loop, three for the overlapped one.
constexpr int kv_stages(bool overlap) { return overlap ? 3 : 2; }
template <int D, bool kOverlap>
constexpr int wgmma_prefill_smem_bytes() {
  // Q + stages x (K, V) + slack to align the base to 1024
  return (kBM * D + 2 * kv_stages(kOverlap) * kBN * D) * 2 + 1024;
}

// Element offset of 16-byte chunk c of row r in a [kRows][D] tile stored as D / 64 panels of
// [kRows][64], each in the 128-byte swizzle (smem_swizzle<64>).
template <int kRows>
__device__ __forceinline__ int panel_offset(int r, int c) {
  return (c >> 3) * kRows * kPanel + smem_swizzle<kPanel>(r, c & 7);
}

}  // namespace

template <typename T, int D, bool kOverlap>
static __global__ void __launch_bounds__(kThreads, D == 64 ? 2 : 1)
    prefill_wgmma_kernel(PrefillArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kStages = kv_stages(kOverlap);
  constexpr int kChunks = D / 8;                        // 16-byte chunks per row
  constexpr int kLoads = kBN * kChunks / kThreads;      // K/V chunks per thread per tile
  constexpr int kQLoads = kBM * kChunks / kThreads;     // Q chunks per thread
  constexpr uint32_t kPanelBytesKV = kBN * kPanel * 2;  // V's N panels (d128)
  static_assert(kLoads >= 1 && kLoads * kThreads == kBN * kChunks, "tile shape");
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw_addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  T* sq = reinterpret_cast<T*>(smem_raw + ((1024 - (raw_addr & 1023)) & 1023));  // [kBM][D]
  T* sk = sq + kBM * D;            // [kStages][kBN][D]
  T* sv = sk + kStages * kBN * D;  // [kStages][kBN][D]

  const int head = blockIdx.x;
  const PrefillTile t = prefill_tile(a, blockIdx.y, kBM);
  if (t.n_rows <= 0) return;
  const int kv_head = head / a.group;
  const int32_t* slots_of = a.req_to_token + a.req_pool_indices[t.seq] * a.r2t_stride;
  const int64_t slot_stride = static_cast<int64_t>(a.n_kv_heads) * D;
  const T* kbase = static_cast<const T*>(a.k_cache) + kv_head * D;
  const T* vbase = static_cast<const T*>(a.v_cache) + kv_head * D;
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;

  // Q tile (rows past the sequence zero-filled).
  const T* qbase = static_cast<const T*>(a.q) +
                   static_cast<int64_t>(t.qo0 + t.q_start) * a.q_token_stride + head * D;
#pragma unroll
  for (int i = 0; i < kQLoads; ++i) {
    const int idx = tid + i * kThreads, r = idx / kChunks, c = idx % kChunks;
    const bool valid = r < t.n_rows;
    cp_async16(sq + panel_offset<kBM>(r, c), qbase + (valid ? r * a.q_token_stride + c * 8 : 0),
               valid);
  }
  auto load_slots = [&](int kt, int(&slots)[kLoads]) {
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int p = kt * kBN + (tid + i * kThreads) / kChunks;
      slots[i] = p < t.n_keys ? slots_of[p] : -1;
    }
  };
  auto load_kv = [&](int buf, const int(&slots)[kLoads]) {
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int idx = tid + i * kThreads, r = idx / kChunks, c = idx % kChunks;
      const bool valid = slots[i] >= 0;
      const int64_t src = valid ? slots[i] * slot_stride + c * 8 : 0;
      const int dst = buf * kBN * D + panel_offset<kBN>(r, c);
      cp_async16(sk + dst, kbase + src, valid);
      cp_async16(sv + dst, vbase + src, valid);
    }
  };
  const int n_kt = (t.n_keys + kBN - 1) / kBN;
  int slots[kLoads];
  load_slots(0, slots);
  load_kv(0, slots);
  cp_async_commit();
  if (n_kt > 1) load_slots(1, slots);

  // This warpgroup's rows row0 .. row0 + 63; this thread's two rows (accumulator rows lane / 4 and
  // + 8 of its warp) at positions pos_a / pos_b (rows past the end take the last row's position:
  // computed on zeros, never stored).
  const int row0 = wg * 64;
  const int ra = row0 + warp * 16 + (lane >> 2);
  const int pos_a = t.pos_first + min(ra, t.n_rows - 1),
            pos_b = t.pos_first + min(ra + 8, t.n_rows - 1);
  const bool wg_live = row0 < t.n_rows;
  const int wg_last_pos = t.pos_first + min(row0 + 63, t.n_rows - 1);
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  // Key tiles this warpgroup reads: up to its last row's position (causal), none past the sequence.
  const int n_wg = wg_live ? min(n_kt, wg_last_pos / kBN + 1) : 0;

  // S = Q K^T (64 rows x 64 keys) of the tile in buffer buf, issued (not waited for); k16 step kk
  // is 32 bytes into panel kk / 4.
  auto issue_s = [&](float(&s)[kBN / 8][4], int buf) {
    const T* skb = sk + buf * kBN * D;
#pragma unroll
    for (int i = 0; i < kBN / 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const int panel = kk / 4;
      const uint64_t da = wgmma::desc_k_major(sq + panel * kBM * kPanel + row0 * kPanel);
      const uint64_t db = wgmma::desc_k_major(skb + panel * kBN * kPanel);
      wgmma::mma_ss<T, kBN>(s, wgmma::desc_add(da, (kk % 4) * 32),
                            wgmma::desc_add(db, (kk % 4) * 32), 1);
    }
    wgmma::commit();
  };
  // Causal mask where some key of tile kt lies past the warpgroup's first row.
  auto mask = [&](float(&s)[kBN / 8][4], int kt) {
    const int kb = kt * kBN;
    if (kb + kBN - 1 <= t.pos_first + row0) return;
#pragma unroll
    for (int nt = 0; nt < kBN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = kb + nt * 8 + 2 * (lane & 3) + (e & 1);
        if (key > (e < 2 ? pos_a : pos_b)) s[nt][e] = -INFINITY;
      }
    }
  };
  // P's accumulators become A fragments (two 8-key n-tiles = one 16-key k-step).
  auto pack_p = [&](uint32_t(&pa)[kBN / 16][4], const float(&s)[kBN / 8][4]) {
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      pa[kk][0] = pack2<T>(s[2 * kk][0], s[2 * kk][1]);
      pa[kk][1] = pack2<T>(s[2 * kk][2], s[2 * kk][3]);
      pa[kk][2] = pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pa[kk][3] = pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }
  };
  // O += P V with V of buffer buf read MN-major, 16 keys = 2048 bytes per k-step; issued.
  auto issue_pv = [&](const uint32_t(&pa)[kBN / 16][4], int buf) {
    const uint64_t dv = wgmma::desc_mn_major(sv + buf * kBN * D, kPanelBytesKV);
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk)
      wgmma::mma_rs_mn<T, D>(o, pa[kk], wgmma::desc_add(dv, kk * 16 * kPanel * 2));
    wgmma::commit();
  };
  // Top of key tile kt's step, every thread: tile kt has landed and every warpgroup is done with
  // the buffer the tile after it goes to; start that load.
  auto next_tile = [&](int kt) {
    cp_async_wait<0>();
    wgmma::fence_proxy_async();
    __syncthreads();
    if (kt + 1 < n_kt) {
      load_kv((kt + 1) % kStages, slots);
      if (kt + 2 < n_kt) load_slots(kt + 2, slots);
    }
    cp_async_commit();
  };

  uint32_t pa[kBN / 16][4];
  if constexpr (!kOverlap) {
    // Synchronous per warpgroup: S, softmax, PV in turn.
    for (int kt = 0; kt < n_kt; ++kt) {
      next_tile(kt);
      if (kt >= n_wg) continue;  // warpgroup-uniform
      float s[kBN / 8][4];
      wgmma::fence();
      issue_s(s, kt % kStages);
      wgmma::wait_all();
      mask(s, kt);
      online_softmax_tile(s, m, l, o, a.scale_log2);
      pack_p(pa, s);
      wgmma::fence();
      issue_pv(pa, kt % kStages);
      wgmma::wait_all();
    }
  } else {
    // Overlapped (FlashAttention-3's intra-warpgroup pipelining): tile kt's S = Q K^T is issued
    // together with tile kt - 1's O += P V, the softmax of tile kt runs while that PV is in flight,
    // and O takes tile kt's rescale only after it lands. Three K/V buffers: tiles kt - 1 (V), kt
    // and kt + 1 (loading) are live at once. Every wgmma group is waited for inside the branch that
    // issued it (ptxas serializes wgmma across a divergent path otherwise).
    next_tile(0);
    if (n_wg > 0) {
      float s[kBN / 8][4], corr[2];
      wgmma::fence();
      issue_s(s, 0);
      wgmma::wait_all();
      mask(s, 0);
      online_softmax_scores(s, m, l, corr, a.scale_log2);  // O is zero: no rescale
      pack_p(pa, s);
    }
    for (int kt = 1; kt < n_kt; ++kt) {
      next_tile(kt);
      if (kt < n_wg) {
        float s[kBN / 8][4], corr[2];
        wgmma::fence();
        issue_s(s, kt % kStages);
        issue_pv(pa, (kt - 1) % kStages);
        wgmma::wait<1>();  // S landed; the PV may still run
        mask(s, kt);
        online_softmax_scores(s, m, l, corr, a.scale_log2);
        wgmma::wait_all();
        online_softmax_rescale(o, corr);
        pack_p(pa, s);
      } else if (kt == n_wg) {  // the warpgroup's last tile's PV
        wgmma::fence();
        issue_pv(pa, (kt - 1) % kStages);
        wgmma::wait_all();
      }
    }
    if (n_wg == n_kt && n_wg > 0) {
      wgmma::fence();
      issue_pv(pa, (n_kt - 1) % kStages);
      wgmma::wait_all();
    }
  }
  cp_async_wait<0>();

  // Normalize and store (row sums reduced over the quad).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  T* out = static_cast<T*>(a.out);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = ra + 8 * r;
    if (row >= t.n_rows) continue;
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    T* orow = out + (static_cast<int64_t>(t.qo0 + t.q_start + row) * a.n_heads + head) * D;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
      *reinterpret_cast<uint32_t*>(orow + dt * 8 + 2 * (lane & 3)) =
          pack2<T>(o[dt][2 * r] * inv, o[dt][2 * r + 1] * inv);
  }
#endif
}

namespace {

std::atomic<int> g_prefill_override{-1};  // prefill_wgmma_set_enabled (tests, benchmarks)

bool prefill_env_enabled() {
  static const bool on = env_enabled("VELA_WGMMA_PREFILL");
  return on;
}

template <typename T, int D>
void launch_prefill_wgmma(const PrefillArgs& a, int64_t n_tiles) {
  constexpr bool kOverlap = D == 128;  // see the file comment
  constexpr int kSmem = wgmma_prefill_smem_bytes<D, kOverlap>();
  opt_in_smem(prefill_wgmma_kernel<T, D, kOverlap>, kSmem);
  const dim3 grid(static_cast<unsigned>(a.n_heads), static_cast<unsigned>(n_tiles));
  prefill_wgmma_kernel<T, D, kOverlap><<<grid, kThreads, kSmem, current_stream()>>>(a);
  VELA_CUDA_CHECK_LAUNCH();
}

}  // namespace

void prefill_wgmma_set_enabled(int on) { g_prefill_override = on < 0 ? -1 : (on != 0); }

bool prefill_wgmma_takes(DType dtype, int64_t head_dim) {
  const int o = g_prefill_override.load(std::memory_order_relaxed);
  if (o == 0 || (o < 0 && !prefill_env_enabled())) return false;
  if (dtype != DType::kBF16 && dtype != DType::kF16) return false;
  if (head_dim != 64 && head_dim != 128) return false;
  const cudaDeviceProp& prop = vela::cuda::device_properties();
  return prop.major == 9 && prop.minor == 0;  // sm_90a code only
}

void prefill_wgmma(const PrefillArgs& a, DType dtype, int64_t n_tiles) {
  auto launch = [&](auto type) {
    using T = decltype(type);
    if (a.head_dim == 64)
      launch_prefill_wgmma<T, 64>(a, n_tiles);
    else
      launch_prefill_wgmma<T, 128>(a, n_tiles);
  };
  if (dtype == DType::kBF16)
    launch(bf16{});
  else
    launch(f16{});
}

}  // namespace vela::ops::cuda
