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
         (static_cast<uint64_t>((panel_bytes >> 4) & 0x3FFF) << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}
// A descriptor advanced by `bytes` (a multiple of 16) of its start address.
__device__ __forceinline__ uint64_t desc_add(uint64_t desc, uint32_t bytes) {
  return desc + (bytes >> 4);
}

__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wait_all() {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
// Shared-memory writes of this thread (cp.async, st.shared) become visible to the async proxy that
// wgmma reads through.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

#define VELA_WGMMA_M64N128K16_SS(TYPE)                                                             \
  asm volatile(                                                                                    \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                                 \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " {"                            \
      "%0, %1, %2, %3, %4, %5, %6, %7, "                                                           \
      "%8, %9, %10, %11, %12, %13, %14, %15, "                                                     \
      "%16, %17, %18, %19, %20, %21, %22, %23, "                                                   \
      "%24, %25, %26, %27, %28, %29, %30, %31, "                                                   \
      "%32, %33, %34, %35, %36, %37, %38, %39, "                                                   \
      "%40, %41, %42, %43, %44, %45, %46, %47, "                                                   \
      "%48, %49, %50, %51, %52, %53, %54, %55, "                                                   \
      "%56, %57, %58, %59, %60, %61, %62, %63"                                                     \
      "}, %64, %65, p, 1, 1, 0, 0;\n}\n"                                                           \
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]),                 \
        "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]),                 \
        "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]),                 \
        "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),                 \
        "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),                 \
        "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),                 \
        "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]),                 \
        "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]),                 \
        "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]),            \
        "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]),            \
        "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]),            \
        "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]),            \
        "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])                             \
      : "l"(desc_a), "l"(desc_b), "r"(accumulate))

#define VELA_WGMMA_M64N64K16_SS(TYPE)                                                              \
  asm volatile(                                                                                    \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                                 \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " {"                             \
      "%0, %1, %2, %3, %4, %5, %6, %7, "                                                           \
      "%8, %9, %10, %11, %12, %13, %14, %15, "                                                     \
      "%16, %17, %18, %19, %20, %21, %22, %23, "                                                   \
      "%24, %25, %26, %27, %28, %29, %30, %31"                                                     \
      "}, %32, %33, p, 1, 1, 0, 0;\n}\n"                                                           \
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]),                 \
        "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]),                 \
        "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]),                 \
        "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),                 \
        "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),                 \
        "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),                 \
        "+f"(d[7][2]), "+f"(d[7][3])                                                               \
      : "l"(desc_a), "l"(desc_b), "r"(accumulate))

#define VELA_WGMMA_M64N64K16_RS_TB(TYPE)                                                           \
  asm volatile(                                                                                    \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                                 \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " {"                             \
      "%0, %1, %2, %3, %4, %5, %6, %7, "                                                           \
      "%8, %9, %10, %11, %12, %13, %14, %15, "                                                     \
      "%16, %17, %18, %19, %20, %21, %22, %23, "                                                   \
      "%24, %25, %26, %27, %28, %29, %30, %31"                                                     \
      "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"                                             \
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]),                 \
        "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]),                 \
        "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]),                 \
        "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),                 \
        "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),                 \
        "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),                 \
        "+f"(d[7][2]), "+f"(d[7][3])                                                               \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate))

#define VELA_WGMMA_M64N128K16_RS_TB(TYPE)                                                          \
  asm volatile(                                                                                    \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                                 \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " {"                            \
      "%0, %1, %2, %3, %4, %5, %6, %7, "                                                           \
      "%8, %9, %10, %11, %12, %13, %14, %15, "                                                     \
      "%16, %17, %18, %19, %20, %21, %22, %23, "                                                   \
      "%24, %25, %26, %27, %28, %29, %30, %31, "                                                   \
      "%32, %33, %34, %35, %36, %37, %38, %39, "                                                   \
      "%40, %41, %42, %43, %44, %45, %46, %47, "                                                   \
      "%48, %49, %50, %51, %52, %53, %54, %55, "                                                   \
      "%56, %57, %58, %59, %60, %61, %62, %63"                                                     \
      "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"                                             \
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]),                 \
        "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]),                 \
        "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]),                 \
        "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),                 \
        "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]),                 \
        "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),                 \
        "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]),                 \
        "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]),                 \
        "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]),            \
        "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]),            \
        "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]),            \
        "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]),            \
        "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])                             \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate))

// d[64 x N] (+)= a[64 x 16] @ b[N x 16]^T, a and b K-major in shared memory (descriptors);
// accumulate 0 overwrites d.
template <typename T, int N>
__device__ __forceinline__ void mma_ss(float (&d)[N / 8][4], uint64_t desc_a, uint64_t desc_b,
                                       int accumulate) {
  static_assert(N == 64 || N == 128, "m64n64k16 / m64n128k16");
  constexpr bool kBf16 = std::is_same_v<T, bf16>;
  if constexpr (N == 64) {
    if constexpr (kBf16) {
      VELA_WGMMA_M64N64K16_SS("bf16");
    } else {
      VELA_WGMMA_M64N64K16_SS("f16");
    }
  } else {
    if constexpr (kBf16) {
      VELA_WGMMA_M64N128K16_SS("bf16");
    } else {
      VELA_WGMMA_M64N128K16_SS("f16");
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
      VELA_WGMMA_M64N64K16_RS_TB("bf16");
    } else {
      VELA_WGMMA_M64N64K16_RS_TB("f16");
    }
  } else {
    if constexpr (kBf16) {
      VELA_WGMMA_M64N128K16_RS_TB("bf16");
    } else {
      VELA_WGMMA_M64N128K16_RS_TB("f16");
    }
  }
}

#undef VELA_WGMMA_M64N128K16_SS
#undef VELA_WGMMA_M64N64K16_SS
#undef VELA_WGMMA_M64N64K16_RS_TB
#undef VELA_WGMMA_M64N128K16_RS_TB

}  // namespace vela::ops::cuda::wgmma
