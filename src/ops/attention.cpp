// Attention dispatchers: validate shapes/dtypes/devices, then run the backend. The CUDA kernels
// (paged decode, ragged prefill, flash-style training) land with the CUDA engine and training
// issues; until then a CUDA tensor here is an Unsupported error, never a silent fallback.
#include "ops/attention.h"

#include <initializer_list>

#include "core/error.h"
#include "ops/cpu/cpu_ops.h"

namespace vela::ops {
namespace {

void check_cpu(const char* op, const Tensor& t) {
  VELA_CHECK_T(Unsupported, t.is_cpu(), op, ": CUDA attention is not implemented yet (tensor ",
               t.str(), ")");
}

void check_i32(const char* op, const char* name, const Tensor& t, int rank) {
  VELA_CHECK(t.defined() && t.dtype() == DType::kI32 && t.dim() == rank && t.is_contiguous(), op,
             ": ", name, " must be a contiguous i32 tensor of rank ", rank, ", got ", t.str());
}

}  // namespace

void causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_ids,
                      float scale, Tensor& out) {
  const char* op = "causal_attention";
  VELA_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && out.dim() == 4, op,
             ": q, k, v, out must be [batch, seq, heads, head_dim]");
  VELA_CHECK(k.shape() == v.shape(), op, ": k ", k.str(), " and v ", v.str(), " differ");
  VELA_CHECK(q.size(0) == k.size(0) && q.size(1) == k.size(1) && q.size(3) == k.size(3), op,
             ": q ", q.str(), " and k ", k.str(), " disagree on batch, seq or head_dim");
  VELA_CHECK(k.size(2) > 0 && q.size(2) % k.size(2) == 0, op, ": n_heads ", q.size(2),
             " is not a multiple of n_kv_heads ", k.size(2));
  VELA_CHECK(out.shape() == q.shape(), op, ": out ", out.str(), " must match q ", q.str());
  VELA_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype() && q.dtype() == out.dtype() &&
                 is_floating(q.dtype()),
             op, ": q, k, v, out must share one floating dtype");
  VELA_CHECK(q.is_contiguous() && k.is_contiguous() && v.is_contiguous() && out.is_contiguous(), op,
             ": tensors must be contiguous");
  if (doc_ids.defined()) {
    check_i32(op, "doc_ids", doc_ids, 2);
    VELA_CHECK(doc_ids.size(0) == q.size(0) && doc_ids.size(1) == q.size(1), op, ": doc_ids ",
               doc_ids.str(), " must be [batch, seq]");
  }
  for (const Tensor* t : std::initializer_list<const Tensor*>{&q, &k, &v, &out}) check_cpu(op, *t);
  cpu::causal_attention(q, k, v, doc_ids, scale, out);
}

void kv_write(const Tensor& k, const Tensor& v, const Tensor& out_cache_loc, Tensor& k_cache,
              Tensor& v_cache) {
  const char* op = "kv_write";
  VELA_CHECK(k.dim() == 3 && k.shape() == v.shape(), op, ": k ", k.str(), " and v ", v.str(),
             " must both be [n_tokens, n_kv_heads, head_dim]");
  VELA_CHECK(k_cache.dim() == 3 && k_cache.shape() == v_cache.shape() &&
                 k_cache.size(1) == k.size(1) && k_cache.size(2) == k.size(2),
             op, ": caches ", k_cache.str(), " must be [n_slots, ", k.size(1), ", ", k.size(2), "]");
  VELA_CHECK(k.dtype() == k_cache.dtype() && v.dtype() == v_cache.dtype() && k.dtype() == v.dtype(),
             op, ": K/V and cache dtypes differ");
  VELA_CHECK(k_cache.is_contiguous() && v_cache.is_contiguous(), op, ": caches must be contiguous");
  VELA_CHECK(k.stride(2) == 1 && v.stride(2) == 1 && k.stride(1) == k.size(2) &&
                 v.stride(1) == v.size(2),
             op, ": each token's K/V rows must be contiguous");
  check_i32(op, "out_cache_loc", out_cache_loc, 1);
  VELA_CHECK(out_cache_loc.size(0) == k.size(0), op, ": out_cache_loc has ", out_cache_loc.size(0),
             " entries for ", k.size(0), " tokens");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&k, &v, &k_cache, &v_cache, &out_cache_loc}) check_cpu(op, *t);
  cpu::kv_write(k, v, out_cache_loc, k_cache, v_cache);
}

void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                     const Tensor& req_to_token, const Tensor& req_pool_indices,
                     const Tensor& seq_lens, const Tensor& qo_indptr, float scale, Tensor& out) {
  const char* op = "paged_attention";
  VELA_CHECK(q.dim() == 3 && out.shape() == q.shape(), op, ": q ", q.str(), " and out ", out.str(),
             " must be [n_tokens, n_heads, head_dim]");
  VELA_CHECK(q.stride(2) == 1 && q.stride(1) == q.size(2), op, ": q rows must be contiguous");
  VELA_CHECK(out.is_contiguous(), op, ": out must be contiguous");
  VELA_CHECK(k_cache.dim() == 3 && k_cache.shape() == v_cache.shape() && k_cache.is_contiguous() &&
                 v_cache.is_contiguous() && k_cache.size(2) == q.size(2),
             op, ": caches ", k_cache.str(), " must be contiguous [n_slots, n_kv_heads, ", q.size(2),
             "]");
  VELA_CHECK(k_cache.size(1) > 0 && q.size(1) % k_cache.size(1) == 0, op, ": n_heads ", q.size(1),
             " is not a multiple of n_kv_heads ", k_cache.size(1));
  VELA_CHECK(q.dtype() == out.dtype() && k_cache.dtype() == v_cache.dtype(), op,
             ": q/out and cache dtypes must match pairwise");
  check_i32(op, "req_to_token", req_to_token, 2);
  check_i32(op, "req_pool_indices", req_pool_indices, 1);
  check_i32(op, "seq_lens", seq_lens, 1);
  check_i32(op, "qo_indptr", qo_indptr, 1);
  VELA_CHECK(seq_lens.size(0) == req_pool_indices.size(0) &&
                 qo_indptr.size(0) == seq_lens.size(0) + 1,
             op, ": need n_seqs seq_lens/req_pool_indices and n_seqs + 1 qo_indptr");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&q, &k_cache, &v_cache, &req_to_token, &out}) check_cpu(op, *t);
  // Host-side metadata checks (cheap; the metadata is small).
  const int32_t* qo = qo_indptr.data<int32_t>();
  const int32_t* lens = seq_lens.data<int32_t>();
  const int32_t* rows = req_pool_indices.data<int32_t>();
  int64_t n_seqs = seq_lens.size(0);
  VELA_CHECK(qo[0] == 0 && qo[n_seqs] == q.size(0), op, ": qo_indptr must run from 0 to n_tokens (",
             q.size(0), ")");
  for (int64_t s = 0; s < n_seqs; ++s) {
    int32_t q_len = qo[s + 1] - qo[s];
    VELA_CHECK(q_len >= 0 && q_len <= lens[s], op, ": sequence ", s, " has ", q_len,
               " queries but only ", lens[s], " cached tokens");
    VELA_CHECK(lens[s] <= req_to_token.size(1), op, ": sequence ", s, " length ", lens[s],
               " exceeds req_to_token width ", req_to_token.size(1));
    VELA_CHECK(rows[s] >= 0 && rows[s] < req_to_token.size(0), op, ": req_pool_index ", rows[s],
               " out of range");
  }
  cpu::paged_attention(q, k_cache, v_cache, req_to_token, req_pool_indices, seq_lens, qo_indptr,
                       scale, out);
}

}  // namespace vela::ops
