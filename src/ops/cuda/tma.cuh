// Hopper tensor memory access (TMA, sm_90) for the kernels of the vela_sm90a object library and
// `vela bench stream`'s shared-memory weight streams (bench_stream.cu, under __CUDA_ARCH__ >= 900):
// the host-side encoding of a 2-D tensor map (cuTensorMapEncodeTiled, reached through the runtime's
// driver entry point, so nothing links libcuda), and on the device the mbarrier a stage's copies
// complete on, the 2-D tile copy and the plain bulk copy global -> shared.
//
// A map describes a row-major [rows, cols] matrix of 16-bit elements (row stride `ld` elements, a
// multiple of 8; base 16-byte aligned) read in boxes of box_rows x 64 elements (one 128-byte row
// each) into the 128-byte swizzled layout the wgmma descriptors of wgmma.cuh read (row r's 16-byte
// chunk c at chunk c ^ (r % 8); destinations 1024-byte aligned). Elements past the matrix's edges
// arrive as zeros and still count toward the barrier's transaction bytes.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>

#include "core/dtype.h"
#include "core/log.h"

namespace vela::ops::cuda::tma {

// Host: fills `map` for a [rows, cols] matrix at `base` (bf16 / f16, row stride ld elements) read
// in [box_rows, 64] boxes. False when the driver has no TMA or rejects the operands (callers then
// take another kernel).
inline bool encode_2d(CUtensorMap* map, const void* base, DType dt, int64_t rows, int64_t cols,
                      int64_t ld, int box_rows) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
    const cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                             cudaEnableDefault, &found);
#else
    const cudaError_t err =
        cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn, cudaEnableDefault, &found);
#endif
    if (err == cudaSuccess && found == cudaDriverEntryPointSuccess) {
      encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    } else {
      if (err != cudaSuccess) (void)cudaGetLastError();  // this query's error only
      VELA_LOG_WARN("[gemm] the driver has no cuTensorMapEncodeTiled: the TMA kernels are off");
    }
  });
  if (encode == nullptr || (dt != DType::kBF16 && dt != DType::kF16)) return false;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * 2};  // bytes, of dimension 1
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode(
      map, dt == DType::kBF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
      2, const_cast<void*>(base), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// An mbarrier whose phases complete after `count` arrivals (and the announced copies).
__device__ __forceinline__ void barrier_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
}
// Makes the initialised barriers visible to the async proxy (the copies that complete on them).
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// The issuing thread's arrival, announcing `bytes` of copies that complete this phase.
__device__ __forceinline__ void arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}
// One plain arrival on `bar`.
__device__ __forceinline__ void arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
// Waits until the phase with parity `parity` of `bar` has completed.
__device__ __forceinline__ void wait(uint64_t* bar, uint32_t parity) {
  const uint32_t addr = smem_addr(bar);
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  } while (!done);
}
// The [box_rows, 64] box at element (row, col) of the map's matrix into shared `dst`, completing on
// `bar`. `map` is the address of a __grid_constant__ kernel parameter.
__device__ __forceinline__ void load_2d(void* dst, const CUtensorMap* map, int col, int row,
                                        uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(col), "r"(row), "r"(smem_addr(bar))
      : "memory");
}
// L2 policy for data read once (the decode GEMV's weights): first to leave.
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}
// `bytes` (a multiple of 16) from global `src` to shared `dst`, both 16-byte aligned, completing
// on `bar`, under the L2 `policy` (a plain bulk copy: no tensor map).
__device__ __forceinline__ void load_1d(void* dst, const void* src, uint32_t bytes, uint64_t* bar,
                                        uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1], %2, [%3], %4;\n" ::"r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
}
// Brings a map's descriptor into the cache before its first copy.
__device__ __forceinline__ void prefetch_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

}  // namespace vela::ops::cuda::tma
