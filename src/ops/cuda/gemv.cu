// The decode GEMV entry points of ops::gemm (gemv_small_m) and the benchmark split override; the
// kernel is in gemv_kernel.cuh, the fused forms in gemv_fused.cu.
#include "ops/cuda/gemv_kernel.cuh"

namespace vela::ops::cuda {

namespace gemv_detail {
std::atomic<int> g_force_parts{0}, g_force_cols{0};
}  // namespace gemv_detail

using namespace gemv_detail;

void gemv_set_split(int parts, int cols) {
  VELA_CHECK(parts == 0 || parts == 1 || parts == 2 || parts == 4 || parts == 8,
             "gemv_set_split: parts must be 0 (heuristic), 1, 2, 4 or 8, got ", parts);
  VELA_CHECK(cols == 0 || cols == 1 || cols == 2,
             "gemv_set_split: cols must be 0 (heuristic), 1 or 2, got ", cols);
  g_force_parts = parts;
  g_force_cols = cols;
}

bool gemv_small_m(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b,
                  float alpha, float beta) {
  if (trans_a || !trans_b || beta != 0.0f || a.dim() != 2) return false;
  if (!gemv_operands_ok(a, a.size(1), b, c)) return false;
  const DType dt = a.dtype();
  if (c.dtype() != dt && c.dtype() != DType::kF32) return false;
  DeviceGuard guard(c.device().index);
  const GemvArgs args = make_args(a, b, c, a.size(1), alpha);
  constexpr GemvIn P = GemvIn::kPlain;
  constexpr GemvOut S = GemvOut::kStore;
  if (dt == DType::kBF16) {
    if (c.dtype() == DType::kF32)
      dispatch_m<bf16, float, P, S>(args);
    else
      dispatch_m<bf16, bf16, P, S>(args);
  } else {
    if (c.dtype() == DType::kF32)
      dispatch_m<f16, float, P, S>(args);
    else
      dispatch_m<f16, f16, P, S>(args);
  }
  return true;
}

}  // namespace vela::ops::cuda
