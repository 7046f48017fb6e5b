// AMX bf16 tiles (Intel Advanced Matrix Extensions, Sapphire Rapids and later) for the small-M
// bf16 GEMM of decode, speculative verify and short prefill chunks: c = a @ w^T with the weight
// w [N, K] read straight from memory by tile loads (16 output columns x 32 K a tile) and the few
// rows of a packed once into the VNNI pair layout of the B tile. One TDPBF16PS does 16 x M x 32
// multiply-adds, so any M <= 16 costs about what M = 1 costs: the weight stream, not the math,
// bounds the step. Products of bf16 are exact in fp32 and each output sums its K pairs in order,
// so results depend only on the row and column (batch-invariant).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace vela::ops::cpu::amx {

// The CPU has AMX-BF16 and the kernel granted this process the tile state (Linux
// arch_prctl(ARCH_REQ_XCOMP_PERM)); asked once. VELA_AMX=0 turns the path off.
bool available();

constexpr int64_t kMaxRows = 16;  // rows of a per call (the tiles' 16 columns of C^T)
constexpr int64_t kTileK = 32;    // K per tile: k must be a multiple
constexpr int64_t kTileN = 16;    // output columns per tile: n must be a multiple

// Packs the dense bf16 a [m, k] (m <= kMaxRows, k % kTileK == 0) into the B-tile layout
// out[((kc * 16 + kp) * m + r) * 2 + e] = a[r][kc * 32 + 2 * kp + e] (m * k elements).
void pack_rows(const bf16* a, int64_t m, int64_t k, bf16* out);

// out[r * ldo + j] = sum_k a[r][k] * w[j * ldw + k] in fp32, for r < m and j < n (n % kTileN == 0),
// a packed by pack_rows. Call only when available().
void gemm_rows_wt(const bf16* a_packed, int64_t m, int64_t k, const bf16* w, int64_t ldw,
                  int64_t n, float* out, int64_t ldo);

}  // namespace vela::ops::cpu::amx
