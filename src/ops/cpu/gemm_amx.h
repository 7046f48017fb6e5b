// AMX bf16 tiles (Intel Advanced Matrix Extensions, Sapphire Rapids and later) for the bf16 GEMM
// c = a @ w^T of inference (decode, speculative verify, prefill): the weight w [N, K] is read
// straight from memory by tile loads (16 output columns x 32 K a tile) and the rows of a, packed
// into the VNNI pair layout of the B tile in blocks of 16 rows, are the other operand. One
// TDPBF16PS does 16 x 16 x 32 multiply-adds, so a decode step of up to 16 rows costs what one row
// costs (the weight stream bounds it) and prefill runs far above fp32 FMA rates. Products of bf16
// are exact in fp32 and each output sums its K pairs in order, so results depend only on the row
// and column: batch-invariant, and the same for a row whether it is decoded or prefilled.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace vela::ops::cpu::amx {

// The CPU has AMX-BF16 and the kernel granted this process the tile state (Linux
// arch_prctl(ARCH_REQ_XCOMP_PERM)); asked once. VELA_AMX=0 turns the path off.
bool available();

constexpr int64_t kTileM = 16;  // rows of a per tile (the 16 columns of C^T)
constexpr int64_t kTileK = 32;  // K per tile: k must be a multiple
constexpr int64_t kTileN = 16;  // output columns per tile: n must be a multiple

// Elements pack_rows writes for m rows: m * k for m <= 16 (one block of exactly m rows), else
// blocks of 16 rows with the last one padded with zero rows.
int64_t packed_size(int64_t m, int64_t k);

// Packs the dense bf16 a [m, k] (k % kTileK == 0) into row blocks of the B-tile layout: block b
// (rows 16b..) holds out[b * br * k + ((kc * 16 + kp) * br + r) * 2 + e] = a[16b + r][kc * 32 +
// 2 * kp + e], br = the block's row count (m when m <= 16, else 16 with zero padding).
void pack_rows(const bf16* a, int64_t m, int64_t k, bf16* out);

// out[r * ldo + j] = sum_k a[r][k] * w[j * ldw + k] in fp32, for r < m and j < n (n % kTileN == 0),
// a packed by pack_rows. Call only when available().
void gemm_rows_wt(const bf16* a_packed, int64_t m, int64_t k, const bf16* w, int64_t ldw,
                  int64_t n, float* out, int64_t ldo);

}  // namespace vela::ops::cpu::amx
