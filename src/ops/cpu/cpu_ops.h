// Backend entry points behind the public ops in ops/*.h: CPU reference implementations (OpenMP over rows, AVX2/AVX-512 inner loops, OpenBLAS GEMM).
// Called only by the dispatchers in ops/*.cpp after they validated shapes, dtypes and devices, so
// these functions assume valid arguments. Semantics and shapes are documented in ops/*.h.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/l2_warm.h"

namespace vela::ops::cpu {

void gemm(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha,
          float beta);
// ops::cpu_bf16_native (gemm.cpp): the bf16 GEMM kernels are compiled in and the CPU runs them.
bool bf16_native();
void add(const Tensor& a, const Tensor& b, Tensor& out);
void mul(const Tensor& a, const Tensor& b, Tensor& out);
void scale(const Tensor& x, float s, Tensor& out);
void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out);
void add_rms_norm(const Tensor& x, Tensor& residual, const Tensor& w, float eps, Tensor& out);
void norm_pieces(const Tensor& x, const Tensor& w, Tensor& scaled, Tensor& row_sq);
void rms_scale_rows(const Tensor& scaled, const Tensor& row_sq, float eps, Tensor& out);
void rotary(Tensor& x, const Tensor& positions, const Tensor& table);
void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out);
// ops/fused_gemm.h (cpu/fused_gemm.cpp)
void rms_norm_gemm(const Tensor& x, const Tensor& norm_w, float eps, const Tensor& w, Tensor& out);
void rms_norm_gemm_silu_mul(const Tensor& x, const Tensor& norm_w, float eps, const Tensor& w,
                            Tensor& act);
void gemm_silu_mul(const Tensor& a, const Tensor& w, Tensor& act);
void gemm_add(const Tensor& a, const Tensor& w, Tensor& residual);
void silu_mul_gemm_add(const Tensor& h, const Tensor& w, Tensor& residual);
void embedding(const Tensor& weight, const Tensor& ids, Tensor& out);
void softmax(const Tensor& x, Tensor& out);
void log_softmax(const Tensor& x, Tensor& out);
void argmax(const Tensor& x, Tensor& out);
void topk(const Tensor& x, int64_t k, Tensor& values, Tensor& indices);
void cross_entropy(const Tensor& logits, const Tensor& targets, Tensor& losses,
                   int32_t ignore_index, float label_smoothing);
void cast(const Tensor& x, Tensor& out);

void causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_ids,
                      float scale, Tensor& out, const Tensor& lse);
// ops/write_ranges.h
void write_ranges(const Tensor& ranges, const Tensor& values, Tensor& table);
void kv_write(const Tensor& k, const Tensor& v, const Tensor& out_cache_loc, Tensor& k_cache,
              Tensor& v_cache);
// ops/qkv_rotary.h
void qkv_rotary_kv_write(const Tensor& qkv, const Tensor& positions, const Tensor& table,
                         const Tensor& q_norm, const Tensor& k_norm, float eps,
                         const Tensor& out_cache_loc, Tensor& q_out, Tensor& k_cache,
                         Tensor& v_cache);
void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                     const Tensor& req_to_token, const Tensor& req_pool_indices,
                     const Tensor& seq_lens, const Tensor& qo_indptr, float scale, Tensor& out);
// CPU twins of the graph-friendly ops (ops/attention.h): the same math as paged_attention; the
// split count, workspace, L2 warm hint and tile plan are accepted and ignored.
void paged_decode_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const Tensor& req_to_token, const Tensor& req_pool_indices,
                            const Tensor& seq_lens, float scale, int n_splits, Tensor& o_part,
                            Tensor& lse_part, Tensor& out, const L2Warm& warm);
void paged_prefill_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                             const Tensor& req_to_token, const Tensor& req_pool_indices,
                             const Tensor& seq_lens, const Tensor& qo_indptr,
                             const Tensor& tile_seq_idx, const Tensor& tile_q_start,
                             int64_t n_tiles, int tile_q, float scale, Tensor& out);

void sample(const Tensor& logits, const Tensor& params, const Tensor& entries, Tensor& counts,
            Tensor& work, Tensor& out, const Tensor& chunk_max, int32_t* next_ids);
void argmax_chunks(const Tensor& logits, Tensor& chunk_max);
void sample_reset_counts(Tensor& counts, const Tensor& resets, int32_t n_resets,
                         const Tensor& entries);

}  // namespace vela::ops::cpu
