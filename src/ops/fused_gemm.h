// GEMMs with the neighbouring decode-layer op folded in (the projections of a pre-norm block):
//   rms_norm_gemm:     out = rms_norm(x, norm_w, eps) @ w^T
//   rms_norm_gemm_silu_mul: act = silu_and_mul(rms_norm(x, norm_w, eps) @ w^T)   (w = gate | up)
//   gemm_silu_mul:     act = silu_and_mul(a @ w^T)                   (w = gate | up)
//   gemm_rotary_kv_write: qkv_rotary_kv_write(a @ w^T, ...)          (w = q | k | v)
//   gemm_add:          residual += a @ w^T
//   silu_mul_gemm_add: residual += silu_and_mul(h) @ w^T      (h = [gate | up])
//   rms_norm_gemm_rotary_kv_write: the q|k|v projection of a decode layer without QK-norm,
//                      qkv_rotary_kv_write(rms_norm(x, norm_w, eps) @ w^T, ...) (ops/qkv_rotary.h)
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
// and writes q / the cache slot in its epilogue, for full-width rotary); anything else, and the CPU, runs the unfused ops (temporaries
// from the scratch arena).
// The decode layer uses rms_norm_gemm_rotary_kv_write (q|k|v without QK-norm; rms_norm_gemm +
// qkv_rotary_kv_write with it), gemm_add (o, down) and rms_norm_gemm_silu_mul
// (gate_up): silu_mul_gemm_add's per-block prologue costs more than the kernel it saves.
// gemm_silu_mul and gemm_rotary_kv_write are the gate_up and q|k|v of multi-row steps (no norm:
// it is fused into the residual add before them); on sm_90 3..64 rows run as one TMA wgmma GEMM
// with SiLU * up, or QK-norm + rotary + the q / KV-cache stores (head_dim 64 or 128, full rotary),
// in its epilogue (ops/cuda/gemm_wgmma.cu); anything else as the GEMM and the op after it.
#pragma once

#include "core/tensor.h"

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

}  // namespace vela::ops
