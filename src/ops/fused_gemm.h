// GEMMs with the neighbouring decode-layer op folded in (the projections of a pre-norm block):
//   rms_norm_gemm:     out = rms_norm(x, norm_w, eps) @ w^T
//   rms_norm_gemm_silu_mul: act = silu_and_mul(rms_norm(x, norm_w, eps) @ w^T)   (w = gate | up)
//   gemm_silu_mul:     act = silu_and_mul(a @ w^T)                   (w = gate | up)
//   gemm_rotary_kv_write: qkv_rotary_kv_write(a @ w^T, ...)          (w = q | k | v)
//   gemm_add:          residual += a @ w^T
//   silu_mul_gemm_add: residual += silu_and_mul(h) @ w^T      (h = [gate | up])
//   rms_norm_gemm_rotary_kv_write: the q|k|v projection of a decode layer without QK-norm,
//                      qkv_rotary_kv_write(rms_norm(x, norm_w, eps) @ w^T, ...) (ops/qkv_rotary.h)
//   gemm_argmax_chunks: logits = a @ w^T and the sampler's argmax pieces of them (the LM head)
// Each is defined as the unfused ops compose it, including where they round to the storage dtype
// (the normed / activated input and the projection are rounded before use, the residual after the
// add), so fused and unfused results differ only in fp32 summation order.
//   x, a: [n_rows, k]   h: [n_rows, 2k]   w: [n, k] (rows contiguous, row stride free)
//   out, residual: [n_rows, n] (dtype of x)   norm_w: [k], f32 or the dtype of x
//   rms_norm_gemm_silu_mul, gemm_silu_mul: w [2 * inter, k], act [n_rows, inter]
// On CUDA 1..8 bf16/f16 rows run as one GEMV kernel (ops/cuda/gemv_kernel.cuh: every warp
// takes the row's rms, every block stages the normalised rows in shared memory; SiLU*up of the
// input is staged by every block; a warp owning gate j and up j applies SiLU*up in its epilogue;
// the residual add is an epilogue; a warp owning dimensions i and i + D/2 of a head rotates them
// and writes q / the cache slot in its epilogue, for full-width rotary); anything else, and the
// CPU, runs the unfused ops (temporaries from the scratch arena). The decode layer uses
// rms_norm_gemm_rotary_kv_write (q|k|v without QK-norm; rms_norm_gemm + qkv_rotary_kv_write with
// it), gemm_add (o, down) and rms_norm_gemm_silu_mul (gate_up): silu_mul_gemm_add's per-block
// prologue costs more than the kernel it saves. gemm_silu_mul and gemm_rotary_kv_write are the
// gate_up and q|k|v of multi-row steps on normed rows (the unfused blocks, and the fallback of the
// norm-pieces forms below); on sm_90 3..64 rows run as one TMA wgmma GEMM with SiLU * up, or
// QK-norm + rotary + the q / KV-cache stores (head_dim 64 or 128, full rotary), in its epilogue
// (ops/cuda/gemm_wgmma.cu); anything else as the GEMM and the op after it.
//
// Multi-row decode steps hand the next norm's input from GEMM to GEMM in two pieces
// (ops/rms_norm.h, NormPieces: round(x * norm_w) and x's row sums of squares):
//   gemm_add(a, w, residual, next_norm_w, next): residual += a @ w^T, then
//                      next = norm_pieces(residual, next_norm_w)
//   rms_norm_gemm_silu_mul(pieces, eps, w, act), rms_norm_gemm_rotary_kv_write(pieces, eps, w,
//                      ..., q_norm, k_norm, qk_eps, ...): the forms above on the normed rows of
//                      the pieces (QK-norm optional)
// On sm_90 3..64 rows run as the TMA wgmma GEMM: the add and the pieces in the o / down
// projection's split-K reduction; gate|up and q|k|v multiply each row of their product by the
// row's rstd (summed from row_sq) before their epilogue, so a layer is q|k|v, attention, o,
// gate|up, down: no norm kernel. rstd is then applied to the product instead of the input, which
// moves one rounding (the input is rounded as x * w instead of x * rstd * w): within a rounding of
// the unfused ops, not bit-equal. Elsewhere: gemm_add + norm_pieces, and rms_scale_rows (the normed
// rows) + the unnormed form.
#pragma once

#include "core/tensor.h"
#include "ops/rms_norm.h"

namespace vela::ops {

void rms_norm_gemm(const Tensor& x, const Tensor& norm_w, float eps, const Tensor& w, Tensor& out);
void rms_norm_gemm_silu_mul(const Tensor& x, const Tensor& norm_w, float eps, const Tensor& w,
                            Tensor& act);
void gemm_silu_mul(const Tensor& a, const Tensor& w, Tensor& act);
void gemm_add(const Tensor& a, const Tensor& w, Tensor& residual);
//   positions, table, q_norm, k_norm, eps, out_cache_loc, q_out, k_cache, v_cache as
//   qkv_rotary_kv_write; w: [(H + 2 * Hkv) * D, k].
void gemm_rotary_kv_write(const Tensor& a, const Tensor& w, const Tensor& positions,
                          const Tensor& table, const Tensor& q_norm, const Tensor& k_norm,
                          float eps, const Tensor& out_cache_loc, Tensor& q_out, Tensor& k_cache,
                          Tensor& v_cache);
void silu_mul_gemm_add(const Tensor& h, const Tensor& w, Tensor& residual);
//   w: [(H + 2 * Hkv) * D, k]; positions, table, out_cache_loc, q_out, k_cache, v_cache as
//   qkv_rotary_kv_write (no QK-norm).
void rms_norm_gemm_rotary_kv_write(const Tensor& x, const Tensor& norm_w, float eps,
                                   const Tensor& w, const Tensor& positions, const Tensor& table,
                                   const Tensor& out_cache_loc, Tensor& q_out, Tensor& k_cache,
                                   Tensor& v_cache);

// With norm pieces (see above). next_norm_w: [n] (residual's width), f32 or its dtype.
void gemm_add(const Tensor& a, const Tensor& w, Tensor& residual, const Tensor& next_norm_w,
              NormPieces& next);
void rms_norm_gemm_silu_mul(const NormPieces& x, float eps, const Tensor& w, Tensor& act);
//   q_norm, k_norm, qk_eps: QK-norm as qkv_rotary_kv_write (undefined: none).
void rms_norm_gemm_rotary_kv_write(const NormPieces& x, float eps, const Tensor& w,
                                   const Tensor& positions, const Tensor& table,
                                   const Tensor& q_norm, const Tensor& k_norm, float qk_eps,
                                   const Tensor& out_cache_loc, Tensor& q_out, Tensor& k_cache,
                                   Tensor& v_cache);
// The LM head with the sampler's argmax pieces: logits = a @ w^T (f32 [n_rows, vocab], as
// ops::gemm) and chunk_max = argmax_chunks(logits) (ops/sampling.h). On sm_90 the wgmma GEMM's
// rows (3..64 bf16/f16) write the pieces in its epilogue from the values it stores (one kernel,
// when the columns fill the SMs without split-K); anything else is the GEMM and then the op.
void gemm_argmax_chunks(const Tensor& a, const Tensor& w, Tensor& logits, Tensor& chunk_max);
// Whether gemm_argmax_chunks of n_rows rows against a [n, k] weight of `dtype` on `device` is the
// one kernel (the pieces then cost the LM head next to nothing; elsewhere they are a pass over the
// logits, no cheaper than the sampler's own).
bool gemm_argmax_chunks_fused(int64_t n_rows, int64_t n, int64_t k, DType dtype, Device device);

// Whether n_rows rows of `dtype` on `device` take the single-kernel norm-piece forms above (sm_90,
// the wgmma GEMM's rows): the multi-row fused decode layer (model/transformer.cpp) runs then.
bool norm_piece_gemms_take(int64_t n_rows, DType dtype, Device device);

}  // namespace vela::ops
