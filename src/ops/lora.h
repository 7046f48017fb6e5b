// LoRA ops (nn/lora.h): the per-row-adapter (BGMV-style) shrink and expand that serve several
// adapters in one batch, and the counter-based dropout of the LoRA input.
//
//   lora_shrink   xa[i, :] = a[slots[i]] @ x[i, :]            x: [n, in]  a: [n_slots, r, in]
//                                                              xa: [n, r] f32 (0 where slot < 0)
//   lora_expand   y[i, :] += scales[s] * b[s] @ xa[i, :]       b: [n_slots, n_cols, r]
//                 with s = slots[i] (rows with s < 0 unchanged) y: [n, n_cols]  scales: [n_slots]
//                 f32
//   lora_dropout  out = x * keep / (1 - p), keep[i, j] = hash(seed, stream, i * n_cols + j) >= p
//                 x, out: [n, n_cols] (out may be x). Linear and diagonal: applying it with the
//                 same seed to a gradient is its backward.
// Segmented forms (one launch each for all the adapted column blocks of one Linear: q|k|v,
// gate|up): segment g has its own a_g [n_slots, r, in], b_g [n_slots, n_cols_g, r] and output
// y_g [n, n_cols_g] (a column block of any tensor); xa is [n, n_seg * r] with segment g in
// columns [g * r, (g + 1) * r). The single-segment calls above are the n_seg = 1 case.
// Split over `in`: xa may be [p, n, n_seg * r], part z holding the sums over the z-th chunk of
// lora_chunk(in, p) inputs; expand adds the parts in order z = 0 .. p - 1. lora_shrink_parts()
// is the p a device wants for `in` (it depends on `in` only: a row's bits do not depend on its
// batch).
// slots: [n] i32 with values in [-1, n_slots). x, a, b, y share one floating dtype (f32/bf16/f16);
// rows contiguous, row strides free (y may be a column block of a fused projection). fp32
// accumulation; each row's result depends only on that row (no batch-size effect). CPU and CUDA
// give bit-identical dropout masks (one hash, ops/lora_hash.h).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace vela::ops {

constexpr int kMaxLoraSegments = 4;

// Inputs per shrink part: ceil(in / p) rounded up to 256 (a whole number of 16-byte warp loads).
inline int64_t lora_chunk(int64_t in, int64_t p) {
  const int64_t c = (in + p - 1) / p;
  return (c + 255) / 256 * 256;
}
// The shrink parts for `in` inputs on `device`: 1 on the CPU; on CUDA one per 1024 inputs, so a
// decode-size batch still fills the GPU (bench-1b's down projection: 7 parts).
int64_t lora_shrink_parts(int64_t in, Device device);

// The adapted column blocks of one Linear (fixed capacity: building one allocates nothing).
struct LoraSegments {
  int n = 0;
  Tensor a[kMaxLoraSegments];  // [n_slots, r, in]
  Tensor b[kMaxLoraSegments];  // [n_slots, n_cols_g, r]
  Tensor y[kMaxLoraSegments];  // [n, n_cols_g] (expand only)
};

void lora_shrink(const Tensor& x, const LoraSegments& segs, const Tensor& slots, Tensor& xa);
void lora_expand(const Tensor& xa, const LoraSegments& segs, const Tensor& slots,
                 const Tensor& scales);

void lora_shrink(const Tensor& x, const Tensor& a, const Tensor& slots, Tensor& xa);
void lora_expand(const Tensor& xa, const Tensor& b, const Tensor& slots, const Tensor& scales,
                 Tensor& y);
void lora_dropout(const Tensor& x, uint64_t seed, uint64_t stream, float p, Tensor& out);

}  // namespace vela::ops
