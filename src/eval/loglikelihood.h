// LoglikelihoodScorer: log p(target tokens | preceding tokens) of many token sequences through the
// model's packed forward (the engine's inference path, CPU or CUDA), batched under a token budget.
// This is what `vela eval ppl` and `vela eval choice` score with: the engine's request API returns
// logprobs of generated tokens only, not of prompt tokens, so the scorer runs the Transformer
// itself with a ContiguousKVCache sized per batch.
//
// Results do not depend on the batching: every sequence attends only to itself and the
// log-softmax is taken in double on the host. Not thread-safe (one caller); the model is only read.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/transformer.h"

namespace vela::eval {

struct LoglikelihoodRequest {
  std::vector<int32_t> tokens;  // the whole sequence, at most the model's context
  int32_t first_target = 1;     // tokens[first_target..] are scored (>= 1: token 0 has no context)
};

struct LoglikelihoodResult {
  double logprob = 0;     // sum over the targets of log p(token | everything before it), nats
  int32_t n_targets = 0;  // tokens scored
  bool greedy = false;    // every target was the argmax of its distribution
};

class LoglikelihoodScorer {
 public:
  // max_batch_tokens bounds one forward: the sum of the sequence lengths (and so the logits rows
  // [rows, vocab] f32 and the KV cache of the batch). A sequence longer than it runs alone.
  LoglikelihoodScorer(const Transformer& model, int64_t max_batch_tokens);

  // Results in request order. on_progress(n_done) is called after each forward. Throws
  // InvalidArgument for an empty sequence, a token outside the vocabulary, first_target outside
  // [1, n_tokens) or a sequence longer than the model's max_position_embeddings.
  std::vector<LoglikelihoodResult> score(const std::vector<LoglikelihoodRequest>& requests,
                                         const std::function<void(size_t)>& on_progress = {}) const;

 private:
  const Transformer& model_;
  int64_t max_batch_tokens_;
};

}  // namespace vela::eval
