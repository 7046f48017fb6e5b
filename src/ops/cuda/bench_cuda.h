// Kernel micro-benchmarks behind `vela bench ops` (CUDA builds only: include and call them under
// #if defined(VELA_HAS_CUDA)). Each runs on the current device and stream, fills its own inputs
// with random values, warms up, then times repeated runs with CUDA events (about 0.2 s of work)
// and returns the rate; its tensors are freed before it returns. Units: 1 TFLOP/s = 1e12 flop/s,
// 1 GB/s = 1e9 bytes/s. Throws vela::Error subclasses (OutOfMemory, CudaError) on failure.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace vela::ops::cuda {

// c[m, n] = a[m, k] @ b[k, n], all of `dtype` (fp32 accumulation); counts 2*m*n*k flops.
double bench_gemm_tflops(int m, int n, int k, DType dtype);
// rms_norm over x[rows, hidden] with w[hidden] of the same dtype; counts the bytes of x read,
// out written and w read once.
double bench_rms_norm_gbps(int64_t rows, int64_t hidden, DType dtype);
// cudaMemcpyAsync device to device of `bytes`; counts read + write (2 * bytes).
double bench_copy_gbps(size_t bytes);

}  // namespace vela::ops::cuda
