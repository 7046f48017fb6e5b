// Backend entry points behind the public ops in ops/*.h: CUDA implementations: kernels in
// ops/cuda/*.cu, launched on core/cuda/stream.h's current stream. Called only by the dispatchers in
// ops/*.cpp after they validated shapes, dtypes and devices, so these functions assume valid
// arguments. Semantics and shapes are documented in ops/*.h.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/l2_warm.h"

namespace vela::ops::cuda {

void gemm(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha,
          float beta);
// c[b, :m, :n] *= beta (beta 0 writes zeros): the K = 0 case of gemm.
void gemm_scale_c(Tensor& c, float beta, int64_t n_batch, int64_t m, int64_t n);
// c = alpha * a @ b^T for 1..2 rows of bf16/f16 a (beta 0; VELA_GEMV_MAX_ROWS moves the cap,
// 0..8): the decode GEMV; false when the problem does not have that shape (gemm then uses
// cuBLASLt).
bool gemv_small_m(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b,
                  float alpha, float beta);
// The most rows gemv_small_m takes (VELA_GEMV_MAX_ROWS, 0..8, default 2; read once).
int gemv_max_rows();
// c = alpha * a @ b^T for gemv_max_rows() + 1 .. kSkinnyMaxRows rows of bf16/f16 a (beta 0; c of
// a's dtype or f32): the tensor-core skinny GEMM (gemm_skinny.cu; VELA_SKINNY_GEMM=0 turns it
// off); false when the problem does not have that shape.
inline constexpr int kSkinnyMaxRows = 8;
inline constexpr int kSkinnyMaxSplits = 32;
bool gemm_skinny(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b,
                 float alpha, float beta);
// Benchmarks: 1 / 0 force the skinny GEMM on / off, -1 back to VELA_SKINNY_GEMM.
void gemm_skinny_set_enabled(int on);
// K ranges per 64-column tile of the skinny GEMM for an [n, k] weight on sm_count SMs.
int skinny_gemm_splits(int64_t n, int64_t k, int sm_count);
// c = alpha * a @ b^T for gemv_max_rows() + 1 .. kWgmmaDefaultRows rows of bf16/f16 a on an sm_90
// GPU (beta 0; c of a's dtype or f32): the Hopper wgmma GEMM (gemm_wgmma.cu; built where
// VELA_HAS_SM90A is defined; VELA_WGMMA_GEMM=0 turns it off, leaving these rows to the skinny
// GEMM and cuBLASLt; VELA_WGMMA_ROWS=N caps its rows at N); false when the problem does not have
// that shape or the device is not sm_90. It and the two fused forms below load their first weight
// chunks before waiting for the previous kernel (programmatic dependent launch): the weight must
// not be written by a kernel still in flight (pdl.cuh). The fused forms take the wgmma GEMM's rows
// (VELA_WGMMA_GEMM, VELA_WGMMA_ROWS) and always run the TMA kernel (VELA_WGMMA_TMA is the plain
// GEMM's switch).
inline constexpr int kWgmmaDefaultRows = 64;
inline constexpr int kWgmmaMaxRows = 64;
bool gemm_wgmma(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b,
                float alpha, float beta);
// Benchmarks: 1 forces the wgmma GEMM on for up to kWgmmaMaxRows rows, 0 off, -1 back to
// VELA_WGMMA_GEMM / VELA_WGMMA_ROWS.
void gemm_wgmma_set_enabled(int on);
// Benchmarks: 1 / 0 the wgmma GEMM's loads by TMA (the default) / by cp.async from every thread,
// -1 back to VELA_WGMMA_TMA.
void gemm_wgmma_set_tma(int on);
// Tests: 1 / 0 the decode layer's o / down / gate|up epilogues pipelined over their items or not
// at every row count (the same bits either way), -1 back to the default (from 64 rows;
// VELA_WGMMA_PIPE_ITEMS / VELA_WGMMA_PIPE_ITEMS_ROWS).
void gemm_wgmma_set_pipe_items(int on);
// act = silu_and_mul(a @ w^T) (w = gate | up [2 * inter, k], act [m, inter]) for the wgmma GEMM's
// rows in one kernel (the TMA kernel with SiLU * up in its epilogue; VELA_GEMM_SILU_MUL=0 turns
// it off); false when the problem does not have that shape. With row_sq defined, a is the scaled
// piece of a norm's input and row_sq its sums of squares (ops/rms_norm.h, NormPieces): each row of
// the product is scaled by the row's rstd (norm_eps) before the epilogue rounds it.
bool gemm_wgmma_silu_mul(const Tensor& a, const Tensor& w, Tensor& act,
                         const Tensor& row_sq = Tensor(), float norm_eps = 0.0f);
// qkv_rotary_kv_write(a @ w^T, ...) (ops/qkv_rotary.h; w = the fused q|k|v weight) for the wgmma
// GEMM's rows in one kernel: the TMA kernel with QK-norm, rotary and the q / cache stores in its
// split-K reduction (VELA_GEMM_ROTARY=0 turns it off); false unless head_dim is 64 or 128 with
// full-width rotary and the projection is split over K. Operands checked by the caller. row_sq,
// norm_eps: the rows' rstd, as gemm_wgmma_silu_mul.
bool gemm_wgmma_rotary_kv_write(const Tensor& a, const Tensor& w, const Tensor& positions,
                                const Tensor& table, const Tensor& q_norm, const Tensor& k_norm,
                                float eps, const Tensor& out_cache_loc, Tensor& q_out,
                                Tensor& k_cache, Tensor& v_cache, const Tensor& row_sq = Tensor(),
                                float norm_eps = 0.0f);
// residual += a @ w^T, then the next norm's pieces of it (ops/rms_norm.h, norm_pieces with next_w)
// into scaled and row_sq, for the wgmma GEMM's rows in one kernel: the add and the pieces in the
// split-K reduction; false unless the projection is split over K. Operands checked by the caller.
bool gemm_wgmma_add(const Tensor& a, const Tensor& w, Tensor& residual, const Tensor& next_w,
                    Tensor& scaled, Tensor& row_sq);
// logits = a @ w^T (f32) with ops::argmax_chunks(logits) written from the epilogue's values into
// chunk_max (i64 [>= m, >= ceil(n / 128)], checked by the caller), for the wgmma GEMM's rows in
// one kernel; false when the columns would need split-K (fewer 128-column tiles than SMs) or the
// operands do not suit the kernel.
bool gemm_wgmma_argmax_chunks(const Tensor& a, const Tensor& w, Tensor& logits, Tensor& chunk_max);
// The K ranges (split-K cluster size) the wgmma GEMM uses for a [n, k] weight on `device`.
int gemm_wgmma_splits_on(Device device, int64_t n, int64_t k);
// The most rows the wgmma GEMM takes now (0 when it is off).
int wgmma_max_rows();
// Whether n_rows rows are the wgmma GEMM's (gemv_max_rows() < n_rows <= wgmma_max_rows()) on
// `device`, an sm_90 GPU.
bool wgmma_takes_rows(int64_t n_rows, Device device);
// K ranges (= thread-block cluster size, at most max_cluster, up to 16) per 128-column tile of
// the wgmma GEMM for an [n, k] weight on sm_count SMs.
int wgmma_gemm_splits(int64_t n, int64_t k, int sm_count, int max_cluster = 16);
// The skinny GEMM's scratch on the current stream: the cuBLASLt workspace for split-K partials
// (stream-ordered, so never in use by a matmul at the same time) and tickets that are zero
// between launches (gemm_cublaslt.cpp).
struct SkinnyScratch {
  float* partials = nullptr;
  size_t partial_bytes = 0;
  int* counters = nullptr;
  int n_counters = 0;
};
SkinnyScratch gemm_skinny_scratch(int device);
// The fused decode GEMVs of ops/fused_gemm.h (gemv.cu); false when the problem is not 1..8
// aligned bf16/f16 rows (or its staged input exceeds the kernel's shared memory).
bool gemv_rms_norm(const Tensor& x, const Tensor& norm_w, float eps, const Tensor& w, Tensor& out);
bool gemv_rms_norm_silu(const Tensor& x, const Tensor& norm_w, float eps, const Tensor& w,
                        Tensor& act);
bool gemv_rms_norm_rotary(const Tensor& x, const Tensor& norm_w, float eps, const Tensor& w,
                          const Tensor& positions, const Tensor& table, const Tensor& out_cache_loc,
                          Tensor& q_out, Tensor& k_cache, Tensor& v_cache);
bool gemv_add(const Tensor& a, const Tensor& w, Tensor& residual);
bool gemv_silu_mul_add(const Tensor& h, const Tensor& w, Tensor& residual);
// Benchmarks: force the GEMV split (parts = warps per column 1/2/4/8, cols = columns per warp
// 1/2, the latter at one row only); 0 = the shape heuristic.
void gemv_set_split(int parts, int cols);
// Tests: cap every GEMV grid at `blocks` (each block then takes many column groups, the
// persistent path); 0 = the resident blocks.
void gemv_set_max_grid(int blocks);
void add(const Tensor& a, const Tensor& b, Tensor& out);
void mul(const Tensor& a, const Tensor& b, Tensor& out);
void scale(const Tensor& x, float s, Tensor& out);
void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out);
void add_rms_norm(const Tensor& x, Tensor& residual, const Tensor& w, float eps, Tensor& out);
void norm_pieces(const Tensor& x, const Tensor& w, Tensor& scaled, Tensor& row_sq);
void rms_scale_rows(const Tensor& scaled, const Tensor& row_sq, float eps, Tensor& out);
void rotary(Tensor& x, const Tensor& positions, const Tensor& table);
void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out);
void embedding(const Tensor& weight, const Tensor& ids, Tensor& out);
void softmax(const Tensor& x, Tensor& out);
void log_softmax(const Tensor& x, Tensor& out);
void argmax(const Tensor& x, Tensor& out);
void topk(const Tensor& x, int64_t k, Tensor& values, Tensor& indices);
void cross_entropy(const Tensor& logits, const Tensor& targets, Tensor& losses,
                   int32_t ignore_index, float label_smoothing);
void cast(const Tensor& x, Tensor& out);

// ops/write_ranges.h (device ranges trusted: one that does not fit is skipped)
void write_ranges(const Tensor& ranges, const Tensor& values, Tensor& table);
// Attention (ops/attention.h). Device metadata is trusted: kv_write skips out-of-range slots.
void kv_write(const Tensor& k, const Tensor& v, const Tensor& out_cache_loc, Tensor& k_cache,
              Tensor& v_cache);
// ops/qkv_rotary.h
void qkv_rotary_kv_write(const Tensor& qkv, const Tensor& positions, const Tensor& table,
                         const Tensor& q_norm, const Tensor& k_norm, float eps,
                         const Tensor& out_cache_loc, Tensor& q_out, Tensor& k_cache,
                         Tensor& v_cache);
void paged_decode_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const Tensor& req_to_token, const Tensor& req_pool_indices,
                            const Tensor& seq_lens, float scale, int n_splits, Tensor& o_part,
                            Tensor& lse_part, Tensor& out, const L2Warm& warm);
// tile_q: kPrefillTileQ, or kPrefillWideTileQ at head_dim <= kPrefillWideMaxHeadDim (16-bit) or
// where the wgmma kernel takes the operands (prefill_wgmma_takes); the public op pins
// prefill_tile_q, this one runs either kernel (tests compare both).
void paged_prefill_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                             const Tensor& req_to_token, const Tensor& req_pool_indices,
                             const Tensor& seq_lens, const Tensor& qo_indptr,
                             const Tensor& tile_seq_idx, const Tensor& tile_q_start,
                             int64_t n_tiles, int tile_q, float scale, Tensor& out);
// Tests and benchmarks: the K/V tiles (2..4) a tensor-core decode attention block keeps in
// flight; -1 back to VELA_DECODE_MMA_STAGES (default 4).
void decode_mma_set_stages(int stages);
#ifdef VELA_HAS_SM90A
// Whether the Hopper wgmma prefill kernel (attention_prefill_wgmma.cu) runs 128-row tiles of these
// operands on the current device: bf16/f16, head_dim 64 or 128, sm_90, not turned off
// (VELA_WGMMA_PREFILL=0 or prefill_wgmma_set_enabled(0)).
bool prefill_wgmma_takes(DType dtype, int64_t head_dim);
// Tests and benchmarks: 1 / 0 force the wgmma prefill kernel on / off, -1 back to
// VELA_WGMMA_PREFILL.
void prefill_wgmma_set_enabled(int on);
#endif
// Generic ragged attention: copies qo_indptr / seq_lens / req_pool_indices to the host
// (synchronizes), validates them, then runs the decode, row or tensor-core prefill kernel with
// temporary buffers.
void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                     const Tensor& req_to_token, const Tensor& req_pool_indices,
                     const Tensor& seq_lens, const Tensor& qo_indptr, float scale, Tensor& out);
// The f32 (CUDA-core) ragged kernel: one row per query token, n_splits chunks per row merged
// through the workspace (sized as decode's with n_seqs = n_tokens).
void paged_rows_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                          const Tensor& req_to_token, const Tensor& req_pool_indices,
                          const Tensor& seq_lens, const Tensor& qo_indptr, float scale,
                          int n_splits, Tensor& o_part, Tensor& lse_part, Tensor& out);

void sample(const Tensor& logits, const Tensor& params, const Tensor& entries, Tensor& counts,
            Tensor& work, Tensor& out, const Tensor& chunk_max, int32_t* next_ids);
void argmax_chunks(const Tensor& logits, Tensor& chunk_max);
void sample_reset_counts(Tensor& counts, const Tensor& resets, int32_t n_resets,
                         const Tensor& entries);
// Tests and benchmarks: 1 runs the sampler's one-pass draw and unrolled candidate compaction, 0
// the plain walks (the same tokens either way), -1 back to VELA_SAMPLE_FAST (default 1).
void sample_set_fast(int fast);
// Tests and benchmarks: 1 searches the exact top-k / top-p path's keys by radix selects (8 bits a
// pass), 0 by bisection (1 bit a pass; the same tokens either way), -1 back to VELA_SAMPLE_RADIX
// (default 0: measured slower for top-k alone at 64 rows, faster for top-k + top-p).
void sample_set_radix(int radix);

}  // namespace vela::ops::cuda
