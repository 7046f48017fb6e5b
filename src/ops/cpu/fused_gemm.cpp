// CPU twins of ops/fused_gemm.h: the unfused CPU ops in sequence (the CPU engine's decode is
// bound by the weights too, and the norm / activation are a few microseconds of it), with the
// same rounding points as the CUDA GEMV kernels.
#include "core/scratch_arena.h"
#include "ops/cpu/cpu_ops.h"

namespace vela::ops::cpu {

void rms_norm_gemm(const Tensor& x, const Tensor& norm_w, float eps, const Tensor& w, Tensor& out) {
  ScratchMark temporaries;
  Tensor normed = scratch_tensor(x.shape(), x.dtype(), x.device());
  rms_norm(x, norm_w, eps, normed);
  gemm(normed, w, out, false, true, 1.0f, 0.0f);
}

void rms_norm_gemm_silu_mul(const Tensor& x, const Tensor& norm_w, float eps, const Tensor& w,
                            Tensor& act) {
  ScratchMark temporaries;
  const int64_t inter = act.size(1);
  Tensor h = scratch_tensor({x.size(0), 2 * inter}, x.dtype(), x.device());
  rms_norm_gemm(x, norm_w, eps, w, h);
  silu_mul(h.slice(1, 0, inter), h.slice(1, inter, 2 * inter), act);
}

void gemm_silu_mul(const Tensor& a, const Tensor& w, Tensor& act) {
  ScratchMark temporaries;
  const int64_t inter = act.size(1);
  Tensor h = scratch_tensor({a.size(0), 2 * inter}, a.dtype(), a.device());
  gemm(a, w, h, false, true, 1.0f, 0.0f);
  silu_mul(h.slice(1, 0, inter), h.slice(1, inter, 2 * inter), act);
}

void gemm_add(const Tensor& a, const Tensor& w, Tensor& residual) {
  ScratchMark temporaries;
  Tensor y = scratch_tensor(residual.shape(), residual.dtype(), residual.device());
  gemm(a, w, y, false, true, 1.0f, 0.0f);
  add(residual, y, residual);
}

void silu_mul_gemm_add(const Tensor& h, const Tensor& w, Tensor& residual) {
  ScratchMark temporaries;
  const int64_t k = h.size(1) / 2;
  Tensor act = scratch_tensor({h.size(0), k}, h.dtype(), h.device());
  silu_mul(h.slice(1, 0, k), h.slice(1, k, 2 * k), act);
  Tensor y = scratch_tensor(residual.shape(), residual.dtype(), residual.device());
  gemm(act, w, y, false, true, 1.0f, 0.0f);
  add(residual, y, residual);
}

}  // namespace vela::ops::cpu
