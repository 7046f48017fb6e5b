// The fused projections of ops/fused_gemm.h: shape, dtype and device checks, then the CUDA GEMV
// or wgmma GEMM when it takes the problem, else the CPU twin (ops/cpu/fused_gemm.cpp) or the
// unfused ops.
#include "ops/fused_gemm.h"

#include "core/scratch_arena.h"
#include "ops/checks.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"
#include "ops/qkv_rotary.h"
#include "ops/rms_norm.h"
#include "ops/sampling.h"
#include "ops/swiglu.h"
#if defined(VELA_HAS_CUDA)
#include "ops/cuda/cuda_ops.h"
#endif

namespace vela::ops {

namespace {

// in: [n_rows, >= k] floating (the GEMM input, before any prologue), w: [n, k] of its dtype and
// device, rows contiguous.
void check_input_and_weight(const char* op, const char* in_name, const Tensor& in, int64_t k,
                            const Tensor& w) {
  check_defined(op, in_name, in);
  check_defined(op, "w", w);
  check_rank(op, in_name, in, 2);
  check_rank(op, "w", w, 2);
  check_floating(op, in_name, in);
  check_same_dtype(op, "w", w, in_name, in);
  check_same_device(op, "w", w, in_name, in);
  VELA_CHECK(w.size(1) == k, op, ": w ", w.str(), " must have ", k, " columns for ", in_name, " ",
             in.str());
  check_rows(op, in_name, in);
  check_rows(op, "w", w);
}

// in: [n_rows, k] (the GEMM input, after the prologue), w: [n, k], out: [n_rows, n].
void check_projection(const char* op, const char* in_name, const Tensor& in, int64_t k,
                      const Tensor& w, const char* out_name, const Tensor& out) {
  check_input_and_weight(op, in_name, in, k, w);
  check_defined(op, out_name, out);
  check_rank(op, out_name, out, 2);
  check_same_dtype(op, out_name, out, in_name, in);
  check_same_device(op, out_name, out, in_name, in);
  check_shape(op, out_name, out, {in.size(0), w.size(0)});
  check_out_rows(op, out_name, out);
}

// A norm weight of x [n_rows, k]: [k], f32 or x's dtype, on x's device.
void check_norm_weight(const char* op, const char* name, const Tensor& norm_w, const char* x_name,
                       const Tensor& x) {
  check_defined(op, name, norm_w);
  check_rank(op, name, norm_w, 1);
  VELA_CHECK(norm_w.size(0) == x.size(1), op, ": ", name, " ", norm_w.str(),
             " must have the width of ", x_name, " ", x.str());
  VELA_CHECK(norm_w.dtype() == DType::kF32 || norm_w.dtype() == x.dtype(), op, ": ", name, " ",
             norm_w.str(), " must be f32 or the dtype of ", x_name, " ", x.str());
  check_same_device(op, name, norm_w, x_name, x);
}

// x [n_rows, k] with its norm weight, projected by w [n, k].
void check_norm_input(const char* op, const Tensor& x, const Tensor& norm_w, float eps,
                      const Tensor& w, int64_t n) {
  check_defined(op, "x", x);
  check_defined(op, "w", w);
  check_rank(op, "x", x, 2);
  check_rank(op, "w", w, 2);
  check_floating(op, "x", x);
  check_same_dtype(op, "w", w, "x", x);
  check_same_device(op, "w", w, "x", x);
  VELA_CHECK(w.size(1) == x.size(1) && w.size(0) == n, op, ": w ", w.str(), " must be [", n, ", ",
             x.size(1), "] for x ", x.str());
  check_rows(op, "x", x);
  check_rows(op, "w", w);
  check_norm_weight(op, "norm_w", norm_w, "x", x);
  VELA_CHECK(eps >= 0.0f, op, ": eps ", eps, " must be >= 0");
}

// act [n_rows, inter] of the input `in` [n_rows, k] projected by w = gate | up [2 * inter, k]
// (w's shape against act only; the caller checks in against w).
void check_gate_up_act(const char* op, const char* in_name, const Tensor& in, const Tensor& w,
                       const Tensor& act) {
  check_defined(op, "act", act);
  VELA_CHECK(act.dim() == 2 && w.defined() && w.dim() == 2 && w.size(0) == 2 * act.size(1), op,
             ": w ", w.str(), " must be [2 * inter, k] (gate | up) for act ", act.str());
  check_same_dtype(op, "act", act, in_name, in);
  check_same_device(op, "act", act, in_name, in);
  check_shape(op, "act", act, {in.size(0), act.size(1)});
  check_out_rows(op, "act", act);
}

}  // namespace

void rms_norm_gemm(const Tensor& x, const Tensor& norm_w, float eps, const Tensor& w, Tensor& out) {
  const char* op = "rms_norm_gemm";
  check_projection(op, "x", x, x.dim() == 2 ? x.size(1) : -1, w, "out", out);
  check_norm_input(op, x, norm_w, eps, w, w.size(0));
  if (x.device().is_cpu()) return cpu::rms_norm_gemm(x, norm_w, eps, w, out);
#if defined(VELA_HAS_CUDA)
  if (cuda::gemv_rms_norm(x, norm_w, eps, w, out)) return;
#endif
  ScratchMark temporaries;
  Tensor normed = scratch_tensor(x.shape(), x.dtype(), x.device());
  rms_norm(x, norm_w, eps, normed);
  gemm(normed, w, out, false, true);
}

void rms_norm_gemm_silu_mul(const Tensor& x, const Tensor& norm_w, float eps, const Tensor& w,
                            Tensor& act) {
  const char* op = "rms_norm_gemm_silu_mul";
  check_norm_input(op, x, norm_w, eps, w, w.defined() && w.dim() == 2 ? w.size(0) : -1);
  check_gate_up_act(op, "x", x, w, act);
  if (x.device().is_cpu()) return cpu::rms_norm_gemm_silu_mul(x, norm_w, eps, w, act);
#if defined(VELA_HAS_CUDA)
  if (cuda::gemv_rms_norm_silu(x, norm_w, eps, w, act)) return;
#endif
  ScratchMark temporaries;
  Tensor h = scratch_tensor({x.size(0), w.size(0)}, x.dtype(), x.device());
  rms_norm_gemm(x, norm_w, eps, w, h);
  silu_and_mul(h, act);
}

void rms_norm_gemm_silu_mul(const NormPieces& x, float eps, const Tensor& w, Tensor& act) {
  const char* op = "rms_norm_gemm_silu_mul";
  check_input_and_weight(op, "scaled", x.scaled, x.scaled.dim() == 2 ? x.scaled.size(1) : -1, w);
  check_norm_pieces(op, x, x.scaled);
  VELA_CHECK(eps >= 0.0f, op, ": eps ", eps, " must be >= 0");
  check_gate_up_act(op, "scaled", x.scaled, w, act);
#if defined(VELA_HAS_CUDA) && defined(VELA_HAS_SM90A)
  if (x.scaled.device().is_cuda() && cuda::gemm_wgmma_silu_mul(x.scaled, w, act, x.row_sq, eps))
    return;
#endif
  ScratchMark temporaries;
  Tensor normed = scratch_tensor(x.scaled.shape(), x.scaled.dtype(), x.scaled.device());
  rms_scale_rows(x, eps, normed);
  gemm_silu_mul(normed, w, act);
}

void gemm_silu_mul(const Tensor& a, const Tensor& w, Tensor& act) {
  const char* op = "gemm_silu_mul";
  check_input_and_weight(op, "a", a, a.dim() == 2 ? a.size(1) : -1, w);
  check_gate_up_act(op, "a", a, w, act);
  if (a.device().is_cpu()) return cpu::gemm_silu_mul(a, w, act);
#if defined(VELA_HAS_CUDA) && defined(VELA_HAS_SM90A)
  if (cuda::gemm_wgmma_silu_mul(a, w, act)) return;
#endif
  ScratchMark temporaries;
  Tensor h = scratch_tensor({a.size(0), w.size(0)}, a.dtype(), a.device());
  gemm(a, w, h, false, true);
  silu_and_mul(h, act);
}

void gemm_add(const Tensor& a, const Tensor& w, Tensor& residual) {
  const char* op = "gemm_add";
  check_projection(op, "a", a, a.dim() == 2 ? a.size(1) : -1, w, "residual", residual);
  if (a.device().is_cpu()) return cpu::gemm_add(a, w, residual);
#if defined(VELA_HAS_CUDA)
  if (cuda::gemv_add(a, w, residual)) return;
#endif
  ScratchMark temporaries;
  Tensor y = scratch_tensor(residual.shape(), residual.dtype(), residual.device());
  gemm(a, w, y, false, true);
  add(residual, y, residual);
}

void gemm_add(const Tensor& a, const Tensor& w, Tensor& residual, const Tensor& next_norm_w,
              NormPieces& next) {
  const char* op = "gemm_add";
  check_projection(op, "a", a, a.dim() == 2 ? a.size(1) : -1, w, "residual", residual);
  check_norm_pieces(op, next, residual);
  check_norm_weight(op, "next_norm_w", next_norm_w, "residual", residual);
  check_contiguous(op, "next_norm_w", next_norm_w);
  // The pieces are written while the residual and a are read: separate memory.
  for (const void* p : {residual.data_ptr(), a.data_ptr()})
    VELA_CHECK(next.scaled.data_ptr() != p && next.row_sq.data_ptr() != p, op,
               ": the norm pieces must not share memory with residual or a");
#if defined(VELA_HAS_CUDA) && defined(VELA_HAS_SM90A)
  if (a.device().is_cuda() &&
      cuda::gemm_wgmma_add(a, w, residual, next_norm_w, next.scaled, next.row_sq))
    return;
#endif
  gemm_add(a, w, residual);
  norm_pieces(residual, next_norm_w, next);
}

void gemm_argmax_chunks(const Tensor& a, const Tensor& w, Tensor& logits, Tensor& chunk_max) {
  const char* op = "gemm_argmax_chunks";
  check_input_and_weight(op, "a", a, a.dim() == 2 ? a.size(1) : -1, w);
  check_defined(op, "logits", logits);
  check_dtype(op, "logits", logits, DType::kF32);
  VELA_CHECK(logits.dim() == 2 && logits.size(0) == a.size(0) && logits.size(1) == w.size(0), op,
             ": logits ", logits.str(), " must be [", a.size(0), ", ", w.size(0), "]");
  check_defined(op, "chunk_max", chunk_max);
#if defined(VELA_HAS_CUDA) && defined(VELA_HAS_SM90A)
  // (argmax_chunks checks chunk_max's shape on the other path; the kernel needs the same.)
  if (a.device().is_cuda() && chunk_max.dim() == 2 && chunk_max.dtype() == DType::kI64 &&
      chunk_max.stride(1) == 1 && chunk_max.size(0) >= a.size(0) &&
      chunk_max.size(1) >= argmax_chunk_count(w.size(0)) && chunk_max.device() == a.device() &&
      cuda::gemm_wgmma_argmax_chunks(a, w, logits, chunk_max))
    return;
#endif
  gemm(a, w, logits, false, true);
  argmax_chunks(logits, chunk_max);
}

void silu_mul_gemm_add(const Tensor& h, const Tensor& w, Tensor& residual) {
  const char* op = "silu_mul_gemm_add";
  check_defined(op, "h", h);
  VELA_CHECK(h.dim() == 2 && h.size(1) % 2 == 0, op, ": h ", h.str(),
             " must be [n_rows, 2 * k] (gate | up)");
  check_projection(op, "h", h, h.size(1) / 2, w, "residual", residual);
  if (h.device().is_cpu()) return cpu::silu_mul_gemm_add(h, w, residual);
#if defined(VELA_HAS_CUDA)
  if (cuda::gemv_silu_mul_add(h, w, residual)) return;
#endif
  ScratchMark temporaries;
  Tensor act = scratch_tensor({h.size(0), h.size(1) / 2}, h.dtype(), h.device());
  silu_and_mul(h, act);
  Tensor y = scratch_tensor(residual.shape(), residual.dtype(), residual.device());
  gemm(act, w, y, false, true);
  add(residual, y, residual);
}

void gemm_rotary_kv_write(const Tensor& a, const Tensor& w, const Tensor& positions,
                          const Tensor& table, const Tensor& q_norm, const Tensor& k_norm,
                          float eps, const Tensor& out_cache_loc, Tensor& q_out, Tensor& k_cache,
                          Tensor& v_cache) {
  const char* op = "gemm_rotary_kv_write";
  check_input_and_weight(op, "a", a, a.dim() == 2 ? a.size(1) : -1, w);
  check_qkv_rotary_operands(op, a.size(0), w.size(0), a.dtype(), a.device(), positions, table,
                            q_norm, k_norm, out_cache_loc, q_out, k_cache, v_cache);
#if defined(VELA_HAS_CUDA) && defined(VELA_HAS_SM90A)
  if (a.device().is_cuda() &&
      cuda::gemm_wgmma_rotary_kv_write(a, w, positions, table, q_norm, k_norm, eps, out_cache_loc,
                                       q_out, k_cache, v_cache))
    return;
#endif
  ScratchMark temporaries;
  Tensor qkv = scratch_tensor({a.size(0), w.size(0)}, a.dtype(), a.device());
  gemm(a, w, qkv, false, true);
  qkv_rotary_kv_write(qkv, positions, table, q_norm, k_norm, eps, out_cache_loc, q_out, k_cache,
                      v_cache);
}

void rms_norm_gemm_rotary_kv_write(const Tensor& x, const Tensor& norm_w, float eps,
                                   const Tensor& w, const Tensor& positions, const Tensor& table,
                                   const Tensor& out_cache_loc, Tensor& q_out, Tensor& k_cache,
                                   Tensor& v_cache) {
  const char* op = "rms_norm_gemm_rotary_kv_write";
  check_defined(op, "w", w);
  check_rank(op, "w", w, 2);
  check_norm_input(op, x, norm_w, eps, w, w.size(0));
  check_qkv_rotary_operands(op, x.size(0), w.size(0), x.dtype(), x.device(), positions, table,
                            Tensor(), Tensor(), out_cache_loc, q_out, k_cache, v_cache);
#if defined(VELA_HAS_CUDA)
  if (x.device().is_cuda() && cuda::gemv_rms_norm_rotary(x, norm_w, eps, w, positions, table,
                                                         out_cache_loc, q_out, k_cache, v_cache))
    return;
#endif
  ScratchMark temporaries;
  Tensor qkv = scratch_tensor({x.size(0), w.size(0)}, x.dtype(), x.device());
  rms_norm_gemm(x, norm_w, eps, w, qkv);
  qkv_rotary_kv_write(qkv, positions, table, Tensor(), Tensor(), 0.0f, out_cache_loc, q_out,
                      k_cache, v_cache);
}

void rms_norm_gemm_rotary_kv_write(const NormPieces& x, float eps, const Tensor& w,
                                   const Tensor& positions, const Tensor& table,
                                   const Tensor& q_norm, const Tensor& k_norm, float qk_eps,
                                   const Tensor& out_cache_loc, Tensor& q_out, Tensor& k_cache,
                                   Tensor& v_cache) {
  const char* op = "rms_norm_gemm_rotary_kv_write";
  const Tensor& a = x.scaled;
  check_input_and_weight(op, "scaled", a, a.dim() == 2 ? a.size(1) : -1, w);
  check_norm_pieces(op, x, a);
  VELA_CHECK(eps >= 0.0f, op, ": eps ", eps, " must be >= 0");
  check_qkv_rotary_operands(op, a.size(0), w.size(0), a.dtype(), a.device(), positions, table,
                            q_norm, k_norm, out_cache_loc, q_out, k_cache, v_cache);
#if defined(VELA_HAS_CUDA) && defined(VELA_HAS_SM90A)
  if (a.device().is_cuda() &&
      cuda::gemm_wgmma_rotary_kv_write(a, w, positions, table, q_norm, k_norm, qk_eps,
                                       out_cache_loc, q_out, k_cache, v_cache, x.row_sq, eps))
    return;
#endif
  ScratchMark temporaries;
  Tensor normed = scratch_tensor(a.shape(), a.dtype(), a.device());
  rms_scale_rows(x, eps, normed);
  gemm_rotary_kv_write(normed, w, positions, table, q_norm, k_norm, qk_eps, out_cache_loc, q_out,
                       k_cache, v_cache);
}

bool gemm_argmax_chunks_fused(int64_t n_rows, int64_t n, int64_t k, DType dtype, Device device) {
#if defined(VELA_HAS_CUDA) && defined(VELA_HAS_SM90A)
  if (!device.is_cuda() || (dtype != DType::kBF16 && dtype != DType::kF16)) return false;
  return cuda::wgmma_takes_rows(n_rows, device) && cuda::gemm_wgmma_splits_on(device, n, k) == 1;
#else
  (void)n_rows, (void)n, (void)k, (void)dtype, (void)device;
  return false;
#endif
}

bool norm_piece_gemms_take(int64_t n_rows, DType dtype, Device device) {
#if defined(VELA_HAS_CUDA) && defined(VELA_HAS_SM90A)
  if (!device.is_cuda() || (dtype != DType::kBF16 && dtype != DType::kF16)) return false;
  return cuda::wgmma_takes_rows(n_rows, device);
#else
  (void)n_rows, (void)dtype, (void)device;
  return false;
#endif
}

}  // namespace vela::ops
