// Small device kernels of the core runtime, callable from plain C++: the strided gather behind
// cuda::strided_copy, and philox_fill (device-side Philox, used to check it matches the host).
// Both launch on the current stream of the current device and do not synchronize.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vela::cuda {

// dst[i] = src element at the i-th logical (row-major) position of a strided view; rank <= 6,
// elem_bytes in {1, 2, 4, 8}. Dims are coalesced first, so a contiguous inner run is cheap.
void launch_strided_gather(void* dst, const void* src, size_t elem_bytes, int rank,
                           const int64_t* shape, const int64_t* src_strides);

// dst[i] = philox_u32(seed, stream, first + i) for i in [0, n); dst is device memory.
void philox_fill(uint32_t* dst, uint64_t seed, uint64_t stream, uint64_t first, int64_t n);

}  // namespace vela::cuda
