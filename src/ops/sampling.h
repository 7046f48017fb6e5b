// Batched token sampling as one op: per row, penalties (from a sparse history or a token-count
// table), logit bias, then greedy argmax or temperature / top-k / top-p / min-p and one
// inverse-CDF draw with the Philox uniform at (seed, stream, step). This is the one sampling
// pipeline of vela: the engine's Sampler (engine/runtime/sampler.h) packs its rows into
// SampleRowParams and calls it on the logits' device; the CPU implementation
// (ops/cpu/sampling.cpp, vectorised) is the reference the CUDA kernels (ops/cuda/sampling.cu)
// are tested against.
//
// Exact arithmetic where order matters: filter weights w = exp(l * s - m * s) (s = 1/T, m the
// row max, each product and difference rounded on its own) are summed as 2^-40 fixed-point
// integers, so masses, the top-p cut and the draw do not depend on summation order (CPU and CUDA
// agree bit for bit up to exp rounding). The kept set is a threshold in (logit desc, id asc)
// order; the draw walks kept ids ascending.
//
// Tensors (all on one device):
//   logits  [n_rows, vocab] f32, unit column stride; read only (NaN reads as -inf)
//   params  [>= n_rows * sizeof(SampleRowParams)] u8: one SampleRowParams per row
//   entries [n_entries, 2] i32: per-row ranges of (token id, value) pairs: the logit bias
//           (value = float bits of the bias) and the penalty history (value = (output count << 1)
//           | in_prompt, one entry per distinct token)
//   counts  [n_slots, vocab] i32: per-slot token counts, (output count << 1) | in_prompt, read by
//           rows with a slot instead of a history; rows with kSampleUpdateCounts add their
//           sampled token (+2) after sampling (n_slots may be 0)
//   work    [>= n_rows, vocab] f32 scratch: rows with penalties or bias (or NaNs, on the CPU) are
//           rewritten here; after the call a row there holds its processed logits, or its
//           sampling distribution with kSampleProbs (the CUDA argmax keeps partial maxima at
//           the start of the other rows: their contents are unspecified)
//   out     [kSampleOutRows, >= n_rows] i32 (structure of arrays, see kSampleOut*)
#pragma once

#include <cstdint>

#include "core/macros.h"
#include "core/tensor.h"

namespace vela::ops {

inline constexpr int32_t kSampleMaxTopLogprobs = 20;
// Rows of `out`: token id, logprob (float bits), top ids [20], top logprobs (float bits) [20].
inline constexpr int32_t kSampleOutToken = 0;
inline constexpr int32_t kSampleOutLogprob = 1;
inline constexpr int32_t kSampleOutTopIds = 2;
inline constexpr int32_t kSampleOutTopLogprobs = 2 + kSampleMaxTopLogprobs;
inline constexpr int32_t kSampleOutRows = 2 + 2 * kSampleMaxTopLogprobs;

// SampleRowParams::flags
inline constexpr uint32_t kSampleGreedy = 1u << 0;
inline constexpr uint32_t kSampleLogprobs = 1u << 1;
inline constexpr uint32_t kSampleRepetition = 1u << 2;    // repetition_penalty != 1
inline constexpr uint32_t kSampleFreqPresence = 1u << 3;  // frequency or presence != 0
inline constexpr uint32_t kSampleUpdateCounts = 1u << 4;  // add the sampled token to its slot
// With kSampleLogprobs: the logprobs of the penalized, biased row times inv_temperature (before
// top-k / top-p / min-p) instead of the raw row's (SamplingParams::LogprobsMode::kTempered).
inline constexpr uint32_t kSampleLogprobsTempered = 1u << 5;
// Write the row's sampling distribution into its `work` row after the draw: p_i = kept weight /
// kept mass (f32; after penalties, bias, temperature, top-k, top-p, min-p; one-hot at the token
// for greedy rows or rows with every token banned), replacing the processed logits there. What a
// speculative verifier needs for the general rule (accept min(1, p / q), residual max(0, p - q)).
inline constexpr uint32_t kSampleProbs = 1u << 6;

// One row's knobs, packed by the host once per step (plain bytes, uploaded as is).
struct SampleRowParams {
  float inv_temperature = 1.0f;  // 1 / T (unused when greedy)
  float top_p = 1.0f;            // 1 = off
  float min_p = 0.0f;            // 0 = off
  int32_t top_k = 0;             // 0 = off (normalized: k >= vocab is off)
  float presence = 0.0f, frequency = 0.0f, repetition = 1.0f;
  uint32_t flags = 0;
  int32_t n_top_logprobs = 0;  // 0..kSampleMaxTopLogprobs (needs kSampleLogprobs)
  // Penalties read counts[slot] when slot >= 0, else the history entries [pen_begin, pen_end).
  int32_t slot = -1;                        // row of `counts` (penalties / update), -1 = none
  int32_t bias_begin = 0, bias_end = 0;     // range of `entries` rows: the logit bias
  int32_t pen_begin = 0, pen_end = 0;       // range of `entries` rows: the penalty history
  uint64_t seed = 0, stream = 0, step = 0;  // Philox key, stream and index of the uniform
};

// Order-preserving key of a float: larger float -> larger key; -0.0 and +0.0 share one key.
// Callers never pass NaN (it reads as -inf before any key is taken).
VELA_HOST_DEVICE VELA_INLINE uint32_t sample_key(float f) {
  if (f == 0.0f) f = 0.0f;
  uint32_t u;
#if defined(__CUDA_ARCH__)
  u = __float_as_uint(f);
#else
  __builtin_memcpy(&u, &f, 4);
#endif
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// A filter weight in [0, 1] as a 2^-40 fixed-point integer (a vocabulary of 2^23 weights of 1
// stays below 2^63).
VELA_HOST_DEVICE VELA_INLINE uint64_t sample_fixed(float w) {
  return static_cast<uint64_t>(static_cast<double>(w) * 1099511627776.0);
}

// (key desc, id asc) order as one integer: a larger value comes first. 0 sorts below every real
// candidate, so it pads.
VELA_HOST_DEVICE VELA_INLINE uint64_t sample_rank(uint32_t key, int32_t id) {
  return (static_cast<uint64_t>(key) << 32) | (0xffffffffu - static_cast<uint32_t>(id));
}

// The greedy argmax in pieces: chunk_max[r][j] is the largest sample_rank(sample_key(v), i) over
// the columns i of chunk j (kArgmaxChunkCols columns each, the last one shorter) of logits row r,
// NaN read as -inf; a row's argmax (ties to the lower id) is rank_id of the largest of its chunks.
//   logits [n_rows, vocab] f32, unit column stride   chunk_max [>= n_rows, >= argmax_chunk_count]
//   i64 (the u64 ranks' bits), contiguous rows
// The LM head can write them in its GEMM's epilogue (ops::gemm_argmax_chunks, fused_gemm.h), so
// the sampler need not read the logits row again for a greedy token (sample's chunk_max).
inline constexpr int64_t kArgmaxChunkCols = 128;
inline int64_t argmax_chunk_count(int64_t vocab) {
  return (vocab + kArgmaxChunkCols - 1) / kArgmaxChunkCols;
}
void argmax_chunks(const Tensor& logits, Tensor& chunk_max);

// Samples logits.size(0) rows (see the file comment for shapes). Throws InvalidArgument on a
// shape, dtype or device mismatch; per-row params and entries are trusted (the engine's Sampler
// validates them). Stream-ordered on CUDA (no host sync, no allocation: graph-capturable).
// chunk_max, when defined, must hold argmax_chunks(logits) (rows [0, n_rows)): the CUDA kernel
// then takes the argmax of the rows without penalties or bias from it instead of a pass over the
// row (the same token; the CPU scans its rows either way). next_ids (optional, i32, contiguous,
// >= n_rows entries, on the logits' device): each row's token is also written to next_ids[row],
// the next decode step's input ids (engine: no copy between the sampler and the forward).
void sample(const Tensor& logits, const Tensor& params, const Tensor& entries, Tensor& counts,
            Tensor& work, Tensor& out, const Tensor& chunk_max = Tensor(),
            Tensor* next_ids = nullptr);

// Rewrites slots of the count table: for each i < n_resets, zeroes counts[slots[i]] and then
// sets counts[slots[i], entries[j, 0]] = entries[j, 1] for j in [begin[i], end[i]).
//   resets  [>= n_resets, 3] i32: (slot, begin, end)
//   entries [n_entries, 2] i32: (token id, count value)
void sample_reset_counts(Tensor& counts, const Tensor& resets, int32_t n_resets,
                         const Tensor& entries);

}  // namespace vela::ops
