// CPU attention: dense causal (training path) and packed paged (inference path), plus the KV write.
// One work item = (query token, KV head): the n_heads / n_kv_heads query heads that share a KV head
// are scored together so each K/V row is converted to f32 once. Softmax in fp32, sums in double.
#include <cmath>

#include "core/parallel.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/vec.h"

namespace vela::ops::cpu {
namespace {

// Attends n_rep query rows (f32, [n_rep, d]) to keys/values 0..n_keys-1 given by key(p)/value(p)
// (pointers to rows of T), skipping keys where !visible(p). Writes n_rep output rows of T and,
// when lse is not null, row r's log-sum-exp of the scaled scores to lse[r * lse_stride].
template <typename T, typename KeyFn, typename ValFn, typename VisFn>
void attend(const float* q, int64_t n_rep, int64_t d, int64_t n_keys, KeyFn key, ValFn value,
            VisFn visible, float scale, T* out, int64_t out_row_stride, float* lse = nullptr,
            int64_t lse_stride = 0) {
  float* scores = scratch(static_cast<size_t>(n_rep * n_keys + 1), 1);
  float* acc = scratch(static_cast<size_t>(n_rep * d), 3);
  for (int64_t p = 0; p < n_keys; ++p) {
    if (!visible(p)) {
      for (int64_t r = 0; r < n_rep; ++r) scores[r * n_keys + p] = -INFINITY;
      continue;
    }
    const float* k = row_as_f32(key(p), d, 2);
    for (int64_t r = 0; r < n_rep; ++r) {
      const float* qr = q + r * d;
      float s = 0.f;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < d; ++i) s += qr[i] * k[i];
      scores[r * n_keys + p] = s * scale;
    }
  }
  for (int64_t r = 0; r < n_rep; ++r) {
    float* sr = scores + r * n_keys;
    float m = max_of(sr, n_keys);
    double total = m == -INFINITY ? 0.0 : exp_shift_sum(sr, sr, n_keys, m);
    float inv = total > 0 ? static_cast<float>(1.0 / total) : 0.f;
    if (lse != nullptr)
      lse[r * lse_stride] = total > 0 ? m + static_cast<float>(std::log(total)) : -INFINITY;
    for (int64_t p = 0; p < n_keys; ++p) sr[p] = m == -INFINITY ? 0.f : sr[p] * inv;
  }
  std::fill(acc, acc + n_rep * d, 0.f);
  for (int64_t p = 0; p < n_keys; ++p) {
    if (!visible(p)) continue;
    const float* v = row_as_f32(value(p), d, 2);
    for (int64_t r = 0; r < n_rep; ++r) {
      float w = scores[r * n_keys + p];
      float* ar = acc + r * d;
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) ar[i] += w * v[i];
    }
  }
  for (int64_t r = 0; r < n_rep; ++r) store_f32(acc + r * d, out + r * out_row_stride, d);
}

template <typename T>
void query_rows_f32(const T* q, int64_t n_rep, int64_t d, float* dst) {
  load_f32(q, dst, n_rep * d);
}

}  // namespace

void causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_ids,
                      float scale, Tensor& out, const Tensor& lse) {
  const int64_t n_batch = q.size(0), n_seq = q.size(1), n_heads = q.size(2), d = q.size(3);
  const int64_t n_kv = k.size(2), n_rep = n_heads / n_kv;
  const int32_t* docs = doc_ids.defined() ? doc_ids.data<int32_t>() : nullptr;
  float* lse_p = lse.defined() ? lse.data<float>() : nullptr;  // [batch, n_heads, seq]
  visit_float(q.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* qp = static_cast<const T*>(q.data_ptr());
    const T* kp = static_cast<const T*>(k.data_ptr());
    const T* vp = static_cast<const T*>(v.data_ptr());
    T* op = static_cast<T*>(out.data_ptr());
    parallel_for(n_batch * n_seq * n_kv, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> qbuf(static_cast<size_t>(n_rep * d));
      for (int64_t item = begin; item < end; ++item) {
        int64_t g = item % n_kv, t = (item / n_kv) % n_seq, b = item / (n_kv * n_seq);
        int64_t q_off = ((b * n_seq + t) * n_heads + g * n_rep) * d;
        query_rows_f32(qp + q_off, n_rep, d, qbuf.data());
        const int32_t* doc_row = docs ? docs + b * n_seq : nullptr;
        auto key = [&](int64_t p) { return kp + ((b * n_seq + p) * n_kv + g) * d; };
        auto val = [&](int64_t p) { return vp + ((b * n_seq + p) * n_kv + g) * d; };
        auto vis = [&](int64_t p) { return doc_row == nullptr || doc_row[p] == doc_row[t]; };
        float* lse_row = lse_p ? lse_p + (b * n_heads + g * n_rep) * n_seq + t : nullptr;
        attend(qbuf.data(), n_rep, d, t + 1, key, val, vis, scale, op + q_off, d, lse_row, n_seq);
      }
    });
  });
}

void kv_write(const Tensor& k, const Tensor& v, const Tensor& out_cache_loc, Tensor& k_cache,
              Tensor& v_cache) {
  const int64_t n_tokens = k.size(0), n_slots = k_cache.size(0);
  const size_t row_bytes = static_cast<size_t>(k.size(1) * k.size(2)) * k.element_size();
  const int32_t* loc = out_cache_loc.data<int32_t>();
  for (int64_t i = 0; i < n_tokens; ++i)
    VELA_CHECK(loc[i] >= 0 && loc[i] < n_slots, "kv_write: slot ", loc[i], " out of range [0, ",
               n_slots, ")");
  const char* kp = static_cast<const char*>(k.data_ptr());
  const char* vp = static_cast<const char*>(v.data_ptr());
  char* kc = static_cast<char*>(k_cache.data_ptr());
  char* vc = static_cast<char*>(v_cache.data_ptr());
  const int64_t ks = k.stride(0) * static_cast<int64_t>(k.element_size());
  const int64_t vs = v.stride(0) * static_cast<int64_t>(v.element_size());
  for (int64_t i = 0; i < n_tokens; ++i) {
    std::memcpy(kc + loc[i] * row_bytes, kp + i * ks, row_bytes);
    std::memcpy(vc + loc[i] * row_bytes, vp + i * vs, row_bytes);
  }
}

void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                     const Tensor& req_to_token, const Tensor& req_pool_indices,
                     const Tensor& seq_lens, const Tensor& qo_indptr, float scale, Tensor& out) {
  const int64_t n_tokens = q.size(0), n_heads = q.size(1), d = q.size(2);
  const int64_t n_kv = k_cache.size(1), n_rep = n_heads / n_kv, n_slots = k_cache.size(0);
  const int64_t n_seqs = seq_lens.size(0), max_ctx = req_to_token.size(1);
  const int32_t* qo = qo_indptr.data<int32_t>();
  const int32_t* lens = seq_lens.data<int32_t>();
  const int32_t* rows = req_pool_indices.data<int32_t>();
  const int32_t* r2t = req_to_token.data<int32_t>();
  // Token -> sequence map, and a slot range check before any kernel reads through the table.
  std::vector<int32_t> seq_of(static_cast<size_t>(n_tokens));
  for (int64_t s = 0; s < n_seqs; ++s) {
    for (int32_t i = qo[s]; i < qo[s + 1]; ++i) seq_of[i] = static_cast<int32_t>(s);
    const int32_t* slots = r2t + rows[s] * max_ctx;
    for (int32_t p = 0; p < lens[s]; ++p)
      VELA_CHECK(slots[p] >= 0 && slots[p] < n_slots, "paged_attention: sequence ", s,
                 " position ", p, " maps to slot ", slots[p], " outside the cache");
  }
  const int64_t q_row_stride = q.stride(0);
  visit_float(q.dtype(), [&](auto qtag) {
    using TQ = typename decltype(qtag)::type;
    visit_float(k_cache.dtype(), [&](auto ktag) {
      using TK = typename decltype(ktag)::type;
      const TQ* qp = static_cast<const TQ*>(q.data_ptr());
      const TK* kc = static_cast<const TK*>(k_cache.data_ptr());
      const TK* vc = static_cast<const TK*>(v_cache.data_ptr());
      TQ* op = static_cast<TQ*>(out.data_ptr());
      parallel_for(n_tokens * n_kv, 1, [&](int64_t begin, int64_t end) {
        std::vector<float> qbuf(static_cast<size_t>(n_rep * d));
        for (int64_t item = begin; item < end; ++item) {
          int64_t g = item % n_kv, t = item / n_kv;
          int32_t s = seq_of[t];
          int64_t q_len = qo[s + 1] - qo[s];
          int64_t pos = lens[s] - q_len + (t - qo[s]);  // this query's position
          const int32_t* slots = r2t + rows[s] * max_ctx;
          query_rows_f32(qp + t * q_row_stride + g * n_rep * d, n_rep, d, qbuf.data());
          auto key = [&](int64_t p) { return kc + (slots[p] * n_kv + g) * d; };
          auto val = [&](int64_t p) { return vc + (slots[p] * n_kv + g) * d; };
          auto vis = [](int64_t) { return true; };
          attend(qbuf.data(), n_rep, d, pos + 1, key, val, vis, scale,
                 op + (t * n_heads + g * n_rep) * d, d);
        }
      });
    });
  });
}

void paged_decode_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const Tensor& req_to_token, const Tensor& req_pool_indices,
                            const Tensor& seq_lens, float scale, int /*n_splits*/,
                            Tensor& /*o_part*/, Tensor& /*lse_part*/, Tensor& out) {
  // One query per sequence: qo_indptr = 0, 1, ..., n_seqs.
  const int64_t n_seqs = seq_lens.size(0);
  Tensor qo_indptr = Tensor::empty({n_seqs + 1}, DType::kI32);
  int32_t* qo = qo_indptr.data<int32_t>();
  for (int64_t s = 0; s <= n_seqs; ++s) qo[s] = static_cast<int32_t>(s);
  paged_attention(q, k_cache, v_cache, req_to_token, req_pool_indices, seq_lens, qo_indptr, scale,
                  out);
}

void paged_prefill_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                             const Tensor& req_to_token, const Tensor& req_pool_indices,
                             const Tensor& seq_lens, const Tensor& qo_indptr,
                             const Tensor& /*tile_seq_idx*/, const Tensor& /*tile_q_start*/,
                             int64_t /*n_tiles*/, float scale, Tensor& out) {
  paged_attention(q, k_cache, v_cache, req_to_token, req_pool_indices, seq_lens, qo_indptr, scale,
                  out);
}

}  // namespace vela::ops::cpu
