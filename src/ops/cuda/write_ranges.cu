// CUDA write_ranges (ops/write_ranges.h): one block per range, its threads striding over the run.
// Device metadata is trusted: a range that does not fit the table or the values is skipped.
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace vela::ops::cuda {

static __global__ void write_ranges_kernel(const int32_t* __restrict__ ranges,
                                           const int32_t* __restrict__ values,
                                           int32_t* __restrict__ table, int64_t rows, int64_t cols,
                                           int64_t n_values) {
  const int32_t* rg = ranges + 4 * static_cast<int64_t>(blockIdx.x);
  const int64_t r = rg[0], c = rg[1], n = rg[2], off = rg[3];
  if (r < 0 || r >= rows || c < 0 || n < 0 || c + n > cols || off < 0 || off + n > n_values) return;
  int32_t* dst = table + r * cols + c;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) dst[j] = values[off + j];
}

void write_ranges(const Tensor& ranges, const Tensor& values, Tensor& table) {
  DeviceGuard guard(table.device().index);
  const int64_t n = ranges.size(0);
  VELA_CHECK(n <= 0x7fffffff, "write_ranges: ", n, " ranges is more than one launch takes");
  write_ranges_kernel<<<static_cast<unsigned>(n), 128, 0, current_stream()>>>(
      ranges.data<int32_t>(), values.data<int32_t>(), table.data<int32_t>(), table.size(0),
      table.size(1), values.size(0));
  VELA_CUDA_CHECK_LAUNCH();
}

}  // namespace vela::ops::cuda
