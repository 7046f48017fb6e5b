// CUDA embedding backward, deterministic (no atomics). CPU twin: ops/cpu/embedding_backward.cpp.
#include <algorithm>
#include <vector>

#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_backward_ops.h"

namespace vela::ops::cuda {

// Deterministic embedding backward: the ids come to the host (one wait: this is the last op of a
// backward pass), a stable sort groups each distinct id's tokens in token order, and one block per
// distinct id adds its rows onto dweight[id] in that order. One writer per row and the CPU twin's
// order, so f32 results are bit-identical to the CPU and run to run; no atomics.
constexpr int kEmbThreads = 256;

template <typename T>
static __global__ void __launch_bounds__(kEmbThreads)
    embedding_backward_kernel(const int32_t* groups, int64_t n_groups, const T* dout,
                              int64_t d_stride, int64_t hidden, float* dweight) {
  // groups: [n_groups ids | n_groups + 1 offsets | token order]
  const int64_t g = blockIdx.x;
  const int32_t* offsets = groups + n_groups;
  const int32_t* order = offsets + n_groups + 1;
  float* dst = dweight + static_cast<int64_t>(groups[g]) * hidden;
  const int32_t k0 = offsets[g], k1 = offsets[g + 1];
  for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
    float acc = dst[c];
    for (int32_t k = k0; k < k1; ++k)
      acc += to_float(dout[static_cast<int64_t>(order[k]) * d_stride + c]);
    dst[c] = acc;
  }
}

void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dweight) {
  DeviceGuard guard(dweight.device().index);
  RowLayout dl = row_layout(dout);
  const int64_t n_tokens = ids.size(0), hidden = dweight.size(1);
  if (n_tokens == 0 || hidden == 0) return;
  const std::vector<int32_t> host_ids = ids.to_vector<int32_t>();
  std::vector<int32_t> order(static_cast<size_t>(n_tokens));
  for (int64_t t = 0; t < n_tokens; ++t) order[static_cast<size_t>(t)] = static_cast<int32_t>(t);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return host_ids[a] < host_ids[b]; });
  std::vector<int32_t> uniq, offsets;
  const int64_t vocab = dweight.size(0);
  for (int64_t k = 0; k < n_tokens; ++k) {
    const int32_t id = host_ids[static_cast<size_t>(order[static_cast<size_t>(k)])];
    VELA_CHECK(id >= 0 && id < vocab, "embedding_backward: id ", id, " is outside [0, ", vocab,
               ")");
    if (uniq.empty() || uniq.back() != id) {
      uniq.push_back(id);
      offsets.push_back(static_cast<int32_t>(k));
    }
  }
  offsets.push_back(static_cast<int32_t>(n_tokens));
  std::vector<int32_t> packed = uniq;
  packed.insert(packed.end(), offsets.begin(), offsets.end());
  packed.insert(packed.end(), order.begin(), order.end());
  Tensor groups = Tensor::from_vector(packed).to(dweight.device());
  const int64_t n_groups = static_cast<int64_t>(uniq.size());
  VELA_CHECK(n_groups <= (int64_t{1} << 31) - 1, "embedding_backward: too many distinct ids");
  dispatch_float(dout.dtype(), [&](auto tag) {
    using T = decltype(tag);
    embedding_backward_kernel<T>
        <<<static_cast<unsigned>(n_groups), kEmbThreads, 0, current_stream()>>>(
            groups.data<int32_t>(), n_groups, static_cast<const T*>(dout.data_ptr()), dl.row_stride,
            hidden, dweight.data<float>());
    VELA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace vela::ops::cuda
