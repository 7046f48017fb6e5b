// Sampler: turns one row of logits per sequence into the next token (CPU reference).
// Pipeline per row: raw logprobs (only when asked; kTempered ones after the bias) -> penalties ->
// logit bias -> temperature -> top-k -> top-p -> min-p -> inverse-CDF draw with one Philox uniform
// at (seed, stream, step), or argmax when greedy. A row's token depends only on its logits, params
// and (seed, stream, step), never on the other rows of the batch. Not thread-safe (one Sampler per
// scheduler loop).
#pragma once

#include <cstdint>
#include <exception>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "engine/sampling_params.h"

namespace vela {

struct SamplerRow {
  const SamplingParams* params;
  const std::vector<int32_t>* prompt;  // for the repetition penalty (may be null: empty)
  const std::vector<int32_t>* output;  // generated so far (penalties; may be null: empty)
  uint64_t seed;        // the request's seed (the engine picks one when params->seed is empty)
  uint64_t step;        // index of the token being sampled: the Philox index
  uint64_t stream = 0;  // distinguishes the n parallel samples of one request: the Philox stream
};

struct SampleResult {
  int32_t token = 0;
  // log_softmax of the model's RAW logits at `token` (params->logprobs_mode kRaw), or of the
  // processed logits / T (kTempered: after penalties and bias, before truncation); filled only
  // when params->logprobs (else 0).
  float logprob = 0.0f;
  // The params->top_logprobs best tokens of that row with their logprobs, descending (ties:
  // lower id). Cleared, not reallocated, when not requested.
  std::vector<std::pair<int32_t, float>> top_logprobs;
};

class Sampler {
 public:
  // All scratch is allocated here, sized by vocab and rows; sample() does not allocate (beyond
  // growing `out` the first time the caller passes a smaller vector).
  Sampler(int64_t vocab_size, int32_t max_rows);

  // logits: [n_rows, vocab_size] f32 on CPU, unit column stride (rows may be strided); modified in
  // place (penalties and bias). rows.size() == n_rows <= max_rows. Throws InvalidArgument on a
  // shape mismatch, a null params pointer, or a token id outside the vocabulary (in a prompt,
  // output or logit_bias); `out` is then unspecified.
  void sample(Tensor& logits, const std::vector<SamplerRow>& rows, std::vector<SampleResult>& out);

  // The distribution sample() draws each row from, as probabilities: probs[r * vocab + i] =
  // P(token i) after penalties, logit bias, temperature, top-k, top-p and min-p (greedy rows, and
  // rows with every token banned: one-hot at the argmax). logits are modified in place as by
  // sample(). Speculative decoding's rejection rule (engine/spec/rejection.h) reads these.
  void distribution(Tensor& logits, const std::vector<SamplerRow>& rows, float* probs);

  int64_t vocab_size() const { return vocab_size_; }
  int32_t max_rows() const { return max_rows_; }

 private:
  // Per-worker scratch; worker w handles rows w, w + n_workers, ...
  struct Scratch {
    std::vector<float> raw;   // [vocab] raw row copy, for logprobs when the row is modified
    std::vector<float> prob;  // [vocab] weights exp((l - l_max) / T); raw exps for logprobs
    std::vector<float> heap;  // [vocab] top-k threshold selection
    std::vector<std::pair<float, int32_t>> sorted;  // [vocab] (logit, id) top-p candidates
    std::vector<std::pair<float, int32_t>> top;     // [top_logprobs + 1] (raw logit, id)
    std::vector<int32_t> count;  // [vocab] output-token counts, zero between rows
    std::vector<uint8_t> seen;   // [vocab] prompt/output membership, zero between rows
    std::exception_ptr error;
  };

  void sample_row(float* logits, const SamplerRow& row, SampleResult& out, Scratch& s) const;
  void apply_penalties(float* logits, const SamplerRow& row, Scratch& s) const;
  // log sum exp(scale * (row - row_max)) over the row (its max row_max, scale > 0); appends the
  // top_logprobs best entries' logprobs to out.top_logprobs.
  float row_logprobs(const float* row, float row_max, float scale, int32_t top_logprobs, Scratch& s,
                     SampleResult& out) const;
  int32_t sample_filtered(const float* logits, const SamplingParams& p, float u, Scratch& s) const;
  // Temperature / top-k / top-p / min-p weights of the row into s.prob (0 = dropped) and their
  // sum; false when every token is banned.
  bool filter_weights(const float* logits, const SamplingParams& p, Scratch& s,
                      double* total) const;

  int64_t vocab_size_;
  int32_t max_rows_;
  std::vector<Scratch> workers_;
};

// Helpers shared with tests and a future device twin.
// Argmax of row[0..n) with ties to the lower index.
int32_t argmax_lower_id(const float* row, int64_t n);

}  // namespace vela
