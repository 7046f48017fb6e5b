// CUDA ragged paged prefill attention on tensor cores (bf16 / f16), FlashAttention-2 style, and the
// generic CUDA paged_attention that plans on the host and picks decode / prefill / f32 kernels.
//
// On sm_90 the 128-row tiles at head_dim 64 / 128 go to the wgmma kernel first
// (attention_prefill_wgmma.cu, prefill_wgmma); this file's kernels run everything else.
//
// Prefill kernel: one block = (query head, work tile of tile_q query rows of one sequence, from
// the host plan), 4 warps; each warp owns kMT m16 tiles of 16 query rows, so tile_q = 64 * kMT.
// kMT = 2 (128-row tiles) runs bf16/f16 at tile widths D <= 64: every K / V fragment read from
// shared memory feeds two m-tiles' MMAs and every K/V tile gathered into shared memory serves 128
// rows; kMT = 1 (64 rows) everywhere else (wider heads have no registers for a second m-tile).
// With kMT = 2 the Q fragments are re-read from shared memory per 16-column step rather than held
// across the key loop (holding them, 32 registers, spills at D = 64).
// Warp w's m-tile mt holds rows mt * 64 + w * 16 .. + 15, so the m-tiles skipped for a key tile
// (rows past the sequence's end, or rows that all precede the key tile's first key) fall on every
// warp alike. K/V tiles of 64 keys are gathered by slot with cp.async into swizzled shared memory
// (double buffered; the slots of the tile after next are prefetched into registers). S = Q K^T and
// O += P V run as m16n8k16 mma.sync with fp32 accumulation; the S accumulators are rounded straight
// into the A fragments of P (no shared-memory round trip). Online softmax in the log2 domain; the
// causal mask (query row i of a sequence with q_len queries and n cached keys sits at position
// n - q_len + i) is applied only where a key of the tile reaches past an m-tile's first row. Rows
// past the sequence's end are computed on zeros (when their m-tile has live rows) and not stored.
//
// Head sizes: tile widths D = 16 .. 256 with kExact, padded tiles for the other multiples of 8
// (attention_common.cuh). At D = 256 the Q fragments (64 registers) are not held across the key
// loop but re-read from shared memory per 16-column step, and the slots of the tile after next are
// staged in shared memory (2 x 64 ints) instead of 16 registers per thread, which keeps O (128 fp32
// registers) and S in registers; shared memory is 160 KiB (opt-in above 48 KiB). At D = 64 with
// 128-row tiles: Q 16 KiB + 2 x (K, V) 32 KiB = 48 KiB.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/cuda/cuda_api.h"
#include "ops/attention.h"
#include "ops/cuda/attention_common.cuh"
#include "ops/cuda/attention_prefill.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace vela::ops::cuda {

namespace {

constexpr int kBN = 64;  // keys per K/V tile
constexpr int kPrefillThreads = 128;
constexpr int kWarpRows = 16;                                 // rows of one m16 tile
constexpr int kLayerRows = kWarpRows * kPrefillThreads / 32;  // rows of one m-tile over all warps
constexpr float kLog2e = 1.4426950408889634f;
static_assert(kLayerRows == kPrefillTileQ && 2 * kLayerRows == kPrefillWideTileQ,
              "kMT = 1 / 2 m-tiles per warp make the 64- / 128-row tiles of ops/attention.h");

// Whether the prefill kernel keeps Q's A fragments in registers for the whole key loop (else it
// re-reads them from shared memory per 16-column step: at D = 256, and with two m-tiles per warp,
// where holding them spills at D = 64).
template <int D, int kMT>
constexpr bool prefill_q_in_registers() {
  return D <= 128 && kMT == 1;
}

template <int D, int kMT>
constexpr int prefill_smem_bytes() {
  return (kMT * kLayerRows * D + 4 * kBN * D) * 2;  // Q + 2 x (K, V), 16-bit elements
}

}  // namespace

template <typename T, int D, bool kExact, int kMT>
static __global__ void __launch_bounds__(kPrefillThreads) prefill_kernel(PrefillArgs a) {
  constexpr int kBM = kMT * kLayerRows;  // query rows per tile
  constexpr int kChunks = D / 8;         // 16-byte chunks per row
  constexpr bool kQRegs = prefill_q_in_registers<D, kMT>();
  const int hd = kExact ? D : a.head_dim;
  const int hc = hd / 8;                                    // live chunks per row
  constexpr int kLoads = kBN * kChunks / kPrefillThreads;   // K/V chunks per thread per tile
  constexpr int kQLoads = kBM * kChunks / kPrefillThreads;  // Q chunks per thread
  static_assert(kLoads >= 1 && kLoads * kPrefillThreads == kBN * kChunks &&
                    kQLoads * kPrefillThreads == kBM * kChunks,
                "tile shape");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sq = reinterpret_cast<T*>(smem_raw);  // [kBM][D]
  T* sk = sq + kBM * D;                    // [2][kBN][D]
  T* sv = sk + 2 * kBN * D;                // [2][kBN][D]

  const int head = blockIdx.x;
  const PrefillTile t = prefill_tile(a, blockIdx.y, kBM);
  if (t.n_rows <= 0) return;
  const int kv_head = head / a.group;
  const int32_t* slots_of = a.req_to_token + a.req_pool_indices[t.seq] * a.r2t_stride;
  const int64_t slot_stride = static_cast<int64_t>(a.n_kv_heads) * hd;
  const T* kbase = static_cast<const T*>(a.k_cache) + kv_head * hd;
  const T* vbase = static_cast<const T*>(a.v_cache) + kv_head * hd;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  // First tile row of this warp's m-tile mt (warp-uniform).
  auto mt_row0 = [&](int mt) { return mt * kLayerRows + warp * kWarpRows; };

  // Q tile (rows past the sequence are zero-filled).
  const T* qbase = static_cast<const T*>(a.q) +
                   static_cast<int64_t>(t.qo0 + t.q_start) * a.q_token_stride + head * hd;
#pragma unroll
  for (int i = 0; i < kQLoads; ++i) {
    const int idx = tid + i * kPrefillThreads, r = idx / kChunks, c = idx % kChunks;
    const bool valid = r < t.n_rows && (kExact || c < hc);
    cp_async16(sq + smem_swizzle<D>(r, c), qbase + (valid ? r * a.q_token_stride + c * 8 : 0),
               valid);
  }
  // Slots of key tile kt: into registers (kLoads per thread), or at D > 128 into the shared
  // s_slots[kt & 1] (published by the __syncthreads before their use).
  constexpr bool kSlotsSmem = D > 128;
  __shared__ int32_t s_slots[kSlotsSmem ? 2 * kBN : 1];
  auto load_slots = [&](int kt, int(&slots)[kSlotsSmem ? 1 : kLoads]) {
    if constexpr (kSlotsSmem) {
      const int p = kt * kBN + tid;
      if (tid < kBN) s_slots[(kt & 1) * kBN + tid] = p < t.n_keys ? slots_of[p] : -1;
    } else {
#pragma unroll
      for (int i = 0; i < kLoads; ++i) {
        const int p = kt * kBN + (tid + i * kPrefillThreads) / kChunks;
        slots[i] = p < t.n_keys ? slots_of[p] : -1;
      }
    }
  };
  auto load_kv = [&](int buf, const int(&slots)[kSlotsSmem ? 1 : kLoads]) {
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int idx = tid + i * kPrefillThreads, r = idx / kChunks, c = idx % kChunks;
      const int slot = kSlotsSmem ? s_slots[buf * kBN + r] : slots[kSlotsSmem ? 0 : i];
      const bool valid = slot >= 0 && (kExact || c < hc);
      const int64_t src = valid ? slot * slot_stride + c * 8 : 0;
      const int dst = buf * kBN * D + smem_swizzle<D>(r, c);
      cp_async16(sk + dst, kbase + src, valid);
      cp_async16(sv + dst, vbase + src, valid);
    }
  };
  const int n_kt = (t.n_keys + kBN - 1) / kBN;
  int slots[kSlotsSmem ? 1 : kLoads];
  load_slots(0, slots);
  if constexpr (kSlotsSmem) {
    if (n_kt > 1) load_slots(1, slots);
    __syncthreads();
  }
  load_kv(0, slots);
  cp_async_commit();
  if (!kSlotsSmem && n_kt > 1) load_slots(1, slots);

  // Positions of this thread's two rows per m-tile (C-fragment rows lane/4 and lane/4 + 8); rows
  // past the end take the last row's position (harmless, never stored).
  int pos[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
    pos[mt][0] = t.pos_first + min(mt_row0(mt) + (lane >> 2), t.n_rows - 1);
    pos[mt][1] = t.pos_first + min(mt_row0(mt) + (lane >> 2) + 8, t.n_rows - 1);
  }
  uint32_t qf[kMT][kQRegs ? D / 16 : 1][4];
  float o[kMT][D / 8][4];
  float m[kMT][2], l[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int i = 0; i < D / 8; ++i) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.0f;
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.0f;
  }

  for (int kt = 0; kt < n_kt; ++kt) {
    cp_async_wait<0>();
    __syncthreads();  // tile kt landed for all threads; everyone is done with tile kt - 1
    if constexpr (kQRegs) {
      if (kt == 0) {
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
          for (int kk = 0; kk < D / 16; ++kk)
            ldmatrix_x4(qf[mt][kk],
                        sq + smem_swizzle<D>(mt_row0(mt) + (lane & 15), 2 * kk + (lane >> 4)));
        }
      }
    }
    if (kt + 1 < n_kt) {
      load_kv((kt + 1) & 1, slots);
      if (kt + 2 < n_kt) load_slots(kt + 2, slots);
    }
    cp_async_commit();
    const T* skb = sk + (kt & 1) * kBN * D;
    const T* svb = sv + (kt & 1) * kBN * D;
    const int kb = kt * kBN;

    // The m-tiles with work on this key tile (warp-uniform): some row inside the sequence, and not
    // every row before the tile's first key (causal; row positions only grow with the row).
    bool live[kMT];
    bool all_live = true, any_live = false;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      const int r0 = mt_row0(mt);
      live[mt] = r0 < t.n_rows && t.pos_first + r0 + kWarpRows - 1 >= kb;
      all_live = all_live && live[mt];
      any_live = any_live || live[mt];
    }

    // One key tile for the live m-tiles; kAll (the common case) drops the per-m-tile tests.
    auto key_tile = [&](auto all) {
      constexpr bool kAll = decltype(all)::value;
      // S = Q K^T: 16 rows x 64 keys per m-tile; each K fragment feeds every m-tile.
      float s[kMT][kBN / 8][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
        for (int nt = 0; nt < kBN / 8; ++nt)
          s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.0f;
      }
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t qs[kMT][4];  // !kQRegs: this step's Q fragments, re-read from shared memory
        if constexpr (!kQRegs) {
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt)
            ldmatrix_x4(qs[mt],
                        sq + smem_swizzle<D>(mt_row0(mt) + (lane & 15), 2 * kk + (lane >> 4)));
        }
#pragma unroll
        for (int nt2 = 0; nt2 < kBN / 16; ++nt2) {
          uint32_t b[4];
          const int key = nt2 * 16 + (lane & 7) + ((lane >> 4) << 3);
          ldmatrix_x4(b, skb + smem_swizzle<D>(key, 2 * kk + ((lane >> 3) & 1)));
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            if (!kAll && !live[mt]) continue;
            const uint32_t(&qa)[4] = kQRegs ? qf[mt][kQRegs ? kk : 0] : qs[mt];
            mma_16816<T>(s[mt][2 * nt2], qa, b[0], b[1]);
            mma_16816<T>(s[mt][2 * nt2 + 1], qa, b[2], b[3]);
          }
        }
      }
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        if (!kAll && !live[mt]) continue;
        // Mask where some key of the tile is after the first row of m-tile layer mt (the whole
        // tile's first row at kMT = 1).
        if (kb + kBN - 1 > t.pos_first + mt * kLayerRows) {
          const int pos_a = pos[mt][0], pos_b = pos[mt][1];
#pragma unroll
          for (int nt = 0; nt < kBN / 8; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int key = kb + nt * 8 + 2 * (lane & 3) + (e & 1);
              if (key > (e < 2 ? pos_a : pos_b)) s[mt][nt][e] = -INFINITY;
            }
          }
        }
        // Online softmax per row (a row's 64 scores are spread over the 4 lanes of a quad).
        online_softmax_tile(s[mt], m[mt], l[mt], o[mt], a.scale_log2);
      }
      // O += P V: P's accumulators become A fragments (two 8-key n-tiles = one 16-key k-step);
      // each V fragment feeds every m-tile.
#pragma unroll
      for (int kk = 0; kk < kBN / 16; ++kk) {
        uint32_t pa[kMT][4];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          pa[mt][0] = pack2<T>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
          pa[mt][1] = pack2<T>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
          pa[mt][2] = pack2<T>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
          pa[mt][3] = pack2<T>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dt2 = 0; dt2 < D / 16; ++dt2) {
          uint32_t b[4];
          const int key = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
          ldmatrix_x4_trans(b, svb + smem_swizzle<D>(key, 2 * dt2 + (lane >> 4)));
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            if (!kAll && !live[mt]) continue;
            mma_16816<T>(o[mt][2 * dt2], pa[mt], b[0], b[1]);
            mma_16816<T>(o[mt][2 * dt2 + 1], pa[mt], b[2], b[3]);
          }
        }
      }
    };
    // kMT = 1 runs every key tile on all warps (zero rows included), unchanged from before the
    // 128-row tile: its register allocation (d256 spills) is sensitive to the extra path.
    if (kMT == 1 || all_live) {
      key_tile(std::true_type{});
    } else if constexpr (kMT > 1) {
      if (any_live) key_tile(std::false_type{});
    }
  }

  // Normalize and store (row sums reduced over the quad).
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l[mt][r] += __shfl_xor_sync(0xffffffffu, l[mt][r], 1);
      l[mt][r] += __shfl_xor_sync(0xffffffffu, l[mt][r], 2);
    }
  }
  T* out = static_cast<T*>(a.out);
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = mt_row0(mt) + (lane >> 2) + 8 * r;
      if (row >= t.n_rows) continue;
      const float inv = l[mt][r] > 0.0f ? 1.0f / l[mt][r] : 0.0f;
      T* orow = out + (static_cast<int64_t>(t.qo0 + t.q_start + row) * a.n_heads + head) * hd;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        if (!kExact && dt >= hc) break;
        *reinterpret_cast<uint32_t*>(orow + dt * 8 + 2 * (lane & 3)) =
            pack2<T>(o[mt][dt][2 * r] * inv, o[mt][dt][2 * r + 1] * inv);
      }
    }
  }
}

namespace {

template <typename T, int D, bool kExact, int kMT>
void launch_prefill(const PrefillArgs& a, int64_t n_tiles) {
  constexpr int kSmem = prefill_smem_bytes<D, kMT>();
  opt_in_smem(prefill_kernel<T, D, kExact, kMT>, kSmem);
  const dim3 grid(static_cast<unsigned>(a.n_heads), static_cast<unsigned>(n_tiles));
  prefill_kernel<T, D, kExact, kMT><<<grid, kPrefillThreads, kSmem, current_stream()>>>(a);
  VELA_CUDA_CHECK_LAUNCH();
}

}  // namespace

void paged_prefill_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                             const Tensor& req_to_token, const Tensor& req_pool_indices,
                             const Tensor& seq_lens, const Tensor& qo_indptr,
                             const Tensor& tile_seq_idx, const Tensor& tile_q_start,
                             int64_t n_tiles, int tile_q, float scale, Tensor& out) {
  const char* op = "paged_prefill_attention";
  if (n_tiles == 0 || q.size(0) == 0) return;
  VELA_CHECK(n_tiles <= 65535, op, ": ", n_tiles, " tiles exceed the grid limit of 65535");
  if (q.dtype() == DType::kF32) {
    // f32: the CUDA-core row kernel, one row per query token, unsplit (no workspace needed).
    Tensor none;
    paged_rows_attention(q, k_cache, v_cache, req_to_token, req_pool_indices, seq_lens, qo_indptr,
                         scale, 1, none, none, out);
    return;
  }
  PrefillArgs a{};
  a.q = q.data_ptr();
  a.q_token_stride = q.stride(0);
  a.k_cache = k_cache.data_ptr();
  a.v_cache = v_cache.data_ptr();
  a.req_to_token = static_cast<const int32_t*>(req_to_token.data_ptr());
  a.r2t_stride = req_to_token.size(1);
  a.req_pool_indices = static_cast<const int32_t*>(req_pool_indices.data_ptr());
  a.seq_lens = static_cast<const int32_t*>(seq_lens.data_ptr());
  a.qo_indptr = static_cast<const int32_t*>(qo_indptr.data_ptr());
  a.tile_seq_idx = static_cast<const int32_t*>(tile_seq_idx.data_ptr());
  a.tile_q_start = static_cast<const int32_t*>(tile_q_start.data_ptr());
  a.n_heads = static_cast<int32_t>(q.size(1));
  a.n_kv_heads = static_cast<int32_t>(k_cache.size(1));
  a.group = a.n_heads / a.n_kv_heads;
  a.head_dim = static_cast<int32_t>(q.size(2));
  a.scale_log2 = scale * kLog2e;
  a.out = out.data_ptr();
  const bool aligned = is_aligned(q.data_ptr(), 16) && (q.stride(0) * 2) % 16 == 0 &&
                       is_aligned(k_cache.data_ptr(), 16) && is_aligned(v_cache.data_ptr(), 16);
  DeviceGuard guard(q.device().index);
  // Both tiles are accepted here (the public op pins prefill_tile_q), so tests can run either.
  const bool wide = tile_q == kPrefillWideTileQ;
#ifdef VELA_HAS_SM90A
  const bool wgmma = wide && prefill_wgmma_takes(q.dtype(), q.size(2));
#else
  const bool wgmma = false;
#endif
  VELA_CHECK(tile_q == kPrefillTileQ || (wide && (q.size(2) <= kPrefillWideMaxHeadDim || wgmma)),
             op, ": no prefill kernel for ", tile_q, "-row tiles at head_dim ", q.size(2), " (",
             kPrefillTileQ, ", or ", kPrefillWideTileQ, " at head_dim <= ", kPrefillWideMaxHeadDim,
             " or on the wgmma kernel)");
#ifdef VELA_HAS_SM90A
  if (wgmma) {
    VELA_CHECK(aligned, op,
               ": q rows and the caches must be 16-byte aligned for the tensor-core kernel");
    prefill_wgmma(a, q.dtype(), n_tiles);
    return;
  }
#endif
  dispatch_head_dim(q.size(2), op, [&](auto dim, auto exact) {
    constexpr int D = decltype(dim)::value;
    constexpr bool kExact = decltype(exact)::value;
    VELA_CHECK(aligned, op,
               ": q rows and the caches must be 16-byte aligned for the tensor-core kernel");
    auto launch = [&](auto type) {
      using T = typename decltype(type)::type;
      if constexpr (D <= kPrefillWideMaxHeadDim) {
        if (wide) return launch_prefill<T, D, kExact, 2>(a, n_tiles);
      }
      launch_prefill<T, D, kExact, 1>(a, n_tiles);
    };
    if (q.dtype() == DType::kBF16) {
      launch(std::type_identity<bf16>{});
    } else if (q.dtype() == DType::kF16) {
      launch(std::type_identity<f16>{});
    } else {
      VELA_THROW(Unsupported, op, ": dtype ", dtype_name(q.dtype()));
    }
  });
}

// The non-graph path: host copies of the metadata, validation, then the best kernel for the mix.
void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                     const Tensor& req_to_token, const Tensor& req_pool_indices,
                     const Tensor& seq_lens, const Tensor& qo_indptr, float scale, Tensor& out) {
  const char* op = "paged_attention";
  const int64_t n_tokens = q.size(0), n_heads = q.size(1), d = q.size(2);
  const int64_t n_seqs = seq_lens.size(0), n_kv = k_cache.size(1);
  Tensor qo_h = qo_indptr.to(Device::cpu()), lens_h = seq_lens.to(Device::cpu());
  Tensor rows_h = req_pool_indices.to(Device::cpu());
  const int32_t* qo = qo_h.data<int32_t>();
  const int32_t* lens = lens_h.data<int32_t>();
  const int32_t* rows = rows_h.data<int32_t>();
  VELA_CHECK(qo[0] == 0 && qo[n_seqs] == n_tokens, op, ": qo_indptr must run from 0 to n_tokens (",
             n_tokens, ")");
  bool all_decode = n_seqs == n_tokens;
  int32_t max_len = 0;
  for (int64_t s = 0; s < n_seqs; ++s) {
    const int32_t q_len = qo[s + 1] - qo[s];
    VELA_CHECK(q_len >= 0 && q_len <= lens[s], op, ": sequence ", s, " has ", q_len,
               " queries but only ", lens[s], " cached tokens");
    VELA_CHECK(lens[s] <= req_to_token.size(1), op, ": sequence ", s, " length ", lens[s],
               " exceeds req_to_token width ", req_to_token.size(1));
    VELA_CHECK(rows[s] >= 0 && rows[s] < req_to_token.size(0), op, ": req_pool_index ", rows[s],
               " out of range");
    all_decode = all_decode && q_len == 1;
    max_len = std::max(max_len, lens[s]);
  }
  if (n_tokens == 0) return;
  const int sms = n_sms();
  if (all_decode || q.dtype() == DType::kF32) {
    const int n_splits = decode_num_splits(n_tokens, n_kv, max_len, sms,
                                           decode_on_tensor_cores(q.dtype(), n_heads, n_kv, d));
    Tensor o_part, lse_part;
    if (n_splits > 1) {
      o_part = Tensor::empty({decode_o_part_numel(n_tokens, n_heads, d, n_splits)}, DType::kF32,
                             q.device());
      lse_part = Tensor::empty({decode_lse_part_numel(n_tokens, n_heads, n_splits)}, DType::kF32,
                               q.device());
    }
    if (all_decode) {
      // Qualified: L2Warm's namespace would also find ops::paged_decode_attention.
      cuda::paged_decode_attention(q, k_cache, v_cache, req_to_token, req_pool_indices, seq_lens,
                                   scale, n_splits, o_part, lse_part, out, L2Warm());
    } else {
      paged_rows_attention(q, k_cache, v_cache, req_to_token, req_pool_indices, seq_lens, qo_indptr,
                           scale, n_splits, o_part, lse_part, out);
    }
    return;
  }
  const int tile_q = prefill_tile_q(q.dtype(), d, q.device());
  const int64_t cap = prefill_max_tiles(n_tokens, n_seqs, tile_q);
  Tensor seq_idx_h = Tensor::empty({cap}, DType::kI32),
         q_start_h = Tensor::empty({cap}, DType::kI32);
  const int64_t n_tiles = plan_prefill_tiles(qo, n_seqs, tile_q, seq_idx_h.data<int32_t>(),
                                             q_start_h.data<int32_t>(), cap);
  Tensor seq_idx = seq_idx_h.to(q.device()), q_start = q_start_h.to(q.device());
  paged_prefill_attention(q, k_cache, v_cache, req_to_token, req_pool_indices, seq_lens, qo_indptr,
                          seq_idx, q_start, n_tiles, tile_q, scale, out);
}

}  // namespace vela::ops::cuda
