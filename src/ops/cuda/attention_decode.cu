// CUDA paged decode attention (split-KV flash-decoding), the same kernel run over the rows of a
// ragged batch (the f32 prefill path), the split merge, and kv_write.
//
// Row kernel: one block = (row, KV head, group chunk, split). The block's 128 threads are split
// into groups of kTpk = D / kVec threads (kVec = 16 B of T, or D / 32 where that is more: at most
// 32 threads per row); each group owns one key row at a time (kVec features per thread) and scores
// it against all query heads of the KV head (GQA: one K/V load serves the whole group). K/V rows
// are gathered by slot with cp.async into a 4-stage shared-memory pipeline; each thread copies
// exactly the pieces it later reads, so the pipeline needs no block barrier, and the slots of the
// next stage are prefetched into registers a stage ahead. Every group keeps its own online-softmax
// state (fp32, log2 domain); the groups merge through shared memory at the end. A row reads its key
// count from seq_lens on the device; splits past the end exit at once and the merge kernel only
// combines live splits (graph replay with growing lengths).
//
// Head sizes: every kernel is compiled for a tile width D (16, 32, 64, 128, 256) and kExact; a
// head_dim that is not a tile width runs the next wider tile with its columns past head_dim
// zero-filled and never stored (attention_common.cuh, dispatch_head_dim). Global rows, o_part and
// the outputs are addressed by the runtime head_dim.
#include <atomic>

#include "core/env.h"
#include "ops/attention.h"
#include "ops/cuda/attention_common.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/l2_warm.cuh"
#include "ops/cuda/pdl.cuh"

namespace vela::ops::cuda {

namespace {

constexpr int kRowThreads = 128;
constexpr int kStages = 4;
constexpr int kUnroll = 2;         // key rows per thread group per stage
constexpr int kSlotWindow = 1024;  // keys whose slots are staged in shared memory at once
constexpr float kLog2e = 1.4426950408889634f;

struct RowsArgs : PagedAttnArgs {  // qo_indptr nullptr: decode (row = sequence); else row = token
  int32_t n_seqs;
  int32_t n_heads;
  int32_t n_kv_heads;
  int32_t group;           // n_heads / n_kv_heads
  int32_t n_group_chunks;  // ceil(group / kG)
  int32_t n_splits;
  int32_t head_dim;  // <= the kernel's tile width D
  float scale_log2;
  float* o_part;    // [n_rows, n_heads, n_splits, head_dim]
  float* lse_part;  // [n_rows, n_heads, n_splits]
  void* out;        // [n_rows, n_heads, head_dim]
};

// The row's sequence and key count (keys 0 .. n_keys-1 are visible to its query).
__device__ __forceinline__ void row_info(const RowsArgs& a, int row, int& seq, int& n_keys) {
  if (a.qo_indptr == nullptr) {
    seq = row;
    n_keys = a.seq_lens[row];
    return;
  }
  int lo = 0, hi = a.n_seqs - 1;  // the last sequence whose first query row is <= row
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (a.qo_indptr[mid] <= row) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  seq = lo;
  const int q_len = a.qo_indptr[lo + 1] - a.qo_indptr[lo];
  n_keys = a.seq_lens[lo] - q_len + (row - a.qo_indptr[lo]) + 1;
}

// acc += w * o and acc += o on the merges' float4 lanes.
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

template <typename T, int D, int kG>
struct RowsCfg {
  static constexpr int kVec16 = 16 / static_cast<int>(sizeof(T));
  static constexpr int kVec = D / 32 > kVec16 ? D / 32 : kVec16;  // features per thread
  static constexpr int kPieces = kVec / kVec16;                   // 16-byte copies per thread
  static constexpr int kTpk = D / kVec;                           // threads per key row
  static constexpr int kKpp = kRowThreads / kTpk;                 // key rows per pass
  static constexpr int kKps = kKpp * kUnroll;                     // key rows per stage
  static constexpr int kPipeBytes = kStages * kKps * D * static_cast<int>(sizeof(T)) * 2;
  static constexpr int kMergeBytes = (kKpp * kG * D + 2 * kKpp * kG + 2 * kG) * 4;
  static constexpr int kSlotsOffset = kPipeBytes > kMergeBytes ? kPipeBytes : kMergeBytes;
  static constexpr int kSmemBytes = kSlotsOffset + kSlotWindow * 4;
  static_assert(kTpk >= 1 && kTpk <= 32 && 32 % kTpk == 0, "head_dim / vector mismatch");
};

}  // namespace

template <typename T, int D, int kG, bool kExact>
static __global__ void __launch_bounds__(kRowThreads) rows_attention_kernel(RowsArgs a) {
  using Cfg = RowsCfg<T, D, kG>;
  pdl_wait();  // q and this step's K/V come from the kernel before (launched with launch_pdl)
  pdl_launch_dependents();
  constexpr int kVec = Cfg::kVec, kTpk = Cfg::kTpk, kKpp = Cfg::kKpp, kKps = Cfg::kKps;
  constexpr int kVec16 = Cfg::kVec16;
  const int hd = kExact ? D : a.head_dim;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sk = reinterpret_cast<T*>(smem_raw);  // [kStages][kKps][D]
  T* sv = sk + kStages * kKps * D;
  int32_t* s_slots = reinterpret_cast<int32_t*>(smem_raw + Cfg::kSlotsOffset);  // [kSlotWindow]

  const int row = blockIdx.x;
  const int kv_head = blockIdx.y / a.n_group_chunks;
  const int g0 = (blockIdx.y % a.n_group_chunks) * kG;
  const int n_g = min(kG, a.group - g0);
  const int split = blockIdx.z;
  const bool direct = a.n_splits == 1;
  const int tid = threadIdx.x, kk = tid / kTpk, part = tid % kTpk;
  const int head0 = kv_head * a.group + g0;           // first query head of this block
  const bool part_live = kExact || part * kVec < hd;  // this thread's features exist

  int seq, n_keys;
  row_info(a, row, seq, n_keys);
  const int chunk = split_chunk(n_keys, a.n_splits);
  const int begin = split * chunk;
  const int end = min(begin + chunk, n_keys);
  if (begin >= end) {
    // A padding row (no keys): zero output; with splits the merge writes it.
    if (direct) {
      T* out = static_cast<T*>(a.out) + (static_cast<int64_t>(row) * a.n_heads + head0) * hd;
      for (int i = tid; i < n_g * hd; i += kRowThreads) out[i] = from_float<T>(0.0f);
    }
    return;
  }

  // Query heads of the group, this thread's kVec features, pre-scaled into the log2 domain.
  float q[kG][kVec];
  const T* qp = static_cast<const T*>(a.q) + row * a.q_token_stride + head0 * hd + part * kVec;
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    if (g < n_g && part_live) {
      load_float<kVec>(qp + g * hd, q[g]);
#pragma unroll
      for (int i = 0; i < kVec; ++i) q[g][i] *= a.scale_log2;
    } else {
#pragma unroll
      for (int i = 0; i < kVec; ++i) q[g][i] = 0.0f;
    }
  }

  const int32_t* slots_of = a.req_to_token + a.req_pool_indices[seq] * a.r2t_stride;
  const int64_t slot_stride = static_cast<int64_t>(a.n_kv_heads) * hd;
  const T* kbase = static_cast<const T*>(a.k_cache) + kv_head * hd + part * kVec;
  const T* vbase = static_cast<const T*>(a.v_cache) + kv_head * hd + part * kVec;
  float m[kG], l[kG], acc[kG][kVec];
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int i = 0; i < kVec; ++i) acc[g][i] = 0.0f;
  }

  // Windows of up to kSlotWindow keys: their slots are read in one parallel sweep into shared
  // memory, so the copy pipeline below never waits on a slot lookup.
  for (int wb = begin; wb < end; wb += kSlotWindow) {
    const int we = min(wb + kSlotWindow, end);
    __syncthreads();  // every thread is done issuing copies from the previous window's slots
#pragma unroll 8
    for (int i = tid; i < we - wb; i += kRowThreads) s_slots[i] = slots_of[wb + i];
    __syncthreads();
    const int n_steps = (we - wb + kKps - 1) / kKps;
    auto issue = [&](int step) {
      const int stage = step % kStages;
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) {
        const int key = step * kKps + j * kKpp + kk;  // within the window
        const int off = (stage * kKps + j * kKpp + kk) * D + part * kVec;
        const bool valid = wb + key < we && part_live;
        const int64_t src = valid ? s_slots[key] * slot_stride : 0;
#pragma unroll
        for (int pc = 0; pc < Cfg::kPieces; ++pc) {
          // An invalid copy reads nothing but still needs a mapped source: the cache base.
          cp_async16(sk + off + pc * kVec16,
                     valid ? kbase + src + pc * kVec16 : static_cast<const T*>(a.k_cache), valid);
          cp_async16(sv + off + pc * kVec16,
                     valid ? vbase + src + pc * kVec16 : static_cast<const T*>(a.v_cache), valid);
        }
      }
    };
#pragma unroll
    for (int st = 0; st < kStages - 1; ++st) {
      if (st < n_steps) issue(st);
      cp_async_commit();
    }
    for (int st = 0; st < n_steps; ++st) {
      if (st + kStages - 1 < n_steps) issue(st + kStages - 1);
      cp_async_commit();
      cp_async_wait<kStages - 1>();
      const int stage = st % kStages;
      float s[kUnroll][kG];
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) {
        float kf[kVec];
        load_float<kVec>(sk + (stage * kKps + j * kKpp + kk) * D + part * kVec, kf);
        const bool live = wb + st * kKps + j * kKpp + kk < we;
#pragma unroll
        for (int g = 0; g < kG; ++g) {
          float dot = 0.0f;
#pragma unroll
          for (int i = 0; i < kVec; ++i) dot = fmaf(q[g][i], kf[i], dot);
#pragma unroll
          for (int o = kTpk / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
          s[j][g] = live ? dot : -INFINITY;
        }
      }
      float p[kUnroll][kG];
#pragma unroll
      for (int g = 0; g < kG; ++g) {
        float mx = m[g];
#pragma unroll
        for (int j = 0; j < kUnroll; ++j) mx = fmaxf(mx, s[j][g]);
        const float m_use = mx == -INFINITY ? 0.0f : mx;
        const float corr = exp2f(m[g] - m_use);
        m[g] = mx;
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < kUnroll; ++j) {
          p[j][g] = exp2f(s[j][g] - m_use);
          sum += p[j][g];
        }
        l[g] = l[g] * corr + sum;
#pragma unroll
        for (int i = 0; i < kVec; ++i) acc[g][i] *= corr;
      }
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) {
        float vf[kVec];
        load_float<kVec>(sv + (stage * kKps + j * kKpp + kk) * D + part * kVec, vf);
#pragma unroll
        for (int g = 0; g < kG; ++g) {
#pragma unroll
          for (int i = 0; i < kVec; ++i) acc[g][i] = fmaf(p[j][g], vf[i], acc[g][i]);
        }
      }
    }
    cp_async_wait<0>();
  }
  __syncthreads();  // the pipeline buffers become the merge buffers

  // Merge the kKpp groups: global max per head, rescaled accumulators summed over groups.
  float* s_acc = reinterpret_cast<float*>(smem_raw);  // [kKpp][kG][D]
  float* s_m = s_acc + kKpp * kG * D;                 // [kKpp][kG]
  float* s_l = s_m + kKpp * kG;                       // [kKpp][kG]
  float* s_tot = s_l + kKpp * kG;                     // [2][kG]: max, sum
  if (part == 0) {
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      s_m[kk * kG + g] = m[g];
      s_l[kk * kG + g] = l[g];
    }
  }
  __syncthreads();
  if (tid < kG) {
    float mx = -INFINITY;
    for (int i = 0; i < kKpp; ++i) mx = fmaxf(mx, s_m[i * kG + tid]);
    float sum = 0.0f;
    if (mx != -INFINITY) {
      for (int i = 0; i < kKpp; ++i) {
        const float mi = s_m[i * kG + tid];
        if (mi != -INFINITY) sum += s_l[i * kG + tid] * exp2f(mi - mx);
      }
    }
    s_tot[tid] = mx;
    s_tot[kG + tid] = sum;
  }
  __syncthreads();
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    const float mx = s_tot[g];
    const float f = m[g] == -INFINITY ? 0.0f : exp2f(m[g] - mx);
#pragma unroll
    for (int i = 0; i < kVec; ++i) s_acc[(kk * kG + g) * D + part * kVec + i] = acc[g][i] * f;
  }
  __syncthreads();
  for (int idx = tid; idx < n_g * hd; idx += kRowThreads) {
    const int g = idx / hd, d = idx % hd;
    float o = 0.0f;
    for (int i = 0; i < kKpp; ++i) o += s_acc[(i * kG + g) * D + d];
    const float sum = s_tot[kG + g];
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    const int64_t rh = static_cast<int64_t>(row) * a.n_heads + head0 + g;
    if (direct) {
      static_cast<T*>(a.out)[rh * hd + d] = from_float<T>(o * inv);
    } else {
      a.o_part[(rh * a.n_splits + split) * hd + d] = o * inv;
      if (d == 0)
        a.lse_part[rh * a.n_splits + split] = sum > 0.0f ? s_tot[g] + log2f(sum) : -INFINITY;
    }
  }
}

// ---- GQA decode on tensor cores (16-bit caches, 2..16 query heads per KV head, head_dim <= 64) --
// The block's query heads of one KV head form the rows of a 16-row mma tile (FlashInfer's GQA
// trick: one K/V stream serves all of them and the scores cost a few mma instead of shuffles).
// 64-key tiles stream through a kS-buffer cp.async pipeline (slots staged per window as in the row
// kernel); warp w takes keys 16w..16w+15 of each tile with its own online-softmax state, and the
// four warps merge through shared memory at the end.
constexpr int kMmaWarps = 4;                 // warps a block
constexpr int kMmaThreads = 32 * kMmaWarps;  // threads a block

// kS: K/V tiles in flight (the tile being read plus kS - 1 loading). A block walks its split's
// tiles one after another, so with two buffers a batch-64 step's unsplit blocks (8-10 tiles each)
// keep too few bytes in flight to stream the cache from HBM (session 41's ncu: half the bandwidth).
template <int D, int kS>
struct MmaDecodeCfg {
  static constexpr int kKeys = 16 * kMmaWarps;                          // keys a tile
  static constexpr int kPipeBytes = (16 * D + 2 * kS * kKeys * D) * 2;  // Q + kS x (K, V)
  static constexpr int kMergeBytes = (kMmaWarps * 16 * D + kMmaWarps * 16 * 2) * 4;
  static constexpr int kSlotsOffset = kPipeBytes > kMergeBytes ? kPipeBytes : kMergeBytes;
  static constexpr int kSmemBytes = kSlotsOffset + kSlotWindow * 4;
  static_assert(kS >= 2 && kSmemBytes <= 96 * 1024, "mma decode pipeline");
};

template <typename T, int D, bool kExact, int kS>
static __global__ void __launch_bounds__(kMmaThreads) decode_mma_kernel(RowsArgs a) {
  using Cfg = MmaDecodeCfg<D, kS>;
  constexpr int kMmaKeys = Cfg::kKeys;
  constexpr int kChunks = D / 8;
  const int hd = kExact ? D : a.head_dim;
  const int hc = hd / 8;  // live 16-byte chunks per row
  constexpr int kLoads = kMmaKeys * kChunks / kMmaThreads;
  static_assert(kLoads >= 1, "tile shape");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sq = reinterpret_cast<T*>(smem_raw);  // [16][D]
  T* sk = sq + 16 * D;                     // [kS][kMmaKeys][D]
  T* sv = sk + kS * kMmaKeys * D;          // [kS][kMmaKeys][D]
  int32_t* s_slots = reinterpret_cast<int32_t*>(smem_raw + Cfg::kSlotsOffset);

  const int row = blockIdx.x, kv_head = blockIdx.y, split = blockIdx.z;
  const int group = a.group, head0 = kv_head * group;
  const bool direct = a.n_splits == 1;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  int seq, n_keys;
  row_info(a, row, seq, n_keys);
  const int chunk = split_chunk(n_keys, a.n_splits);
  const int begin = split * chunk;
  const int end = min(begin + chunk, n_keys);
  if (begin >= end) {
    if (direct) {
      pdl_wait();
      T* out = static_cast<T*>(a.out) + (static_cast<int64_t>(row) * a.n_heads + head0) * hd;
      for (int i = tid; i < group * hd; i += kMmaThreads) out[i] = from_float<T>(0.0f);
    }
    return;
  }

  const int32_t* slots_of = a.req_to_token + a.req_pool_indices[seq] * a.r2t_stride;
  const int64_t slot_stride = static_cast<int64_t>(a.n_kv_heads) * hd;
  const T* kbase = static_cast<const T*>(a.k_cache) + kv_head * hd;
  const T* vbase = static_cast<const T*>(a.v_cache) + kv_head * hd;
  // Tile t of the window starting at key wb (slots staged in s_slots) into buffer t % kS.
  auto load_tile = [&](int t, int wb, int we) {
    const int buf = t % kS;
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int idx = tid + i * kMmaThreads, r = idx / kChunks, c = idx % kChunks;
      const int key = t * kMmaKeys + r;
      const bool valid = wb + key < we && (kExact || c < hc);
      const int64_t src = valid ? s_slots[key] * slot_stride + c * 8 : 0;
      const int dst = buf * kMmaKeys * D + smem_swizzle<D>(r, c);
      cp_async16(sk + dst, kbase + src, valid);
      cp_async16(sv + dst, vbase + src, valid);
    }
  };
  // Before waiting on the previous kernel (programmatic dependent launch): the metadata and every
  // key but this step's (the last) were written by work that completed before that kernel began,
  // so the first window's slots, and its first tile where it stops short of the newest key, load
  // while the previous kernel (rotary + KV write) drains. (More tiles before the wait measured
  // slower, and so did a general count of them in this kernel: ~20 registers more, ptxas.)
  const int first_we = min(begin + kSlotWindow, end);
  const int n_early = begin + kMmaKeys <= n_keys - 1 ? 1 : 0;
#pragma unroll 8
  for (int i = tid; i < first_we - begin; i += kMmaThreads) s_slots[i] = slots_of[begin + i];
  if (n_early > 0) {
    __syncthreads();
    load_tile(0, begin, first_we);
    cp_async_commit();
  }
  pdl_wait();
  pdl_launch_dependents();

  // Q rows = the group's heads (rows >= group are zero).
  const T* qbase = static_cast<const T*>(a.q) + row * a.q_token_stride + head0 * hd;
  for (int idx = tid; idx < 16 * kChunks; idx += kMmaThreads) {
    const int r = idx / kChunks, c = idx % kChunks;
    const bool valid = r < group && (kExact || c < hc);
    cp_async16(sq + smem_swizzle<D>(r, c), qbase + (valid ? r * hd + c * 8 : 0), valid);
  }
  cp_async_commit();  // waited for with the first window's slots (the loads overlap)
  uint32_t qf[D / 16][4];

  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  for (int wb = begin; wb < end; wb += kSlotWindow) {
    const int we = min(wb + kSlotWindow, end);
    if (wb != begin) {
      __syncthreads();  // the previous window's copies are issued and its tiles consumed
#pragma unroll 8
      for (int i = tid; i < we - wb; i += kMmaThreads) s_slots[i] = slots_of[wb + i];
    }
    cp_async_wait<0>();
    __syncthreads();
    if (wb == begin) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        ldmatrix_x4(qf[kk], sq + smem_swizzle<D>(lane & 15, 2 * kk + (lane >> 4)));
    }
    const int n_tiles = (we - wb + kMmaKeys - 1) / kMmaKeys;
    // Tiles 0 .. kS - 2 start loading now (the first, where it loaded early, already landed), one
    // commit group each, empty past the window's end, so every wait below counts kS - 2 groups.
    for (int t = wb == begin ? n_early : 0; t < kS - 1; ++t) {
      if (t < n_tiles) load_tile(t, wb, we);
      cp_async_commit();
    }
    for (int t = 0; t < n_tiles; ++t) {
      cp_async_wait<kS - 2>();
      __syncthreads();  // tile t landed everywhere; everyone is done with tile t - 1
      if (t + kS - 1 < n_tiles) load_tile(t + kS - 1, wb, we);  // into tile t - 1's buffer
      cp_async_commit();
      const T* skb = sk + (t % kS) * kMmaKeys * D;
      const T* svb = sv + (t % kS) * kMmaKeys * D;
      float sc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t b[4];
        const int key = warp * 16 + (lane & 7) + ((lane >> 4) << 3);
        ldmatrix_x4(b, skb + smem_swizzle<D>(key, 2 * kk + ((lane >> 3) & 1)));
        mma_16816<T>(sc[0], qf[kk], b[0], b[1]);
        mma_16816<T>(sc[1], qf[kk], b[2], b[3]);
      }
      const int key0 = wb + t * kMmaKeys + warp * 16;
      if (key0 + 16 > we) {
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            if (key0 + nt * 8 + 2 * (lane & 3) + (e & 1) >= we) sc[nt][e] = -INFINITY;
          }
        }
      }
      online_softmax_tile(sc, m, l, o, a.scale_log2);
      const uint32_t pa[4] = {pack2<T>(sc[0][0], sc[0][1]), pack2<T>(sc[0][2], sc[0][3]),
                              pack2<T>(sc[1][0], sc[1][1]), pack2<T>(sc[1][2], sc[1][3])};
#pragma unroll
      for (int dt2 = 0; dt2 < D / 16; ++dt2) {
        uint32_t b[4];
        const int key = warp * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
        ldmatrix_x4_trans(b, svb + smem_swizzle<D>(key, 2 * dt2 + (lane >> 4)));
        mma_16816<T>(o[2 * dt2], pa, b[0], b[1]);
        mma_16816<T>(o[2 * dt2 + 1], pa, b[2], b[3]);
      }
    }
    cp_async_wait<0>();
  }
  __syncthreads();  // the pipeline buffers become the merge buffers

  float* s_o = reinterpret_cast<float*>(smem_raw);  // [kMmaWarps warps][16 rows][D]
  float* s_ml = s_o + kMmaWarps * 16 * D;           // [kMmaWarps][16][2]: m, l
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    const int rr = (lane >> 2) + 8 * r;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      const int col = dt * 8 + 2 * (lane & 3);
      s_o[(warp * 16 + rr) * D + col] = o[dt][2 * r];
      s_o[(warp * 16 + rr) * D + col + 1] = o[dt][2 * r + 1];
    }
    if ((lane & 3) == 0) {
      s_ml[(warp * 16 + rr) * 2] = m[r];
      s_ml[(warp * 16 + rr) * 2 + 1] = l[r];
    }
  }
  __syncthreads();
  for (int idx = tid; idx < group * hd; idx += kMmaThreads) {
    const int r = idx / hd, d = idx % hd;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kMmaWarps; ++w) mx = fmaxf(mx, s_ml[(w * 16 + r) * 2]);
    float sum = 0.0f, acc = 0.0f;
    if (mx != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kMmaWarps; ++w) {
        const float mw = s_ml[(w * 16 + r) * 2];
        if (mw == -INFINITY) continue;
        const float f = exp2f(mw - mx);
        sum += s_ml[(w * 16 + r) * 2 + 1] * f;
        acc += s_o[(w * 16 + r) * D + d] * f;
      }
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    const int64_t rh = static_cast<int64_t>(row) * a.n_heads + head0 + r;
    if (direct) {
      static_cast<T*>(a.out)[rh * hd + d] = from_float<T>(acc * inv);
    } else {
      a.o_part[(rh * a.n_splits + split) * hd + d] = acc * inv;
      if (d == 0) a.lse_part[rh * a.n_splits + split] = sum > 0.0f ? mx + log2f(sum) : -INFINITY;
    }
  }
}

// Combines the live splits of one (row, head) with weights 2^(lse_i - max) (log2 domain). The
// block's threads cover (4 features) x (split lanes), so the partials stream in parallel.
constexpr int kMergeThreads = 256;
static_assert(kMaxDecodeSplits <= kMergeThreads, "one lse per merge thread");

template <typename T, int D, bool kExact>
static __global__ void __launch_bounds__(kMergeThreads)
    merge_splits_kernel(RowsArgs a, L2WarmArgs warm, int warm_max_keys) {
  constexpr int kLanesD = D / 4, kWays = kMergeThreads / kLanesD;
  const int hd = kExact ? D : a.head_dim;
  __shared__ float s_w[kMergeThreads];
  __shared__ float s_red[2][kMergeThreads / 32];
  __shared__ float4 s_acc[kMergeThreads];
  const int row = blockIdx.x, head = blockIdx.y, tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  // The key count is host-written metadata: read before the wait (pdl.cuh's rule).
  int seq, n_keys;
  row_info(a, row, seq, n_keys);
  const int n_live = live_splits(n_keys, a.n_splits);
  const int64_t rh = static_cast<int64_t>(row) * a.n_heads + head;
  const int dl = tid % kLanesD, way = tid / kLanesD;
  const bool live_d = kExact || dl * 4 < hd;
  const int n_mine = live_d ? n_live : 0;  // this thread sums splits way, way + kWays, ...
  const float* op = a.o_part + rh * a.n_splits * hd + dl * 4;
  // The caller's L2 hint (the layer's next weights) goes out before the wait: at one row the split
  // kernel's last keys and this kernel read L2, so DRAM would idle until the next GEMV. Not past
  // warm_max_keys keys: there the split kernel still streams keys, and the prefetches delay it.
  if (n_keys <= warm_max_keys)
    warm_l2(warm, (static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x) * kMergeThreads + tid,
            static_cast<int64_t>(gridDim.x) * gridDim.y * kMergeThreads);
  pdl_wait();  // the partials of the split kernel
  pdl_launch_dependents();
  // The first kPre partials this thread sums load together with the lse (one L2 round trip
  // instead of two before the weighted sum; the sum's order is unchanged).
  constexpr int kPre = 4;
  float4 pre[kPre];
#pragma unroll
  for (int p = 0; p < kPre; ++p) {
    const int i = way + p * kWays;
    if (i < n_mine) pre[p] = *reinterpret_cast<const float4*>(op + static_cast<int64_t>(i) * hd);
  }
  const float lse = tid < n_live ? a.lse_part[rh * a.n_splits + tid] : -INFINITY;
  const float wmax = warp_max(lse);
  if (lane == 0) s_red[0][warp] = wmax;
  __syncthreads();
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < kMergeThreads / 32; ++i) mx = fmaxf(mx, s_red[0][i]);
  const float w = mx == -INFINITY || tid >= n_live ? 0.0f : exp2f(lse - mx);
  s_w[tid] = w;
  const float wsum = warp_sum(w);
  if (lane == 0) s_red[1][warp] = wsum;
  __syncthreads();
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kMergeThreads / 32; ++i) sum += s_red[1][i];
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int p = 0; p < kPre; ++p) {
    const int i = way + p * kWays;
    if (i < n_mine) fma4(s_w[i], pre[p], acc);
  }
#pragma unroll 4
  for (int i = way + kPre * kWays; i < n_mine; i += kWays) {
    const float4 o = *reinterpret_cast<const float4*>(op + static_cast<int64_t>(i) * hd);
    const float wi = s_w[i];
    fma4(wi, o, acc);
  }
  s_acc[tid] = acc;
  __syncthreads();
  if (way == 0 && live_d) {
    for (int k = 1; k < kWays; ++k) {
      const float4 o = s_acc[k * kLanesD + dl];
      add4(o, acc);
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    const float r[4] = {acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv};
    T* out = static_cast<T*>(a.out) + rh * hd + dl * 4;
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = from_float<T>(r[i]);
  }
}

namespace {

std::atomic<int> g_mma_stages_override{-1};  // decode_mma_set_stages (tests, benchmarks)

// Blocks of the 4-tile kernel that are resident on the device at once (its 71.7 KiB of shared
// memory at D = 64 allow 3 an SM, the 2-tile kernel's 37.6 KiB 5), queried once per instantiation.
template <typename T, int D, bool kExact>
int64_t mma4_resident_blocks() {
  static const int64_t blocks = [] {
    constexpr int kSmem = MmaDecodeCfg<D, 4>::kSmemBytes;
    opt_in_smem(decode_mma_kernel<T, D, kExact, 4>, kSmem);
    int per_sm = 0;
    VELA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, decode_mma_kernel<T, D, kExact, 4>, kMmaThreads, kSmem));
    return static_cast<int64_t>(per_sm) * n_sms();
  }();
  return blocks;
}

// K/V tiles in flight per tensor-core decode block: the override, else VELA_DECODE_MMA_STAGES
// (2..4), else 4 where the grid is resident in one wave at 4 and 2 where it is not (the more
// tiles in flight took batch 32 / 64 steps 1.61 -> 1.57 / 1.63 -> 1.62 ms and decode at 1K 1.02 ->
// 1.00 ms, grids of 64-256 blocks; single sequences at 8K-32K context launch 512 blocks of 1-4
// tiles, which fit one wave only at 2 tiles: decode32k read 1.34 ms with 4 in a later call
// against 1.25 before, not measured side by side).
template <typename T, int D, bool kExact>
int decode_mma_stages(int64_t n_blocks) {
  const int o = g_mma_stages_override.load(std::memory_order_relaxed);
  if (o >= 2) return o;
  static const int env = static_cast<int>(env_int("VELA_DECODE_MMA_STAGES", 0, 0, 4));
  if (env >= 2) return env;
  return n_blocks <= mma4_resident_blocks<T, D, kExact>() ? 4 : 2;
}

// A kernel launched with its dynamic shared memory opted in.
template <typename Args>
void launch_smem(void (*kernel)(Args), dim3 grid, dim3 block, int smem, const Args& args) {
  opt_in_smem(kernel, smem);
  launch_pdl(kernel, grid, block, smem, args);
}

// The merge kernel after a split launch.
template <typename T, int D, bool kExact>
void launch_merge_if_split(const RowsArgs& a, int64_t n_rows, const L2WarmArgs& warm) {
  if (a.n_splits <= 1) return;
  const dim3 mgrid(static_cast<unsigned>(n_rows), static_cast<unsigned>(a.n_heads));
  // The L2 hint's context limit: VELA_DECODE_L2_WARM_MAX_KEYS (read once), default 16384 (H100,
  // session 53, 16 MB of hint: decode8k 1.161-1.173 -> 1.140-1.147 ms, decode32k 1.40 -> 1.61
  // without the limit).
  static const int warm_max_keys =
      static_cast<int>(env_int("VELA_DECODE_L2_WARM_MAX_KEYS", 16384, 0, 1 << 30));
  launch_pdl(merge_splits_kernel<T, D, kExact>, mgrid, dim3(kMergeThreads), 0, a, warm,
             warm_max_keys);
}

template <typename T, int D, bool kExact, int kS>
void launch_decode_mma(const RowsArgs& args, int64_t n_rows, const L2WarmArgs& warm) {
  RowsArgs a = args;
  a.n_group_chunks = 1;
  const dim3 grid(static_cast<unsigned>(n_rows), static_cast<unsigned>(a.n_kv_heads),
                  static_cast<unsigned>(a.n_splits));
  constexpr int kSmem = MmaDecodeCfg<D, kS>::kSmemBytes;
  launch_smem(decode_mma_kernel<T, D, kExact, kS>, grid, dim3(kMmaThreads), kSmem, a);
  launch_merge_if_split<T, D, kExact>(a, n_rows, warm);
}

template <typename T, int D, int kG, bool kExact>
void launch_rows(const RowsArgs& args, int64_t n_rows, const L2WarmArgs& warm) {
  using Cfg = RowsCfg<T, D, kG>;
  RowsArgs a = args;
  a.n_group_chunks = (a.group + kG - 1) / kG;
  constexpr int kSmem = Cfg::kSmemBytes;
  // Only f32 at D = 256 needs more than the default 48 KiB (a 64 KiB pipeline).
  static_assert(kSmem <= 96 * 1024, "row kernel shared memory");
  const dim3 grid(static_cast<unsigned>(n_rows),
                  static_cast<unsigned>(a.n_kv_heads * a.n_group_chunks),
                  static_cast<unsigned>(a.n_splits));
  launch_smem(rows_attention_kernel<T, D, kG, kExact>, grid, dim3(kRowThreads), kSmem, a);
  launch_merge_if_split<T, D, kExact>(a, n_rows, warm);
}

// Runs the row kernel (and merge) for n_rows rows; qo_indptr null for decode.
void run_rows(const char* op, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
              const Tensor& req_to_token, const Tensor& req_pool_indices, const Tensor& seq_lens,
              const int32_t* qo_indptr, float scale, int n_splits, Tensor& o_part, Tensor& lse_part,
              Tensor& out, const L2Warm& l2_warm) {
  const int64_t n_rows = q.size(0), d = q.size(2);
  if (n_rows == 0) return;
  VELA_CHECK(n_rows <= 0x7fffffff, op, ": too many rows (", n_rows, ")");
  const int64_t es = static_cast<int64_t>(q.element_size());
  VELA_CHECK(is_aligned(q.data_ptr(), 16) && (q.stride(0) * es) % 16 == 0 &&
                 is_aligned(k_cache.data_ptr(), 16) && is_aligned(v_cache.data_ptr(), 16),
             op, ": q rows and the caches must be 16-byte aligned for the CUDA kernel");
  VELA_CHECK(
      n_splits == 1 || (is_aligned(o_part.data_ptr(), 16) && is_aligned(lse_part.data_ptr(), 4)),
      op, ": o_part must be 16-byte aligned");
  RowsArgs a{};
  a.q = q.data_ptr();
  a.q_token_stride = q.stride(0);
  a.k_cache = k_cache.data_ptr();
  a.v_cache = v_cache.data_ptr();
  a.req_to_token = static_cast<const int32_t*>(req_to_token.data_ptr());
  a.r2t_stride = req_to_token.size(1);
  a.req_pool_indices = static_cast<const int32_t*>(req_pool_indices.data_ptr());
  a.seq_lens = static_cast<const int32_t*>(seq_lens.data_ptr());
  a.qo_indptr = qo_indptr;
  a.n_seqs = static_cast<int32_t>(seq_lens.size(0));
  a.n_heads = static_cast<int32_t>(q.size(1));
  a.n_kv_heads = static_cast<int32_t>(k_cache.size(1));
  a.group = a.n_heads / a.n_kv_heads;
  a.n_splits = n_splits;
  a.head_dim = static_cast<int32_t>(d);
  a.scale_log2 = scale * kLog2e;
  a.o_part = n_splits > 1 ? static_cast<float*>(o_part.data_ptr()) : nullptr;
  a.lse_part = n_splits > 1 ? static_cast<float*>(lse_part.data_ptr()) : nullptr;
  a.out = out.data_ptr();
  const L2WarmArgs warm = l2_warm_args(l2_warm);
  DeviceGuard guard(q.device().index);
  dispatch_float(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    dispatch_head_dim(d, op, [&](auto dim, auto exact) {
      constexpr int D = decltype(dim)::value;
      constexpr bool kExact = decltype(exact)::value;
      if constexpr (sizeof(T) == 2 && D <= 64) {
        // Decode of a GQA group on tensor cores.
        if (qo_indptr == nullptr && decode_on_tensor_cores(q.dtype(), a.n_heads, a.n_kv_heads, d)) {
          const int64_t n_blocks = n_rows * a.n_kv_heads * int64_t{a.n_splits};
          const int stages = decode_mma_stages<T, D, kExact>(n_blocks);
          if (stages == 2) {
            launch_decode_mma<T, D, kExact, 2>(a, n_rows, warm);
          } else if (stages == 3) {
            launch_decode_mma<T, D, kExact, 3>(a, n_rows, warm);
          } else {
            launch_decode_mma<T, D, kExact, 4>(a, n_rows, warm);
          }
          return;
        }
      }
      if (a.group == 1) {
        launch_rows<T, D, 1, kExact>(a, n_rows, warm);
      } else if (a.group == 2) {
        launch_rows<T, D, 2, kExact>(a, n_rows, warm);
      } else if (a.group <= 4) {
        launch_rows<T, D, 4, kExact>(a, n_rows, warm);
      } else {
        launch_rows<T, D, 8, kExact>(a, n_rows, warm);
      }
    });
  });
}

}  // namespace

void decode_mma_set_stages(int stages) {
  VELA_CHECK(stages < 0 || (stages >= 2 && stages <= 4),
             "decode_mma_set_stages: stages must be 2..4 (or -1 for the default), got ", stages);
  g_mma_stages_override = stages < 0 ? -1 : stages;
}

void paged_decode_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const Tensor& req_to_token, const Tensor& req_pool_indices,
                            const Tensor& seq_lens, float scale, int n_splits, Tensor& o_part,
                            Tensor& lse_part, Tensor& out, const L2Warm& warm) {
  run_rows("paged_decode_attention", q, k_cache, v_cache, req_to_token, req_pool_indices, seq_lens,
           nullptr, scale, n_splits, o_part, lse_part, out, warm);
}

void paged_rows_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                          const Tensor& req_to_token, const Tensor& req_pool_indices,
                          const Tensor& seq_lens, const Tensor& qo_indptr, float scale,
                          int n_splits, Tensor& o_part, Tensor& lse_part, Tensor& out) {
  run_rows("paged_attention", q, k_cache, v_cache, req_to_token, req_pool_indices, seq_lens,
           static_cast<const int32_t*>(qo_indptr.data_ptr()), scale, n_splits, o_part, lse_part,
           out, L2Warm());
}

// ---- kv_write: one thread per unit (16, 4 or 2 bytes) of a token's K or V row ----

template <typename U>
static __global__ void kv_write_kernel(const char* k, const char* v, int64_t k_token_bytes,
                                       int64_t v_token_bytes, const int32_t* __restrict__ loc,
                                       char* k_cache, char* v_cache, int64_t n_tokens,
                                       int64_t row_units, int64_t n_slots) {
  const int64_t n = n_tokens * row_units;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += step) {
    const int64_t t = idx / row_units, u = idx % row_units;
    const int64_t slot = loc[t];
    if (slot < 0 || slot >= n_slots) continue;
    const int64_t dst = slot * row_units + u;
    reinterpret_cast<U*>(k_cache)[dst] = reinterpret_cast<const U*>(k + t * k_token_bytes)[u];
    reinterpret_cast<U*>(v_cache)[dst] = reinterpret_cast<const U*>(v + t * v_token_bytes)[u];
  }
}

void kv_write(const Tensor& k, const Tensor& v, const Tensor& out_cache_loc, Tensor& k_cache,
              Tensor& v_cache) {
  const int64_t n_tokens = k.size(0);
  if (n_tokens == 0) return;
  const int64_t es = static_cast<int64_t>(k.element_size());
  const int64_t row_bytes = k.size(1) * k.size(2) * es;
  const int64_t k_token_bytes = k.stride(0) * es, v_token_bytes = v.stride(0) * es;
  auto fits = [&](int64_t unit) {
    return row_bytes % unit == 0 && k_token_bytes % unit == 0 && v_token_bytes % unit == 0 &&
           is_aligned(k.data_ptr(), unit) && is_aligned(v.data_ptr(), unit) &&
           is_aligned(k_cache.data_ptr(), unit) && is_aligned(v_cache.data_ptr(), unit);
  };
  DeviceGuard guard(k.device().index);
  auto launch = [&](auto unit_tag) {
    using U = decltype(unit_tag);
    const int64_t row_units = row_bytes / static_cast<int64_t>(sizeof(U));
    constexpr int kThreads = 256;
    kv_write_kernel<U>
        <<<grid_stride_blocks(n_tokens * row_units, kThreads), kThreads, 0, current_stream()>>>(
            static_cast<const char*>(k.data_ptr()), static_cast<const char*>(v.data_ptr()),
            k_token_bytes, v_token_bytes, static_cast<const int32_t*>(out_cache_loc.data_ptr()),
            static_cast<char*>(k_cache.data_ptr()), static_cast<char*>(v_cache.data_ptr()),
            n_tokens, row_units, k_cache.size(0));
    VELA_CUDA_CHECK_LAUNCH();
  };
  if (fits(16)) {
    launch(uint4{});
  } else if (fits(4)) {
    launch(uint32_t{});
  } else {
    launch(uint16_t{});
  }
}

}  // namespace vela::ops::cuda
