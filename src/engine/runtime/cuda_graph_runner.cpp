// CudaGraphRunner implementation (CUDA runtime graph API; stubs that refuse in CPU-only builds).
#include "engine/runtime/cuda_graph_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"
#ifdef VELA_HAS_CUDA
#include <cuda_runtime.h>

#include "core/cuda/stream.h"
#include "ops/cuda/gemm_cublaslt.h"
#endif

namespace vela {

std::vector<int32_t> CudaGraphRunner::buckets(int32_t max_seqs) {
  std::vector<int32_t> out;
  for (int32_t b = 1; b < max_seqs;) {
    out.push_back(b);
    b = b < 8 ? b * 2 : (b < 64 ? b + 8 : b + 16);
  }
  out.push_back(max_seqs);
  return out;
}

std::optional<CudaGraphRunner::Key> CudaGraphRunner::nearest(Key key) const {
  std::optional<Key> best;
  double best_d = 0;
  for (auto it = graphs_.lower_bound({key.first, 0});
       it != graphs_.end() && it->first.first == key.first; ++it) {
    const double d = std::abs(std::log2(static_cast<double>(it->first.second) /
                                        static_cast<double>(std::max(key.second, 1))));
    if (!best || d <= best_d) {  // ascending split counts: a tie keeps the larger
      best = it->first;
      best_d = d;
    }
  }
  return best;
}

#ifdef VELA_HAS_CUDA

CudaGraphRunner::CudaGraphRunner(Device device) : device_(device) {
  VELA_CHECK(device.is_cuda(), "CudaGraphRunner needs a CUDA device, got ", device.str());
  cuda::DeviceGuard guard(device.index);
  cudaStream_t s = nullptr;
  VELA_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stream_ = s;
}

CudaGraphRunner::~CudaGraphRunner() {
  clear();
  if (stream_ == nullptr) return;
  // The stream's GEMM workspace goes with it (no graph holds its address any more).
  cuda::DeviceGuard guard(device_.index);
  cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  try {
    ops::cuda::gemm_release_stream(static_cast<cudaStream_t>(stream_), device_.index);
  } catch (...) {  // a destructor: the workspace then stays cached
  }
  cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

void CudaGraphRunner::enter_thread() const {
  cuda::DeviceGuard guard(device_.index);
  VELA_CUDA_CHECK(cudaSetDevice(device_.index));
  cuda::set_current_stream(static_cast<cudaStream_t>(stream_));
}

CudaGraphRunner::Scope::Scope(const CudaGraphRunner& runner)
    : previous_(cuda::current_stream()) {
  cuda::set_current_stream(static_cast<cudaStream_t>(runner.stream_));
}
CudaGraphRunner::Scope::~Scope() { cuda::set_current_stream(static_cast<cudaStream_t>(previous_)); }

Tensor CudaGraphRunner::capture(Key key, const std::function<Tensor()>& forward) {
  auto t0 = std::chrono::steady_clock::now();
  cudaStream_t s = static_cast<cudaStream_t>(stream_);
  cuda::StreamGuard sg(s);
  VELA_CUDA_CHECK(cudaStreamSynchronize(s));
  cudaGraph_t graph = nullptr;
  VELA_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  Tensor out;
  try {
    out = forward();
  } catch (...) {
    cudaStreamEndCapture(s, &graph);
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  VELA_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec = nullptr;
  cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  VELA_CUDA_CHECK(err);
  graphs_[key] = Graph{exec, out};
  capture_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

Tensor CudaGraphRunner::replay(Key key) const {
  auto it = graphs_.find(key);
  VELA_ASSERT(it != graphs_.end(), "no CUDA graph for bucket ", key.first, " splits ", key.second);
  VELA_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(it->second.exec),
                                  static_cast<cudaStream_t>(stream_)));
  return it->second.output;
}

void CudaGraphRunner::clear() {
  for (auto& [key, g] : graphs_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(g.exec));
  graphs_.clear();
}

#else  // CPU-only build

CudaGraphRunner::CudaGraphRunner(Device device) : device_(device) {
  VELA_THROW(Unsupported, "CUDA graphs need a CUDA build of vela");
}
CudaGraphRunner::~CudaGraphRunner() = default;
void CudaGraphRunner::enter_thread() const {}
CudaGraphRunner::Scope::Scope(const CudaGraphRunner&) {}
CudaGraphRunner::Scope::~Scope() = default;
Tensor CudaGraphRunner::capture(Key, const std::function<Tensor()>&) {
  VELA_THROW(Unsupported, "CUDA graphs need a CUDA build of vela");
}
Tensor CudaGraphRunner::replay(Key) const {
  VELA_THROW(Unsupported, "CUDA graphs need a CUDA build of vela");
}
void CudaGraphRunner::clear() {}

#endif

}  // namespace vela
