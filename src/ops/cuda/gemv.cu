// The decode GEMV entry points of ops::gemm (gemv_small_m) and the benchmark split override; the
// kernel is in gemv_kernel.cuh, the fused forms in gemv_fused.cu.
#include <algorithm>

#include "core/env.h"
#include "ops/cuda/gemv_kernel.cuh"

namespace vela::ops::cuda {

namespace gemv_detail {
std::atomic<int> g_force_parts{0}, g_force_cols{0}, g_max_grid{0};

bool gemv_persistent() {
  static const bool on = env_enabled("VELA_GEMV_PERSIST");
  return on;
}

// A split override from the environment: 1, 2, 4 or 8 warps per column (others round down).
static int parts_from_env(const char* name, int fallback) {
  const int v = static_cast<int>(env_int(name, fallback, 1, 8));
  return v >= 8 ? 8 : v >= 4 ? 4 : v >= 2 ? 2 : 1;
}

int gemv_norm_wide_parts() {
  static const int parts = parts_from_env("VELA_GEMV_NORM_WIDE_PARTS", 2);
  return parts;
}

int gemv_add_long_parts() {
  static const int parts = parts_from_env("VELA_GEMV_ADD_LONG_PARTS", 8);
  return parts;
}

}  // namespace gemv_detail

using namespace gemv_detail;

// The most rows ops::gemm sends to the GEMV instead of cuBLASLt (VELA_GEMV_MAX_ROWS, 0..8;
// default 2). The GEMV's FMAs grow with the rows while cuBLASLt's tensor-core kernels stay bound
// by the weight stream: bench-1b engine steps on the H200 at 1024 context, GEMV vs cuBLASLt for
// the plain GEMMs: 2 rows 1.456 vs 1.465 ms, 4 rows 2.04 vs 1.50, 8 rows 3.34 vs 1.55
// (bench/results/small_batch_h200.txt). The fused decode forms keep the GEMV (one row).
int gemv_max_rows() {
  static const int rows = static_cast<int>(env_int("VELA_GEMV_MAX_ROWS", 2, 0, 8));
  return rows;
}

void gemv_set_split(int parts, int cols) {
  VELA_CHECK(parts == 0 || parts == 1 || parts == 2 || parts == 4 || parts == 8,
             "gemv_set_split: parts must be 0 (heuristic), 1, 2, 4 or 8, got ", parts);
  VELA_CHECK(cols == 0 || cols == 1 || cols == 2,
             "gemv_set_split: cols must be 0 (heuristic), 1 or 2, got ", cols);
  g_force_parts = parts;
  g_force_cols = cols;
}

void gemv_set_max_grid(int blocks) {
  VELA_CHECK(blocks >= 0, "gemv_set_max_grid: blocks must be >= 0, got ", blocks);
  g_max_grid = blocks;
}

bool gemv_small_m(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b,
                  float alpha, float beta) {
  if (trans_a || !trans_b || beta != 0.0f || a.dim() != 2) return false;
  if (a.size(0) > gemv_max_rows()) return false;
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
