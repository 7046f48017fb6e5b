// Attention ops: causal scaled-dot-product attention for the dense training path and the packed
// (ragged) inference path over a KV cache addressed through a request-to-slot table.
//
// Scores are computed in fp32 with softmax max-subtraction; GQA maps query head h to KV head
// h / (n_heads / n_kv_heads). `scale` is usually 1/sqrt(head_dim).
#pragma once

#include "core/tensor.h"

namespace vela::ops {

// Dense causal attention with optional document boundaries (packed training sequences).
//   q: [batch, seq, n_heads, head_dim]   k, v: [batch, seq, n_kv_heads, head_dim]
//   doc_ids: undefined, or [batch, seq] i32 — a query attends only to keys of the same doc id
//   out: [batch, seq, n_heads, head_dim]; all contiguous, f32/bf16/f16 (one dtype).
void causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_ids,
                      float scale, Tensor& out);

// Writes new K/V rows into one layer's cache: k_cache[out_cache_loc[i]] = k[i].
//   k, v: [n_tokens, n_kv_heads, head_dim]   k_cache, v_cache: [n_slots, n_kv_heads, head_dim]
//   out_cache_loc: [n_tokens] i32
void kv_write(const Tensor& k, const Tensor& v, const Tensor& out_cache_loc, Tensor& k_cache,
              Tensor& v_cache);

// Packed attention of a ragged batch over the cache (after kv_write of this step's tokens).
//   q: [n_tokens, n_heads, head_dim]; sequence s owns q rows [qo_indptr[s], qo_indptr[s+1]) and
//   has seq_lens[s] cached tokens (this step's included) whose slots are
//   req_to_token[req_pool_indices[s], 0 : seq_lens[s]]. Query i of s sits at position
//   seq_lens[s] - q_len_s + i and attends causally to positions <= its own.
//   k_cache, v_cache: [n_slots, n_kv_heads, head_dim]   req_to_token: [max_reqs, max_ctx] i32
//   req_pool_indices, seq_lens: [n_seqs] i32   qo_indptr: [n_seqs + 1] i32
//   out: [n_tokens, n_heads, head_dim]
void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                     const Tensor& req_to_token, const Tensor& req_pool_indices,
                     const Tensor& seq_lens, const Tensor& qo_indptr, float scale, Tensor& out);

}  // namespace vela::ops
