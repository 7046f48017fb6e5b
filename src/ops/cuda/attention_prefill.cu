// CUDA ragged paged prefill attention on tensor cores (bf16 / f16), FlashAttention-2 style, and the
// generic CUDA paged_attention that plans on the host and picks decode / prefill / f32 kernels.
//
// Prefill kernel: one block = (query head, work tile of kPrefillTileQ = 64 query rows of one
// sequence, from the host plan), 4 warps of 16 query rows each. K/V tiles of 64 keys are gathered
// by slot with cp.async into swizzled shared memory (double buffered; the slots of the tile after
// next are prefetched into registers). S = Q K^T and O += P V run as m16n8k16 mma.sync with fp32
// accumulation; the S accumulators are rounded straight into the A fragments of P (no shared-memory
// round trip). Online softmax in the log2 domain; the causal mask (query row i of a sequence with
// q_len queries and n cached keys sits at position n - q_len + i) is applied only to key tiles that
// reach past the tile's first query position. Rows past the sequence's end are computed on zeros
// and not stored.
//
// Head sizes: tile widths D = 16 .. 256 with kExact, padded tiles for the other multiples of 8
// (attention_common.cuh). At D = 256 the Q fragments (64 registers) are not held across the key
// loop but re-read from shared memory per 16-column step, and the slots of the tile after next are
// staged in shared memory (2 x 64 ints) instead of 16 registers per thread, which keeps O (128 fp32
// registers) and S in registers; shared memory is 160 KiB (opt-in above 48 KiB).
#include <algorithm>
#include <vector>

#include "core/cuda/cuda_api.h"
#include "ops/attention.h"
#include "ops/cuda/attention_common.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace vela::ops::cuda {

namespace {

constexpr int kBM = kPrefillTileQ;  // query rows per tile
constexpr int kBN = 64;             // keys per K/V tile
constexpr int kPrefillThreads = 128;
constexpr float kLog2e = 1.4426950408889634f;
static_assert(kBM == 16 * (kPrefillThreads / 32), "one warp per 16 query rows");

struct PrefillArgs {
  const void* q;
  int64_t q_token_stride;  // elements
  const void* k_cache;     // [n_slots, n_kv_heads, head_dim]
  const void* v_cache;
  const int32_t* req_to_token;
  int64_t r2t_stride;
  const int32_t* req_pool_indices;
  const int32_t* seq_lens;
  const int32_t* qo_indptr;
  const int32_t* tile_seq_idx;
  const int32_t* tile_q_start;
  int32_t n_heads;
  int32_t n_kv_heads;
  int32_t group;
  int32_t head_dim;  // <= the kernel's tile width D
  float scale_log2;
  void* out;  // [n_tokens, n_heads, head_dim], contiguous
};

// Whether the prefill kernel keeps Q's A fragments in registers for the whole key loop.
template <int D>
constexpr bool prefill_q_in_registers() {
  return D <= 128;
}

template <int D>
constexpr int prefill_smem_bytes() {
  return (kBM * D + 4 * kBN * D) * 2;  // Q + 2 x (K, V), 16-bit elements
}

}  // namespace

template <typename T, int D, bool kExact>
static __global__ void __launch_bounds__(kPrefillThreads) prefill_kernel(PrefillArgs a) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  constexpr bool kQRegs = prefill_q_in_registers<D>();
  const int hd = kExact ? D : a.head_dim;
  const int hc = hd / 8;                                   // live chunks per row
  constexpr int kLoads = kBN * kChunks / kPrefillThreads;  // chunks per thread per tile
  static_assert(kLoads >= 1 && kBM == kBN, "tile shape");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sq = reinterpret_cast<T*>(smem_raw);  // [kBM][D]
  T* sk = sq + kBM * D;                    // [2][kBN][D]
  T* sv = sk + 2 * kBN * D;                // [2][kBN][D]

  const int head = blockIdx.x, tile = blockIdx.y;
  const int seq = a.tile_seq_idx[tile], q_start = a.tile_q_start[tile];
  const int qo0 = a.qo_indptr[seq];
  const int q_len = a.qo_indptr[seq + 1] - qo0;
  const int prefix = a.seq_lens[seq] - q_len;  // position of the sequence's first query row
  const int n_rows = min(kBM, q_len - q_start);
  if (n_rows <= 0) return;
  const int pos_first = prefix + q_start;
  const int n_keys = pos_first + n_rows;  // keys any row of the tile can see
  const int kv_head = head / a.group;
  const int32_t* slots_of = a.req_to_token + a.req_pool_indices[seq] * a.r2t_stride;
  const int64_t slot_stride = static_cast<int64_t>(a.n_kv_heads) * hd;
  const T* kbase = static_cast<const T*>(a.k_cache) + kv_head * hd;
  const T* vbase = static_cast<const T*>(a.v_cache) + kv_head * hd;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;

  // Q tile (rows past the sequence are zero-filled).
  const T* qbase = static_cast<const T*>(a.q) +
                   static_cast<int64_t>(qo0 + q_start) * a.q_token_stride + head * hd;
#pragma unroll
  for (int i = 0; i < kLoads; ++i) {
    const int idx = tid + i * kPrefillThreads, r = idx / kChunks, c = idx % kChunks;
    const bool valid = r < n_rows && (kExact || c < hc);
    cp_async16(sq + smem_swizzle<D>(r, c), qbase + (valid ? r * a.q_token_stride + c * 8 : 0),
               valid);
  }
  // Slots of key tile kt: into registers (kLoads per thread), or at D > 128 into the shared
  // s_slots[kt & 1] (published by the __syncthreads before their use).
  constexpr bool kSlotsSmem = !kQRegs;
  __shared__ int32_t s_slots[kSlotsSmem ? 2 * kBN : 1];
  auto load_slots = [&](int kt, int(&slots)[kSlotsSmem ? 1 : kLoads]) {
    if constexpr (kSlotsSmem) {
      const int p = kt * kBN + tid;
      if (tid < kBN) s_slots[(kt & 1) * kBN + tid] = p < n_keys ? slots_of[p] : -1;
    } else {
#pragma unroll
      for (int i = 0; i < kLoads; ++i) {
        const int p = kt * kBN + (tid + i * kPrefillThreads) / kChunks;
        slots[i] = p < n_keys ? slots_of[p] : -1;
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
  const int n_kt = (n_keys + kBN - 1) / kBN;
  int slots[kSlotsSmem ? 1 : kLoads];
  load_slots(0, slots);
  if constexpr (kSlotsSmem) {
    if (n_kt > 1) load_slots(1, slots);
    __syncthreads();
  }
  load_kv(0, slots);
  cp_async_commit();
  if (!kSlotsSmem && n_kt > 1) load_slots(1, slots);

  // This thread's two rows of the warp's 16 (C-fragment rows lane/4 and lane/4 + 8), and their
  // positions (rows past the end take the last row's position: harmless, never stored).
  const int row_a = warp * 16 + (lane >> 2), row_b = row_a + 8;
  const int pos_a = pos_first + min(row_a, n_rows - 1);
  const int pos_b = pos_first + min(row_b, n_rows - 1);

  uint32_t qf[kQRegs ? D / 16 : 1][4];
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  for (int kt = 0; kt < n_kt; ++kt) {
    cp_async_wait<0>();
    __syncthreads();  // tile kt landed for all threads; everyone is done with tile kt - 1
    if constexpr (kQRegs) {
      if (kt == 0) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
          ldmatrix_x4(qf[kk], sq + smem_swizzle<D>(warp * 16 + (lane & 15), 2 * kk + (lane >> 4)));
      }
    }
    if (kt + 1 < n_kt) {
      load_kv((kt + 1) & 1, slots);
      if (kt + 2 < n_kt) load_slots(kt + 2, slots);
    }
    cp_async_commit();
    const T* skb = sk + (kt & 1) * kBN * D;
    const T* svb = sv + (kt & 1) * kBN * D;

    // S = Q K^T: 16 rows x 64 keys per warp.
    float s[kBN / 8][4];
#pragma unroll
    for (int nt = 0; nt < kBN / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qs[4];  // D > 128: this step's Q fragment, re-read from shared memory
      if constexpr (!kQRegs)
        ldmatrix_x4(qs, sq + smem_swizzle<D>(warp * 16 + (lane & 15), 2 * kk + (lane >> 4)));
      const uint32_t(&qa)[4] = kQRegs ? qf[kQRegs ? kk : 0] : qs;
#pragma unroll
      for (int nt2 = 0; nt2 < kBN / 16; ++nt2) {
        uint32_t b[4];
        const int key = nt2 * 16 + (lane & 7) + ((lane >> 4) << 3);
        ldmatrix_x4(b, skb + smem_swizzle<D>(key, 2 * kk + ((lane >> 3) & 1)));
        mma_16816<T>(s[2 * nt2], qa, b[0], b[1]);
        mma_16816<T>(s[2 * nt2 + 1], qa, b[2], b[3]);
      }
    }
    const int kb = kt * kBN;
    if (kb + kBN - 1 > pos_first) {  // some key of this tile is after some row's position
#pragma unroll
      for (int nt = 0; nt < kBN / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = kb + nt * 8 + 2 * (lane & 3) + (e & 1);
          if (key > (e < 2 ? pos_a : pos_b)) s[nt][e] = -INFINITY;
        }
      }
    }
    // Online softmax per row (a row's 64 scores are spread over the 4 lanes of a quad).
    online_softmax_tile(s, m, l, o, a.scale_log2);
    // O += P V: P's accumulators become A fragments (two 8-key n-tiles = one 16-key k-step).
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      const uint32_t pa[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]),
                              pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                              pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dt2 = 0; dt2 < D / 16; ++dt2) {
        uint32_t b[4];
        const int key = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
        ldmatrix_x4_trans(b, svb + smem_swizzle<D>(key, 2 * dt2 + (lane >> 4)));
        mma_16816<T>(o[2 * dt2], pa, b[0], b[1]);
        mma_16816<T>(o[2 * dt2 + 1], pa, b[2], b[3]);
      }
    }
  }

  // Normalize and store (row sums reduced over the quad).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  T* out = static_cast<T*>(a.out);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = r == 0 ? row_a : row_b;
    if (row >= n_rows) continue;
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    T* orow = out + (static_cast<int64_t>(qo0 + q_start + row) * a.n_heads + head) * hd;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      if (!kExact && dt >= hc) break;
      *reinterpret_cast<uint32_t*>(orow + dt * 8 + 2 * (lane & 3)) =
          pack2<T>(o[dt][2 * r] * inv, o[dt][2 * r + 1] * inv);
    }
  }
}

namespace {

template <typename T, int D, bool kExact>
void launch_prefill(const PrefillArgs& a, int64_t n_tiles) {
  constexpr int kSmem = prefill_smem_bytes<D>();
  if constexpr (kSmem > 48 * 1024) {
    static bool configured = [] {
      VELA_CUDA_CHECK(cudaFuncSetAttribute(prefill_kernel<T, D, kExact>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
      return true;
    }();
    (void)configured;
  }
  const dim3 grid(static_cast<unsigned>(a.n_heads), static_cast<unsigned>(n_tiles));
  prefill_kernel<T, D, kExact><<<grid, kPrefillThreads, kSmem, current_stream()>>>(a);
  VELA_CUDA_CHECK_LAUNCH();
}

}  // namespace

void paged_prefill_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                             const Tensor& req_to_token, const Tensor& req_pool_indices,
                             const Tensor& seq_lens, const Tensor& qo_indptr,
                             const Tensor& tile_seq_idx, const Tensor& tile_q_start,
                             int64_t n_tiles, float scale, Tensor& out) {
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
  dispatch_head_dim(q.size(2), op, [&](auto dim, auto exact) {
    constexpr int D = decltype(dim)::value;
    constexpr bool kExact = decltype(exact)::value;
    VELA_CHECK(aligned, op,
               ": q rows and the caches must be 16-byte aligned for the tensor-core kernel");
    if (q.dtype() == DType::kBF16) {
      launch_prefill<bf16, D, kExact>(a, n_tiles);
    } else if (q.dtype() == DType::kF16) {
      launch_prefill<f16, D, kExact>(a, n_tiles);
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
    const int n_splits = decode_num_splits(n_tokens, n_kv, max_len, sms);
    Tensor o_part, lse_part;
    if (n_splits > 1) {
      o_part = Tensor::empty({decode_o_part_numel(n_tokens, n_heads, d, n_splits)}, DType::kF32,
                             q.device());
      lse_part = Tensor::empty({decode_lse_part_numel(n_tokens, n_heads, n_splits)}, DType::kF32,
                               q.device());
    }
    if (all_decode) {
      paged_decode_attention(q, k_cache, v_cache, req_to_token, req_pool_indices, seq_lens, scale,
                             n_splits, o_part, lse_part, out);
    } else {
      paged_rows_attention(q, k_cache, v_cache, req_to_token, req_pool_indices, seq_lens, qo_indptr,
                           scale, n_splits, o_part, lse_part, out);
    }
    return;
  }
  const int64_t cap = prefill_max_tiles(n_tokens, n_seqs);
  Tensor seq_idx_h = Tensor::empty({cap}, DType::kI32),
         q_start_h = Tensor::empty({cap}, DType::kI32);
  const int64_t n_tiles = plan_prefill_tiles(qo, n_seqs, kPrefillTileQ, seq_idx_h.data<int32_t>(),
                                             q_start_h.data<int32_t>(), cap);
  Tensor seq_idx = seq_idx_h.to(q.device()), q_start = q_start_h.to(q.device());
  paged_prefill_attention(q, k_cache, v_cache, req_to_token, req_pool_indices, seq_lens, qo_indptr,
                          seq_idx, q_start, n_tiles, scale, out);
}

}  // namespace vela::ops::cuda
