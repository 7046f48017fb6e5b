// The decode GEMV entry points of ops::gemm (gemv_small_m) and the benchmark split override; the
// kernel is in gemv_kernel.cuh (one row: gemv_ring.cuh), the fused forms in gemv_fused.cu.
#include <algorithm>

#include "core/env.h"
#include "ops/cuda/gemv_ring.cuh"

namespace vela::ops::cuda {

namespace gemv_detail {
std::atomic<int> g_force_parts{0}, g_force_cols{0}, g_max_grid{0};

bool gemv_persistent() {
  static const bool on = env_enabled("VELA_GEMV_PERSIST");
  return on;
}

std::atomic<int> g_ring_mode{-1};  // gemv_set_ring: -1 = VELA_GEMV_RING
std::atomic<int64_t> g_ring_launches{0};

// Opt-in (VELA_GEMV_RING=1): measured slower than the register kernel on an H100 (decode1k 1.425
// vs 1.146 ms, bench/results/gemv_ring_h100.txt).
// (Whether the device and the loaded code are sm_90 is launch_ring's ring_kernel_info.)
bool gemv_ring_enabled() {
  const int mode = g_ring_mode.load(std::memory_order_relaxed);
  if (mode >= 0) return mode == 1;
  static const bool on = env_opted_in("VELA_GEMV_RING");
  return on;
}

bool gemv_ring_early() {
  static const bool on = env_enabled("VELA_GEMV_RING_EARLY");
  return on;
}

bool gemv_ring_coalesce() {
  static const bool on = env_opted_in("VELA_GEMV_RING_COALESCE");
  return on;
}

bool gemv_ring_producer() {
  static const bool on = env_opted_in("VELA_GEMV_RING_PRODUCER");
  return on;
}

size_t gemv_ring_bytes() {
  static const size_t bytes =
      static_cast<size_t>(env_int("VELA_GEMV_RING_KB", kRingBytes / 1024, 16, 200)) * 1024;
  return bytes;
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

void gemv_set_ring(int mode) {
  VELA_CHECK(mode >= -1 && mode <= 1, "gemv_set_ring: mode must be -1, 0 or 1, got ", mode);
  g_ring_mode = mode;
}

int64_t gemv_ring_launches() { return g_ring_launches.load(std::memory_order_relaxed); }

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
