// Shared pieces of the CUDA tests: the CudaTest fixture (every CUDA test derives from it and is
// skipped cleanly when no device is usable), seeded random CPU tensors, closeness checks of
// tensors on any device (ops/op_test_util.h's read-back and check, which print the worst element),
// the wgmma prefill kernel's override, and the graph timing of the opt-in benchmarks.
// The CPU twin is the reference.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/cuda/cuda_api.h"
#include "core/tensor.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/op_test_util.h"

namespace vela::test {

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::available()) GTEST_SKIP() << "no usable CUDA device";
  }
  static Device gpu() { return Device::cuda(0); }
};

// Sets the wgmma prefill kernel's override for a scope (no-op without that kernel).
class PrefillWgmmaOverride {
 public:
  explicit PrefillWgmmaOverride(int on) {
#ifdef VELA_HAS_SM90A
    ops::cuda::prefill_wgmma_set_enabled(on);
#else
    (void)on;
#endif
  }
  ~PrefillWgmmaOverride() {
#ifdef VELA_HAS_SM90A
    ops::cuda::prefill_wgmma_set_enabled(-1);
#endif
  }
  PrefillWgmmaOverride(const PrefillWgmmaOverride&) = delete;
  PrefillWgmmaOverride& operator=(const PrefillWgmmaOverride&) = delete;
};

// Whether the wgmma prefill kernel can run 128-row tiles of these operands on this GPU (whatever
// VELA_WGMMA_PREFILL says).
inline bool wgmma_prefill_available(DType dt, int64_t d) {
#ifdef VELA_HAS_SM90A
  PrefillWgmmaOverride on(1);
  return ops::cuda::prefill_wgmma_takes(dt, d);
#else
  (void)dt;
  (void)d;
  return false;
#endif
}

// Elementwise tolerance for "same fp32 math, one rounding to dt" comparisons.
struct Tol {
  double atol;
  double rtol;
};
inline Tol tol_for(DType dt) {
  switch (dt) {
    case DType::kBF16:
      return {1e-2, 1.6e-2};  // 2 ulp of bf16
    case DType::kF16:
      return {2e-3, 2e-3};
    default:
      return {2e-5, 2e-5};
  }
}

inline void set_value(Tensor& t, int64_t i, double v) {
  switch (t.dtype()) {
    case DType::kF32:
      static_cast<float*>(t.data_ptr())[i] = static_cast<float>(v);
      break;
    case DType::kBF16:
      static_cast<bf16*>(t.data_ptr())[i] = bf16(static_cast<float>(v));
      break;
    case DType::kF16:
      static_cast<f16*>(t.data_ptr())[i] = f16(static_cast<float>(v));
      break;
    case DType::kI32:
      static_cast<int32_t*>(t.data_ptr())[i] = static_cast<int32_t>(v);
      break;
    case DType::kI64:
      static_cast<int64_t*>(t.data_ptr())[i] = static_cast<int64_t>(v);
      break;
    case DType::kU8:
      static_cast<uint8_t*>(t.data_ptr())[i] = static_cast<uint8_t>(v);
      break;
  }
}

// A contiguous CPU tensor, values uniform in [lo, hi) rounded to dt.
inline Tensor random_cpu(const Shape& shape, DType dt, uint64_t seed, double lo = -1.0,
                         double hi = 1.0) {
  Tensor t = Tensor::empty(shape, dt);
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) set_value(t, i, dist(gen));
  return t;
}

// A contiguous CPU tensor of integers uniform in [lo, hi).
inline Tensor random_ints(const Shape& shape, DType dt, uint64_t seed, int64_t lo, int64_t hi) {
  Tensor t = Tensor::empty(shape, dt);
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int64_t> dist(lo, hi - 1);
  for (int64_t i = 0; i < t.numel(); ++i) set_value(t, i, static_cast<double>(dist(gen)));
  return t;
}

// |got - want| <= atol + rtol * |want| elementwise; NaN must match NaN, inf must match exactly.
inline void expect_close(const Tensor& got, const Tensor& want, Tol tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  expect_close(to_doubles(got), to_doubles(want), tol.atol, tol.rtol, what);
}

// Bitwise-equal values (as doubles; NaN matches NaN).
inline void expect_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  expect_close(got, want, {0.0, 0.0}, what);
}

inline std::string label(DType dt, const Shape& shape) {
  return std::string(dtype_name(dt)) + shape.str();
}

// Microseconds per call of call(0 .. per_graph - 1), captured in one CUDA graph on `stream` (the
// caller's stream guard; kernels launched with programmatic dependent launch get programmatic
// edges, as in the engine's graphs) and timed over `replays` replays after one untimed replay;
// -1 when the capture fails.
template <typename Call>
double graph_us(cudaStream_t stream, int per_graph, int replays, Call&& call) {
  cudaGraph_t graph;
  cudaGraphExec_t exec = nullptr;
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return -1.0;
  for (int i = 0; i < per_graph; ++i) call(i);
  if (cudaStreamEndCapture(stream, &graph) != cudaSuccess) return -1.0;
  const bool ok = cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
  cudaGraphDestroy(graph);
  if (!ok) return -1.0;
  cudaGraphLaunch(exec, stream);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0, stream);
  for (int r = 0; r < replays; ++r) cudaGraphLaunch(exec, stream);
  cudaEventRecord(e1, stream);
  cudaEventSynchronize(e1);
  float ms = 0.0f;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(exec);
  return 1e3 * ms / (static_cast<double>(replays) * per_graph);
}

}  // namespace vela::test
