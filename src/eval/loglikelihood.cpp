// LoglikelihoodScorer: sorted, budgeted batches through Transformer::forward_packed.
#include "eval/loglikelihood.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "model/contiguous_kv_cache.h"

namespace vela::eval {

LoglikelihoodScorer::LoglikelihoodScorer(const Transformer& model, int64_t max_batch_tokens)
    : model_(model), max_batch_tokens_(max_batch_tokens) {
  VELA_CHECK(max_batch_tokens > 0, "the batch token budget must be positive, got ",
             max_batch_tokens);
}

std::vector<LoglikelihoodResult> LoglikelihoodScorer::score(
    const std::vector<LoglikelihoodRequest>& requests,
    const std::function<void(size_t)>& on_progress) const {
  const ModelConfig& mc = model_.config;
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& r = requests[i];
    const auto n = static_cast<int64_t>(r.tokens.size());
    VELA_CHECK(n >= 2 && r.first_target >= 1 && r.first_target < n, "scoring request ", i,
               ": needs at least one context token and one target (", n, " tokens, first target ",
               r.first_target, ")");
    VELA_CHECK(n <= mc.max_position_embeddings, "scoring request ", i, ": ", n,
               " tokens exceed the model's context of ", mc.max_position_embeddings);
    for (int32_t id : r.tokens)
      VELA_CHECK(id >= 0 && id < mc.vocab_size, "scoring request ", i, ": token id ", id,
                 " is outside the vocabulary [0, ", mc.vocab_size, ")");
  }
  // Longest first (as lm-evaluation-harness): similar lengths share a batch, and an out-of-memory
  // shows up on the first batch rather than at the end.
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return requests[a].tokens.size() > requests[b].tokens.size();
  });

  std::vector<LoglikelihoodResult> results(requests.size());
  const int64_t vocab = mc.vocab_size;
  size_t pos = 0;
  while (pos < order.size()) {
    // A batch of n sequences reserves n * longest KV slots: keep that within the budget.
    const auto longest = static_cast<int64_t>(requests[order[pos]].tokens.size());
    size_t end = pos + 1;
    while (end < order.size() && static_cast<int64_t>(end - pos + 1) * longest <= max_batch_tokens_)
      ++end;
    const auto n_seqs = static_cast<int32_t>(end - pos);
    ContiguousKVCache cache(mc, n_seqs, longest, model_.dtype(), model_.device());
    std::vector<int32_t> ids, seqs, n_new, rows;
    for (int32_t s = 0; s < n_seqs; ++s) {
      const auto& r = requests[order[pos + static_cast<size_t>(s)]];
      const auto base = static_cast<int32_t>(ids.size());
      ids.insert(ids.end(), r.tokens.begin(), r.tokens.end());
      seqs.push_back(s);
      n_new.push_back(static_cast<int32_t>(r.tokens.size()));
      // The row at position p predicts token p + 1.
      for (auto t = static_cast<int32_t>(r.first_target); t < static_cast<int32_t>(r.tokens.size());
           ++t)
        rows.push_back(base + t - 1);
    }
    PackedStep st = cache.step(seqs, n_new);
    Device dev = model_.device();
    Tensor logits = model_
                        .forward_packed(Tensor::from_vector(ids).to(dev), st.positions, st.kv,
                                        Tensor::from_vector(rows).to(dev))
                        .to(Device::cpu());  // [n_rows, vocab] f32
    const float* l = logits.data<float>();
    size_t row = 0;
    for (int32_t s = 0; s < n_seqs; ++s) {
      const size_t idx = order[pos + static_cast<size_t>(s)];
      const auto& r = requests[idx];
      LoglikelihoodResult res;
      res.greedy = true;
      for (size_t t = static_cast<size_t>(r.first_target); t < r.tokens.size(); ++t, ++row) {
        const float* x = l + static_cast<int64_t>(row) * vocab;
        const float* best = std::max_element(x, x + vocab);
        double sum = 0;
        for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(x[v]) - *best);
        const double lse = static_cast<double>(*best) + std::log(sum);
        res.logprob += static_cast<double>(x[r.tokens[t]]) - lse;
        res.greedy = res.greedy && (best - x) == r.tokens[t];
        ++res.n_targets;
      }
      results[idx] = res;
    }
    pos = end;
    if (on_progress) on_progress(pos);
  }
  return results;
}

}  // namespace vela::eval
