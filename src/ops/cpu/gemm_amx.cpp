// AMX bf16 GEMM (gemm_amx.h). Tiles: C0, C1 accumulators (16 columns of the output x the rows of
// one row block, f32), W0, W1 (16 weight rows x 32 K), A (16 K pairs x the block's rows): two
// column blocks share each load of the packed rows; for every pair of column blocks the row blocks
// run in turn, so the pair's weights (32 x K bf16) stay in L1/L2 while all rows pass over them. Built only where the compiler targets AMX-BF16 (VELA_NATIVE
// on such a CPU); elsewhere available() is false.
#include "ops/cpu/gemm_amx.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "core/env.h"
#include "core/error.h"

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__linux__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define VELA_AMX_BUILD 1
#endif

namespace vela::ops::cpu::amx {

#if defined(VELA_AMX_BUILD)
namespace {

constexpr int kArchGetXcompPerm = 0x1022, kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;

bool request_tile_state() {
  if (!env_enabled("VELA_AMX")) return false;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  __asm__ volatile("cpuid" : "=a"(eax), "=b"(ebx), "=c"(ecx), "=d"(edx) : "a"(7), "c"(0));
  const bool amx_bf16 = (edx >> 22) & 1u, amx_tile = (edx >> 24) & 1u;
  if (!amx_bf16 || !amx_tile) return false;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
  unsigned long perm = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &perm) != 0) return false;
  return (perm >> kXfeatureXtiledata) & 1ul;
}

// LDTILECFG's 64-byte operand (palette 1).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes per row of each tile
  uint8_t rows[16] = {};
};

// Tile numbers (the intrinsics take literals): 0, 1 = C0, C1; 2, 3 = W0, W1; 4 = A.
enum Tile { kC0 = 0, kC1 = 1, kW0 = 2, kW1 = 3, kA = 4 };

}  // namespace

bool available() {
  static const bool ok = request_tile_state();
  return ok;
}

int64_t packed_size(int64_t m, int64_t k) {
  return (m <= kTileM ? m : (m + kTileM - 1) / kTileM * kTileM) * k;
}

void pack_rows(const bf16* a, int64_t m, int64_t k, bf16* out) {
  const int64_t br = std::min(m, kTileM);
  for (int64_t r0 = 0; r0 < m; r0 += br) {
    const int64_t valid = std::min(br, m - r0);
    bf16* blk = out + r0 * k;
    for (int64_t kc = 0; kc < k / kTileK; ++kc)
      for (int64_t kp = 0; kp < kTileK / 2; ++kp)
        for (int64_t r = 0; r < br; ++r) {
          bf16* dst = blk + ((kc * (kTileK / 2) + kp) * br + r) * 2;
          if (r < valid) {
            const bf16* src = a + (r0 + r) * k + kc * kTileK + 2 * kp;
            dst[0] = src[0];
            dst[1] = src[1];
          } else {
            dst[0] = dst[1] = bf16{};
          }
        }
  }
}

void gemm_rows_wt(const bf16* a_packed, int64_t m, int64_t k, const bf16* w, int64_t ldw,
                  int64_t n, float* out, int64_t ldo) {
  const int64_t br = std::min(m, kTileM);  // rows per block (all blocks padded to it)
  TileConfig cfg;
  const auto row_bytes = static_cast<uint16_t>(br * 4);
  for (int t : {kC0, kC1}) {
    cfg.colsb[t] = row_bytes;
    cfg.rows[t] = kTileN;
  }
  for (int t : {kW0, kW1}) {
    cfg.colsb[t] = kTileK * 2;
    cfg.rows[t] = kTileN;
  }
  cfg.colsb[kA] = row_bytes;
  cfg.rows[kA] = kTileK / 2;
  _tile_loadconfig(&cfg);
  alignas(64) float buf[kTileN * 16];
  const int64_t n_steps = k / kTileK, a_step = kTileK * br;  // packed elements per K step
  const int64_t w_stride = ldw * static_cast<int64_t>(sizeof(bf16));
  // Rows [r0, r0 + valid) of the block at `blk` into output columns j0.. (the C^T tile in buf).
  auto store = [&](int64_t r0, int64_t valid, int64_t j0) {
    for (int64_t c = 0; c < kTileN; ++c)
      for (int64_t r = 0; r < valid; ++r) out[(r0 + r) * ldo + j0 + c] = buf[c * 16 + r];
  };
  int64_t j = 0;
  for (; j + 2 * kTileN <= n; j += 2 * kTileN) {
    const bf16* w0 = w + j * ldw;
    const bf16* w1 = w0 + kTileN * ldw;
    for (int64_t r0 = 0; r0 < m; r0 += br) {
      const bf16* blk = a_packed + r0 * k;
      _tile_zero(0);
      _tile_zero(1);
      for (int64_t s = 0; s < n_steps; ++s) {
        _tile_loadd(4, blk + s * a_step, row_bytes);
        _tile_loadd(2, w0 + s * kTileK, w_stride);
        _tile_loadd(3, w1 + s * kTileK, w_stride);
        _tile_dpbf16ps(0, 2, 4);
        _tile_dpbf16ps(1, 3, 4);
      }
      const int64_t valid = std::min(br, m - r0);
      _tile_stored(0, buf, 64);
      store(r0, valid, j);
      _tile_stored(1, buf, 64);
      store(r0, valid, j + kTileN);
    }
  }
  if (j < n) {  // one 16-column block left
    const bf16* w0 = w + j * ldw;
    for (int64_t r0 = 0; r0 < m; r0 += br) {
      const bf16* blk = a_packed + r0 * k;
      _tile_zero(0);
      for (int64_t s = 0; s < n_steps; ++s) {
        _tile_loadd(4, blk + s * a_step, row_bytes);
        _tile_loadd(2, w0 + s * kTileK, w_stride);
        _tile_dpbf16ps(0, 2, 4);
      }
      _tile_stored(0, buf, 64);
      store(r0, std::min(br, m - r0), j);
    }
  }
  _tile_release();
}

#else

bool available() { return false; }
int64_t packed_size(int64_t m, int64_t k) { return m * k; }
void pack_rows(const bf16*, int64_t, int64_t, bf16*) {
  VELA_THROW(InternalError, "AMX kernels are not built into this binary");
}
void gemm_rows_wt(const bf16*, int64_t, int64_t, const bf16*, int64_t, int64_t, float*, int64_t) {
  VELA_THROW(InternalError, "AMX kernels are not built into this binary");
}

#endif

}  // namespace vela::ops::cpu::amx
