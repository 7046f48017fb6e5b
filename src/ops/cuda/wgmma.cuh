// Hopper warpgroup MMA (wgmma, sm_90a only) for the kernels built in the vela_sm90a object library
// (gemm_wgmma.cu, attention_prefill_wgmma.cu): shared-memory matrix descriptors of the 128-byte
// swizzled layout, the fence / commit / wait instructions, and the m64nNk16 bf16/f16 MMAs with fp32
// accumulators the kernels use.
//
// Layout: a [rows][64] tile of 16-bit elements (one 128-byte row per row), 1024-byte aligned, with
// row r's 16-byte chunk c stored at chunk c ^ (r % 8) - smem_swizzle<64> of attention_common.cuh.
// Read K-major (the row is the K dimension: A = [M][K], B = [N][K]) it is the canonical 128B
// swizzle with 8-row groups 1024 bytes apart; read MN-major (the row is the N dimension: B =
// [K][N] with N contiguous, tnspB) it is the same bytes with K rows 128 bytes apart, 8-row groups
// 1024 bytes apart and 64-wide N panels lbo bytes apart. A k16 step is +32 bytes along a K-major
// row, +2048 bytes (16 rows) down an MN-major tile.
//
// Accumulators are float d[N / 8][4] in the mma.sync m16n8 C layout per warp of the warpgroup:
// d[nt][e] is row 16 * (warp % 4) + lane / 4 + 8 * (e / 2), column 8 * nt + 2 * (lane % 4) + e % 2.
// A from registers (RS forms) takes the m16n8k16 A fragment of those rows: {a0..a3} = rows
// (g, g + 8) x columns (2t, 2t + 8) as in mma_16816, so P = softmax(S) packs straight from S.
// Callers compile these only for sm_90a (their kernels' bodies are guarded by
// __CUDA_ARCH_FEAT_SM90_ALL).
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/dtype.h"

namespace vela::ops::cuda::wgmma {

// Descriptor of a K-major 128B-swizzled tile at `smem`: start address >> 4, leading byte offset
// unused (1), stride byte offset 1024 between 8-row groups, swizzle mode 1 (128 B).
__device__ __forceinline__ uint64_t desc_k_major(const void* smem) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (uint64_t{1} << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}
// Descriptor of an MN-major 128B-swizzled tile: N panels of 64 columns `panel_bytes` apart
// (leading byte offset), 8-row groups of K 1024 bytes apart (stride byte offset).
__device__ __forceinline__ uint64_t desc_mn_major(const void* smem, uint32_t panel_bytes) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) |
         (static_cast<uint64_t>((panel_bytes >> 4) & 0x3FFF) << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}
// A descriptor advanced by `bytes` (a multiple of 16) of its start address.
__device__ __forceinline__ uint64_t desc_add(uint64_t desc, uint32_t bytes) {
  return desc + (bytes >> 4);
}

__device__ __forceinline__ void fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most N committed groups of this warpgroup are pending (groups finish in order).
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void wait_all() { wait<0>(); }
// Shared-memory writes of this thread (cp.async, st.shared) become visible to the async proxy that
// wgmma reads through.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// The accumulator operands of an m64nNk16 wgmma: N / 8 rows of float d[][4], and their "%0, ..."
// register lists (32 for N = 64, 64 for N = 128).
#define VELA_WGMMA_ACC(i) "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])
#define VELA_WGMMA_ACC_N64                                                                       \
  VELA_WGMMA_ACC(0), VELA_WGMMA_ACC(1), VELA_WGMMA_ACC(2), VELA_WGMMA_ACC(3), VELA_WGMMA_ACC(4), \
      VELA_WGMMA_ACC(5), VELA_WGMMA_ACC(6), VELA_WGMMA_ACC(7)
#define VELA_WGMMA_ACC_N128                                                           \
  VELA_WGMMA_ACC_N64, VELA_WGMMA_ACC(8), VELA_WGMMA_ACC(9), VELA_WGMMA_ACC(10),       \
      VELA_WGMMA_ACC(11), VELA_WGMMA_ACC(12), VELA_WGMMA_ACC(13), VELA_WGMMA_ACC(14), \
      VELA_WGMMA_ACC(15)
#define VELA_WGMMA_REGS_N64                                              \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15" \
  ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define VELA_WGMMA_REGS_N128                                                         \
  VELA_WGMMA_REGS_N64                                                                \
  ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47" \
  ", %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"

// One wgmma: SHAPE "m64nNk16", accumulators ACC with register list REGS, then the operand text
// TAIL (A and B, scale-d predicate p from the operand numbered PRED, immediates) and its inputs.
#define VELA_WGMMA(SHAPE, TYPE, REGS, ACC, PRED, TAIL, ...)                                     \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" PRED                                        \
               ", 0;\n"                                                                         \
               "wgmma.mma_async.sync.aligned." SHAPE ".f32." TYPE "." TYPE " {" REGS "}, " TAIL \
               ";\n}\n"                                                                         \
               : ACC                                                                            \
               : __VA_ARGS__)

// d[64 x N] (+)= a[64 x 16] @ b[N x 16]^T, a and b K-major in shared memory (descriptors);
// accumulate 0 overwrites d.
template <typename T, int N>
__device__ __forceinline__ void mma_ss(float (&d)[N / 8][4], uint64_t desc_a, uint64_t desc_b,
                                       int accumulate) {
  static_assert(N == 64 || N == 128, "m64n64k16 / m64n128k16");
  constexpr bool kBf16 = std::is_same_v<T, bf16>;
  if constexpr (N == 64) {
    if constexpr (kBf16) {
      VELA_WGMMA("m64n64k16", "bf16", VELA_WGMMA_REGS_N64, VELA_WGMMA_ACC_N64, "34",
                 "%32, %33, p, 1, 1, 0, 0", "l"(desc_a), "l"(desc_b), "r"(accumulate));
    } else {
      VELA_WGMMA("m64n64k16", "f16", VELA_WGMMA_REGS_N64, VELA_WGMMA_ACC_N64, "34",
                 "%32, %33, p, 1, 1, 0, 0", "l"(desc_a), "l"(desc_b), "r"(accumulate));
    }
  } else {
    if constexpr (kBf16) {
      VELA_WGMMA("m64n128k16", "bf16", VELA_WGMMA_REGS_N128, VELA_WGMMA_ACC_N128, "66",
                 "%64, %65, p, 1, 1, 0, 0", "l"(desc_a), "l"(desc_b), "r"(accumulate));
    } else {
      VELA_WGMMA("m64n128k16", "f16", VELA_WGMMA_REGS_N128, VELA_WGMMA_ACC_N128, "66",
                 "%64, %65, p, 1, 1, 0, 0", "l"(desc_a), "l"(desc_b), "r"(accumulate));
    }
  }
}

// d[64 x N] += a[64 x 16] @ b[16 x N], a in registers (m16n8k16 A fragments), b MN-major in shared
// memory (tnspB: N contiguous).
template <typename T, int N>
__device__ __forceinline__ void mma_rs_mn(float (&d)[N / 8][4], const uint32_t (&a)[4],
                                          uint64_t desc_b) {
  static_assert(N == 64 || N == 128, "m64n64k16 / m64n128k16");
  constexpr int accumulate = 1;
  constexpr bool kBf16 = std::is_same_v<T, bf16>;
  if constexpr (N == 64) {
    if constexpr (kBf16) {
      VELA_WGMMA("m64n64k16", "bf16", VELA_WGMMA_REGS_N64, VELA_WGMMA_ACC_N64, "37",
                 "{%32, %33, %34, %35}, %36, p, 1, 1, 1", "r"(a[0]), "r"(a[1]), "r"(a[2]),
                 "r"(a[3]), "l"(desc_b), "r"(accumulate));
    } else {
      VELA_WGMMA("m64n64k16", "f16", VELA_WGMMA_REGS_N64, VELA_WGMMA_ACC_N64, "37",
                 "{%32, %33, %34, %35}, %36, p, 1, 1, 1", "r"(a[0]), "r"(a[1]), "r"(a[2]),
                 "r"(a[3]), "l"(desc_b), "r"(accumulate));
    }
  } else {
    if constexpr (kBf16) {
      VELA_WGMMA("m64n128k16", "bf16", VELA_WGMMA_REGS_N128, VELA_WGMMA_ACC_N128, "69",
                 "{%64, %65, %66, %67}, %68, p, 1, 1, 1", "r"(a[0]), "r"(a[1]), "r"(a[2]),
                 "r"(a[3]), "l"(desc_b), "r"(accumulate));
    } else {
      VELA_WGMMA("m64n128k16", "f16", VELA_WGMMA_REGS_N128, VELA_WGMMA_ACC_N128, "69",
                 "{%64, %65, %66, %67}, %68, p, 1, 1, 1", "r"(a[0]), "r"(a[1]), "r"(a[2]),
                 "r"(a[3]), "l"(desc_b), "r"(accumulate));
    }
  }
}

#undef VELA_WGMMA
#undef VELA_WGMMA_REGS_N128
#undef VELA_WGMMA_REGS_N64
#undef VELA_WGMMA_ACC_N128
#undef VELA_WGMMA_ACC_N64
#undef VELA_WGMMA_ACC

}  // namespace vela::ops::cuda::wgmma
