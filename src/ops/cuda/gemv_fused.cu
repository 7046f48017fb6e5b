// The fused decode GEMVs of ops/fused_gemm.h: rms_norm or SiLU*up prologue, residual-add, SiLU*up
// or rotary + KV-write epilogue (kernels in gemv_kernel.cuh).
#include "ops/cuda/gemv_kernel.cuh"

namespace vela::ops::cuda {

using namespace gemv_detail;

namespace {

// The arguments of an rms_norm-prologue GEMV writing `out` (x's dtype); false when the GEMV does
// not take these operands.
bool norm_args(const Tensor& x, const Tensor& norm_w, float eps, const Tensor& w, Tensor& out,
               GemvArgs& args) {
  if (!gemv_operands_ok(x, x.size(1), w, out) || out.dtype() != x.dtype()) return false;
  if (!norm_w.is_contiguous() || !is_aligned(norm_w.data_ptr(), 16)) return false;
  args = make_args(x, w, out, x.size(1), 1.0f);
  args.norm_w = norm_w.data_ptr();
  args.norm_f32 = norm_w.dtype() == DType::kF32;
  args.eps = eps;
  return true;
}

}  // namespace

bool gemv_rms_norm(const Tensor& x, const Tensor& norm_w, float eps, const Tensor& w, Tensor& out) {
  GemvArgs args;
  if (!norm_args(x, norm_w, eps, w, out, args)) return false;
  DeviceGuard guard(out.device().index);
  dispatch_fused<GemvIn::kRmsNorm, GemvOut::kStore>(x.dtype(), args);
  return true;
}

bool gemv_rms_norm_silu(const Tensor& x, const Tensor& norm_w, float eps, const Tensor& w,
                        Tensor& act) {
  GemvArgs args;
  if (w.size(0) != 2 * act.size(1) || !norm_args(x, norm_w, eps, w, act, args)) return false;
  DeviceGuard guard(act.device().index);
  args.n = act.size(1);  // gate / up pairs
  dispatch_fused<GemvIn::kRmsNorm, GemvOut::kSiluMul>(x.dtype(), args);
  return true;
}

bool gemv_rms_norm_rotary(const Tensor& x, const Tensor& norm_w, float eps, const Tensor& w,
                          const Tensor& positions, const Tensor& table, const Tensor& out_cache_loc,
                          Tensor& q_out, Tensor& k_cache, Tensor& v_cache) {
  const int64_t m = x.size(0), h = q_out.size(1), d = q_out.size(2), hkv = k_cache.size(1);
  // Full-width rotary only (a pair is dimension i and i + D/2 of one head).
  if (d % 2 != 0 || table.size(1) != d) return false;
  if (k_cache.dtype() != x.dtype() || w.size(0) != (h + 2 * hkv) * d) return false;
  Tensor q_flat = q_out.view({m, h * d});  // the epilogue writes q itself: out only for the checks
  GemvArgs args;
  if (!norm_args(x, norm_w, eps, w, q_flat, args)) return false;
  DeviceGuard guard(x.device().index);
  args.n = w.size(0) / 2;  // dimension pairs
  GemvRotary& r = args.rot;
  r.positions = static_cast<const int32_t*>(positions.data_ptr());
  r.table = static_cast<const float*>(table.data_ptr());
  r.max_positions = table.size(0);
  r.half = static_cast<int>(d / 2);
  r.n_heads = static_cast<int>(h);
  r.n_kv_heads = static_cast<int>(hkv);
  r.loc = static_cast<const int32_t*>(out_cache_loc.data_ptr());
  r.n_slots = k_cache.size(0);
  r.q_out = q_out.data_ptr();
  r.k_cache = k_cache.data_ptr();
  r.v_cache = v_cache.data_ptr();
  dispatch_fused<GemvIn::kRmsNorm, GemvOut::kRotary>(x.dtype(), args);
  return true;
}

bool gemv_add(const Tensor& a, const Tensor& w, Tensor& residual) {
  if (!gemv_operands_ok(a, a.size(1), w, residual) || residual.dtype() != a.dtype()) return false;
  DeviceGuard guard(residual.device().index);
  dispatch_fused<GemvIn::kPlain, GemvOut::kAdd>(a.dtype(),
                                                make_args(a, w, residual, a.size(1), 1.0f));
  return true;
}

bool gemv_silu_mul_add(const Tensor& h, const Tensor& w, Tensor& residual) {
  const int64_t k = h.size(1) / 2;
  if (h.size(1) % 2 != 0 || !gemv_operands_ok(h, k, w, residual) || residual.dtype() != h.dtype())
    return false;
  if (h.size(0) * k * static_cast<int64_t>(h.element_size()) > kStageMaxBytes) return false;
  DeviceGuard guard(residual.device().index);
  dispatch_fused<GemvIn::kSiluMul, GemvOut::kAdd>(h.dtype(), make_args(h, w, residual, k, 1.0f));
  return true;
}

}  // namespace vela::ops::cuda
