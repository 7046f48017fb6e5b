// CUDA paged decode attention (split-KV flash-decoding), the same kernel run over the rows of a
// ragged batch (the f32 prefill path), the split merge, and kv_write.
//
// Row kernel: one block = (row, KV head, group chunk, split). The block's 128 threads are split
// into groups of kTpk = head_dim / (16 B of T) threads; each group owns one key row at a time (kTpk
// 16-byte pieces) and scores it against all query heads of the KV head (GQA: one K/V load serves
// the whole group). K/V rows are gathered by slot with cp.async into a 4-stage shared-memory
// pipeline; each thread copies exactly the pieces it later reads, so the pipeline needs no block
// barrier, and the slots of the next stage are prefetched into registers a stage ahead. Every
// group keeps its own online-softmax state (fp32, log2 domain); the groups merge through shared
// memory at the end. A row reads its key count from seq_lens on the device; splits past the end
// exit at once and the merge kernel only combines live splits (graph replay with growing lengths).
#include "ops/cuda/attention_common.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace vela::ops::cuda {

namespace {

constexpr int kRowThreads = 128;
constexpr int kStages = 4;
constexpr int kUnroll = 2;  // key rows per thread group per stage
constexpr float kLog2e = 1.4426950408889634f;

struct RowsArgs {
  const void* q;
  int64_t q_token_stride;  // elements
  const void* k_cache;     // [n_slots, n_kv_heads, head_dim]
  const void* v_cache;
  const int32_t* req_to_token;
  int64_t r2t_stride;
  const int32_t* req_pool_indices;
  const int32_t* seq_lens;
  const int32_t* qo_indptr;  // nullptr: decode (row = sequence); else row = query token
  int32_t n_seqs;
  int32_t n_heads;
  int32_t n_kv_heads;
  int32_t group;           // n_heads / n_kv_heads
  int32_t n_group_chunks;  // ceil(group / kG)
  int32_t n_splits;
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

template <typename T, int D, int kG>
struct RowsCfg {
  static constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  static constexpr int kTpk = D / kVec;            // threads per key row
  static constexpr int kKpp = kRowThreads / kTpk;  // key rows per pass
  static constexpr int kKps = kKpp * kUnroll;      // key rows per stage
  static constexpr int kPipeBytes = kStages * kKps * D * static_cast<int>(sizeof(T)) * 2;
  static constexpr int kMergeBytes = (kKpp * kG * D + 2 * kKpp * kG + 2 * kG) * 4;
  static constexpr int kSmemBytes = kPipeBytes > kMergeBytes ? kPipeBytes : kMergeBytes;
  static_assert(kTpk >= 1 && kTpk <= 32 && 32 % kTpk == 0, "head_dim / vector mismatch");
};

}  // namespace

template <typename T, int D, int kG>
static __global__ void __launch_bounds__(kRowThreads) rows_attention_kernel(RowsArgs a) {
  using Cfg = RowsCfg<T, D, kG>;
  constexpr int kVec = Cfg::kVec, kTpk = Cfg::kTpk, kKpp = Cfg::kKpp, kKps = Cfg::kKps;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sk = reinterpret_cast<T*>(smem_raw);  // [kStages][kKps][D]
  T* sv = sk + kStages * kKps * D;

  const int row = blockIdx.x;
  const int kv_head = blockIdx.y / a.n_group_chunks;
  const int g0 = (blockIdx.y % a.n_group_chunks) * kG;
  const int n_g = min(kG, a.group - g0);
  const int split = blockIdx.z;
  const bool direct = a.n_splits == 1;
  const int tid = threadIdx.x, kk = tid / kTpk, part = tid % kTpk;
  const int head0 = kv_head * a.group + g0;  // first query head of this block

  int seq, n_keys;
  row_info(a, row, seq, n_keys);
  const int chunk = split_chunk(n_keys, a.n_splits);
  const int begin = split * chunk;
  const int end = min(begin + chunk, n_keys);
  if (begin >= end) {
    if (direct) {  // a padding row (no keys): zero output; with splits the merge writes it
      T* out = static_cast<T*>(a.out) + (static_cast<int64_t>(row) * a.n_heads + head0) * D;
      for (int i = tid; i < n_g * D; i += kRowThreads) out[i] = from_float<T>(0.0f);
    }
    return;
  }

  // Query heads of the group, this thread's kVec features, pre-scaled into the log2 domain.
  float q[kG][kVec];
  const T* qp = static_cast<const T*>(a.q) + row * a.q_token_stride + head0 * D + part * kVec;
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    if (g < n_g) {
      load_float<kVec>(qp + g * D, q[g]);
#pragma unroll
      for (int i = 0; i < kVec; ++i) q[g][i] *= a.scale_log2;
    } else {
#pragma unroll
      for (int i = 0; i < kVec; ++i) q[g][i] = 0.0f;
    }
  }

  const int32_t* slots_of = a.req_to_token + a.req_pool_indices[seq] * a.r2t_stride;
  const int64_t slot_stride = static_cast<int64_t>(a.n_kv_heads) * D;
  const T* kbase = static_cast<const T*>(a.k_cache) + kv_head * D + part * kVec;
  const T* vbase = static_cast<const T*>(a.v_cache) + kv_head * D + part * kVec;
  const int n_steps = (end - begin + kKps - 1) / kKps;

  auto load_slots = [&](int step, int(&slots)[kUnroll]) {
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      const int p = begin + step * kKps + j * kKpp + kk;
      slots[j] = p < end ? slots_of[p] : -1;
    }
  };
  auto issue = [&](int step, const int(&slots)[kUnroll]) {
    const int stage = step % kStages;
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      const int off = (stage * kKps + j * kKpp + kk) * D + part * kVec;
      const bool valid = slots[j] >= 0;
      const int64_t src = valid ? slots[j] * slot_stride : 0;
      cp_async16(sk + off, kbase + src, valid);
      cp_async16(sv + off, vbase + src, valid);
    }
  };

  int slots[kUnroll];
  load_slots(0, slots);
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < n_steps) {
      issue(st, slots);
      load_slots(st + 1, slots);
    }
    cp_async_commit();
  }

  float m[kG], l[kG], acc[kG][kVec];
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int i = 0; i < kVec; ++i) acc[g][i] = 0.0f;
  }

  for (int st = 0; st < n_steps; ++st) {
    if (st + kStages - 1 < n_steps) {
      issue(st + kStages - 1, slots);
      load_slots(st + kStages, slots);
    }
    cp_async_commit();
    cp_async_wait<kStages - 1>();
    const int stage = st % kStages;
    float s[kUnroll][kG];
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      float kf[kVec];
      load_float<kVec>(sk + (stage * kKps + j * kKpp + kk) * D + part * kVec, kf);
      const bool live = begin + st * kKps + j * kKpp + kk < end;
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
  for (int idx = tid; idx < n_g * D; idx += kRowThreads) {
    const int g = idx / D, d = idx % D;
    float o = 0.0f;
    for (int i = 0; i < kKpp; ++i) o += s_acc[(i * kG + g) * D + d];
    const float sum = s_tot[kG + g];
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    const int64_t rh = static_cast<int64_t>(row) * a.n_heads + head0 + g;
    if (direct) {
      static_cast<T*>(a.out)[rh * D + d] = from_float<T>(o * inv);
    } else {
      a.o_part[(rh * a.n_splits + split) * D + d] = o * inv;
      if (d == 0)
        a.lse_part[rh * a.n_splits + split] = sum > 0.0f ? s_tot[g] + log2f(sum) : -INFINITY;
    }
  }
}

// Combines the live splits of one (row, head): weights 2^(lse_i - max) (log2 domain).
template <typename T, int D>
static __global__ void merge_splits_kernel(RowsArgs a) {
  const int row = blockIdx.x, head = blockIdx.y, d = threadIdx.x;
  int seq, n_keys;
  row_info(a, row, seq, n_keys);
  const int n_live = live_splits(n_keys, a.n_splits);
  const int64_t rh = static_cast<int64_t>(row) * a.n_heads + head;
  const float* lse = a.lse_part + rh * a.n_splits;
  float mx = -INFINITY;
  for (int i = 0; i < n_live; ++i) mx = fmaxf(mx, lse[i]);
  float o = 0.0f, sum = 0.0f;
  if (mx != -INFINITY) {
    for (int i = 0; i < n_live; ++i) {
      const float w = exp2f(lse[i] - mx);
      sum += w;
      if (d < D) o += w * a.o_part[(rh * a.n_splits + i) * D + d];
    }
  }
  if (d < D) static_cast<T*>(a.out)[rh * D + d] = from_float<T>(sum > 0.0f ? o / sum : 0.0f);
}

namespace {

template <typename T, int D, int kG>
void launch_rows(const RowsArgs& args, int64_t n_rows) {
  using Cfg = RowsCfg<T, D, kG>;
  RowsArgs a = args;
  a.n_group_chunks = (a.group + kG - 1) / kG;
  constexpr int kSmem = Cfg::kSmemBytes;
  static_assert(kSmem <= 48 * 1024, "row kernel shared memory above the default limit");
  const dim3 grid(static_cast<unsigned>(n_rows),
                  static_cast<unsigned>(a.n_kv_heads * a.n_group_chunks),
                  static_cast<unsigned>(a.n_splits));
  rows_attention_kernel<T, D, kG><<<grid, kRowThreads, kSmem, current_stream()>>>(a);
  VELA_CUDA_CHECK_LAUNCH();
  if (a.n_splits > 1) {
    const dim3 mgrid(static_cast<unsigned>(n_rows), static_cast<unsigned>(a.n_heads));
    constexpr int kMergeThreads = D < 32 ? 32 : D;
    merge_splits_kernel<T, D><<<mgrid, kMergeThreads, 0, current_stream()>>>(a);
    VELA_CUDA_CHECK_LAUNCH();
  }
}

// Runs the row kernel (and merge) for n_rows rows; qo_indptr null for decode.
void run_rows(const char* op, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
              const Tensor& req_to_token, const Tensor& req_pool_indices, const Tensor& seq_lens,
              const int32_t* qo_indptr, float scale, int n_splits, Tensor& o_part, Tensor& lse_part,
              Tensor& out) {
  const int64_t n_rows = q.size(0), d = q.size(2);
  if (n_rows == 0) return;
  VELA_CHECK(n_rows <= 0x7fffffff, op, ": too many rows (", n_rows, ")");
  const int64_t es = static_cast<int64_t>(q.element_size());
  VELA_CHECK(is_aligned(q.data_ptr(), 16) && (q.stride(0) * es) % 16 == 0 &&
                 is_aligned(k_cache.data_ptr(), 16) && is_aligned(v_cache.data_ptr(), 16),
             op, ": q rows and the caches must be 16-byte aligned for the CUDA kernel");
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
  a.scale_log2 = scale * kLog2e;
  a.o_part = n_splits > 1 ? static_cast<float*>(o_part.data_ptr()) : nullptr;
  a.lse_part = n_splits > 1 ? static_cast<float*>(lse_part.data_ptr()) : nullptr;
  a.out = out.data_ptr();
  DeviceGuard guard(q.device().index);
  dispatch_float(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    dispatch_head_dim(d, op, [&](auto dim) {
      constexpr int D = decltype(dim)::value;
      if (a.group == 1) {
        launch_rows<T, D, 1>(a, n_rows);
      } else if (a.group == 2) {
        launch_rows<T, D, 2>(a, n_rows);
      } else if (a.group <= 4) {
        launch_rows<T, D, 4>(a, n_rows);
      } else {
        launch_rows<T, D, 8>(a, n_rows);
      }
    });
  });
}

}  // namespace

void paged_decode_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const Tensor& req_to_token, const Tensor& req_pool_indices,
                            const Tensor& seq_lens, float scale, int n_splits, Tensor& o_part,
                            Tensor& lse_part, Tensor& out) {
  run_rows("paged_decode_attention", q, k_cache, v_cache, req_to_token, req_pool_indices, seq_lens,
           nullptr, scale, n_splits, o_part, lse_part, out);
}

void paged_rows_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                          const Tensor& req_to_token, const Tensor& req_pool_indices,
                          const Tensor& seq_lens, const Tensor& qo_indptr, float scale,
                          int n_splits, Tensor& o_part, Tensor& lse_part, Tensor& out) {
  run_rows("paged_attention", q, k_cache, v_cache, req_to_token, req_pool_indices, seq_lens,
           static_cast<const int32_t*>(qo_indptr.data_ptr()), scale, n_splits, o_part, lse_part,
           out);
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
