// qkv_rotary_kv_write: what follows the fused q|k|v projection of a layer, as one op: split the
// projection into heads, QK-norm (qwen3) when given, rotary on q and k, q to its own tensor and
// k / v into the cache. The same as (and rounded where)
//   copy q, k, v out of qkv; rms_norm(q per head, q_norm); rms_norm(k per head, k_norm);
//   rotary(q); rotary(k); kv_write(k, v, out_cache_loc, k_cache, v_cache)
// round.
//   qkv: [n_tokens, (H + 2 * Hkv) * D] = q heads | k heads | v heads (rows contiguous)
//   positions: [n_tokens] i32   table: [n_positions, rotary_dim] f32 (ops/rotary.h)
//   q_norm, k_norm: [D] (f32 or the dtype of qkv) or both undefined; eps: their epsilon
//   out_cache_loc: [n_tokens] i32   q_out: [n_tokens, H, D] contiguous
//   k_cache, v_cache: [n_slots, Hkv, D] (dtype of qkv)
// On CUDA one warp per (token, q or k head) does it in registers (launched with programmatic
// dependent launch); the CPU runs the unfused ops. Device positions and slots are trusted as in
// rotary / kv_write (out of range: not rotated / not written).
#pragma once

#include "core/tensor.h"

namespace vela::ops {

void qkv_rotary_kv_write(const Tensor& qkv, const Tensor& positions, const Tensor& table,
                         const Tensor& q_norm, const Tensor& k_norm, float eps,
                         const Tensor& out_cache_loc, Tensor& q_out, Tensor& k_cache,
                         Tensor& v_cache);

// The checks of every operand but qkv, for a projection of n rows x qkv_width (shared with
// ops::rms_norm_gemm_rotary_kv_write, which produces the projection itself).
void check_qkv_rotary_operands(const char* op, int64_t n, int64_t qkv_width, DType dtype,
                               Device device, const Tensor& positions, const Tensor& table,
                               const Tensor& q_norm, const Tensor& k_norm,
                               const Tensor& out_cache_loc, const Tensor& q_out,
                               const Tensor& k_cache, const Tensor& v_cache);

}  // namespace vela::ops
