// Core runtime kernels: the strided gather behind Tensor copies, and device-side Philox fill.
// 64-bit indexing throughout; grid-stride loops sized for the device's SM count.
#include <algorithm>

#include "core/cuda/device_kernels.h"
#include "core/cuda/stream.h"
#include "core/rng.h"
#include "core/shape.h"

namespace vela::cuda {

namespace {

struct GatherDims {
  int rank;
  int64_t shape[Shape::kMaxDims];
  int64_t strides[Shape::kMaxDims];
};

}  // namespace

template <typename T>
static __global__ void strided_gather_kernel(T* __restrict__ dst, const T* __restrict__ src,
                                             GatherDims dims, int64_t n) {
  int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t rest = i;
    int64_t offset = 0;
    for (int d = dims.rank - 1; d >= 0; --d) {
      int64_t extent = dims.shape[d];
      int64_t idx = rest % extent;
      rest /= extent;
      offset += idx * dims.strides[d];
    }
    dst[i] = src[offset];
  }
}

static __global__ void philox_fill_kernel(uint32_t* __restrict__ dst, uint64_t seed,
                                          uint64_t stream, uint64_t first, int64_t n) {
  int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    dst[i] = philox_u32(seed, stream, first + static_cast<uint64_t>(i));
}

namespace {

int grid_for(int64_t n, int threads) {
  int64_t blocks = (n + threads - 1) / threads;
  int64_t cap = static_cast<int64_t>(device_properties().multiProcessorCount) * 8;
  return static_cast<int>(std::max<int64_t>(1, std::min(blocks, cap)));
}

template <typename T>
void gather_as(void* dst, const void* src, const GatherDims& dims, int64_t n) {
  constexpr int kThreads = 256;
  strided_gather_kernel<T><<<grid_for(n, kThreads), kThreads, 0, current_stream()>>>(
      static_cast<T*>(dst), static_cast<const T*>(src), dims, n);
  VELA_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_strided_gather(void* dst, const void* src, size_t elem_bytes, int rank,
                           const int64_t* shape, const int64_t* src_strides) {
  VELA_CHECK(rank >= 0 && rank <= Shape::kMaxDims, "strided copy of rank ", rank);
  // Drop extent-1 dims and merge dims that are contiguous with respect to each other.
  GatherDims dims{};
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) {
    n *= shape[d];
    if (shape[d] == 1) continue;
    if (dims.rank > 0 && dims.strides[dims.rank - 1] == src_strides[d] * shape[d]) {
      dims.shape[dims.rank - 1] *= shape[d];
      dims.strides[dims.rank - 1] = src_strides[d];
    } else {
      dims.shape[dims.rank] = shape[d];
      dims.strides[dims.rank] = src_strides[d];
      ++dims.rank;
    }
  }
  if (n == 0) return;
  switch (elem_bytes) {
    case 1:
      gather_as<uint8_t>(dst, src, dims, n);
      break;
    case 2:
      gather_as<uint16_t>(dst, src, dims, n);
      break;
    case 4:
      gather_as<uint32_t>(dst, src, dims, n);
      break;
    case 8:
      gather_as<uint64_t>(dst, src, dims, n);
      break;
    default:
      VELA_THROW(Unsupported, "strided copy of ", elem_bytes, "-byte elements");
  }
}

void philox_fill(uint32_t* dst, uint64_t seed, uint64_t stream, uint64_t first, int64_t n) {
  if (n <= 0) return;
  constexpr int kThreads = 256;
  philox_fill_kernel<<<grid_for(n, kThreads), kThreads, 0, current_stream()>>>(dst, seed, stream,
                                                                               first, n);
  VELA_CUDA_CHECK_LAUNCH();
}

}  // namespace vela::cuda
