// The ragged paged prefill kernels' arguments (attention_prefill.cu builds them from the op's
// tensors), the tile a block works on, and the entry of the Hopper wgmma kernel
// (attention_prefill_wgmma.cu, sm_90a, built where VELA_HAS_SM90A is defined), which
// attention_prefill.cu tries first for 128-row tiles.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "ops/cuda/attention_common.cuh"

namespace vela::ops::cuda {

struct PrefillArgs : PagedAttnArgs {
  const int32_t* tile_seq_idx;
  const int32_t* tile_q_start;
  int32_t n_heads;
  int32_t n_kv_heads;
  int32_t group;
  int32_t head_dim;  // <= the kernel's tile width D
  float scale_log2;
  void* out;  // [n_tokens, n_heads, head_dim], contiguous
};

// The work of one prefill block: tile `tile` of the host plan, cut in tiles of kBM query rows.
struct PrefillTile {
  int seq;        // the sequence
  int q_start;    // its first query row in the tile (of the sequence's q_len)
  int qo0;        // the sequence's first query token in q / out
  int n_rows;     // query rows in the tile (<= 0: none)
  int pos_first;  // position of the tile's first row (n - q_len + q_start for n cached keys)
  int n_keys;     // keys any row of the tile sees (causal)
};
__device__ __forceinline__ PrefillTile prefill_tile(const PrefillArgs& a, int tile, int kBM) {
  PrefillTile t;
  t.seq = a.tile_seq_idx[tile];
  t.q_start = a.tile_q_start[tile];
  t.qo0 = a.qo_indptr[t.seq];
  const int q_len = a.qo_indptr[t.seq + 1] - t.qo0;
  const int prefix = a.seq_lens[t.seq] - q_len;  // position of the sequence's first query row
  t.n_rows = min(kBM, q_len - t.q_start);
  t.pos_first = prefix + t.q_start;
  t.n_keys = t.pos_first + t.n_rows;
  return t;
}

#ifdef VELA_HAS_SM90A
// Runs the plan's n_tiles 128-row tiles on the wgmma kernel; the caller checked that it takes these
// operands (prefill_wgmma_takes: bf16/f16, head_dim 64 or 128, sm_90).
void prefill_wgmma(const PrefillArgs& a, DType dtype, int64_t n_tiles);
#endif

}  // namespace vela::ops::cuda
