// grouped_gemm's prefill path (moe_cublas.h). Row-major out[m_e, n] = a[m_e, k] @ op(w[e]) is the
// column-major out^T[n, m_e] = op(w[e])^T @ a^T: w's storage is cuBLAS's A (transposed when
// trans_w), a's storage is cuBLAS's B. One cuBLAS handle per device; the pointer arrays live in a
// device buffer kept per device and grown on demand (no allocation once warm).
#include "ops/cuda/moe_cublas.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include "core/cuda/cuda_api.h"
#include "core/cuda/stream.h"
#include "core/env.h"
#include "ops/cuda/cublas_check.h"

namespace vela::ops::cuda {

namespace {

struct DeviceState {
  cublasHandle_t handle = nullptr;
  void** ptrs = nullptr;  // device [3 * capacity]
  int64_t capacity = 0;
  std::vector<int32_t> offsets;  // host copy
  std::vector<const void*> host_ptrs;
  std::mutex mu;
};

DeviceState& state(int device) {
  static std::mutex mu;
  static std::vector<std::unique_ptr<DeviceState>> states;
  std::lock_guard<std::mutex> lock(mu);
  if (static_cast<int>(states.size()) <= device) states.resize(static_cast<size_t>(device) + 1);
  auto& s = states[static_cast<size_t>(device)];
  if (!s) {
    s = std::make_unique<DeviceState>();
    VELA_CUBLAS_CHECK(cublasCreate(&s->handle));
  }
  return *s;
}

cudaDataType_t cuda_type(DType dt) {
  switch (dt) {
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

}  // namespace

int64_t moe_cublas_min_rows() {
  static const int64_t rows =
      env_int("VELA_MOE_CUBLAS_ROWS", 2048, 0, std::numeric_limits<int32_t>::max());
  return rows;
}

bool grouped_gemm_cublas(const Tensor& a, const Tensor& w, const Tensor& offsets, bool trans_w,
                         Tensor& out) {
  if ((a.dtype() != DType::kBF16 && a.dtype() != DType::kF16) || out.dtype() != a.dtype())
    return false;
  cudaStream_t stream = vela::cuda::current_stream();
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  VELA_CUDA_CHECK(cudaStreamIsCapturing(stream, &cap));
  if (cap != cudaStreamCaptureStatusNone) return false;
  const int n_exp = static_cast<int>(w.size(0));
  const int64_t k = a.size(1), n = out.size(1);
  DeviceState& st = state(a.device().index);
  std::lock_guard<std::mutex> lock(st.mu);
  st.offsets.resize(static_cast<size_t>(n_exp) + 1);
  VELA_CUDA_CHECK(cudaMemcpyAsync(st.offsets.data(), offsets.data<int32_t>(),
                                  st.offsets.size() * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                  stream));
  VELA_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<int> ms;
  st.host_ptrs.clear();
  std::vector<const void*> bs, cs;
  const size_t ea = a.element_size(), eo = out.element_size();
  for (int e = 0; e < n_exp; ++e) {
    const int lo = st.offsets[static_cast<size_t>(e)], hi = st.offsets[static_cast<size_t>(e) + 1];
    if (hi <= lo) continue;
    ms.push_back(hi - lo);
    st.host_ptrs.push_back(static_cast<const char*>(w.data_ptr()) +
                           static_cast<size_t>(e) * static_cast<size_t>(n * k) * ea);
    bs.push_back(static_cast<const char*>(a.data_ptr()) + static_cast<size_t>(lo * k) * ea);
    cs.push_back(static_cast<char*>(out.data_ptr()) + static_cast<size_t>(lo * n) * eo);
  }
  const int g = static_cast<int>(ms.size());
  if (g == 0) return true;
  if (st.capacity < g) {
    if (st.ptrs != nullptr) VELA_CUDA_CHECK(cudaFree(st.ptrs));
    st.capacity = std::max<int64_t>(g, 256);
    VELA_CUDA_CHECK(cudaMalloc(&st.ptrs, static_cast<size_t>(3 * st.capacity) * sizeof(void*)));
  }
  st.host_ptrs.insert(st.host_ptrs.end(), bs.begin(), bs.end());
  st.host_ptrs.insert(st.host_ptrs.end(), cs.begin(), cs.end());
  // Pageable source: the copy completes before the call returns, so host_ptrs may be reused.
  VELA_CUDA_CHECK(cudaMemcpyAsync(st.ptrs, st.host_ptrs.data(),
                                  static_cast<size_t>(3 * g) * sizeof(void*),
                                  cudaMemcpyHostToDevice, stream));
  VELA_CUDA_CHECK(cudaStreamSynchronize(stream));
  void** dA = st.ptrs;
  void** dB = st.ptrs + g;
  void** dC = st.ptrs + 2 * g;
  std::vector<cublasOperation_t> ta(static_cast<size_t>(g), trans_w ? CUBLAS_OP_T : CUBLAS_OP_N),
      tb(static_cast<size_t>(g), CUBLAS_OP_N);
  std::vector<int> mm(static_cast<size_t>(g), static_cast<int>(n)),
      kk(static_cast<size_t>(g), static_cast<int>(k)),
      lda(static_cast<size_t>(g), static_cast<int>(trans_w ? k : n)),
      ldb(static_cast<size_t>(g), static_cast<int>(k)), ldc(static_cast<size_t>(g), static_cast<int>(n)),
      sizes(static_cast<size_t>(g), 1);
  std::vector<float> alpha(static_cast<size_t>(g), 1.0f), beta(static_cast<size_t>(g), 0.0f);
  VELA_CUBLAS_CHECK(cublasSetStream(st.handle, stream));
  const cublasStatus_t status = cublasGemmGroupedBatchedEx(
      st.handle, ta.data(), tb.data(), mm.data(), ms.data(), kk.data(), alpha.data(),
      const_cast<const void* const*>(dA), cuda_type(w.dtype()), lda.data(),
      const_cast<const void* const*>(dB), cuda_type(a.dtype()), ldb.data(), beta.data(), dC,
      cuda_type(out.dtype()), ldc.data(), g, sizes.data(), CUBLAS_COMPUTE_32F);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return false;  // the tiled kernel handles it
  VELA_CUBLAS_CHECK(status);
  return true;
}

}  // namespace vela::ops::cuda
