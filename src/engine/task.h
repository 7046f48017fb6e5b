// Task: one sample of one request as the scheduler tracks it. Its KV covers the first
// `n_computed` of `tokens()` (prompt + generated); the next step feeds the rest — a whole prompt,
// a prefill chunk, one decode token, or a recompute after preemption: one rule for all of them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/constrain/matcher.h"
#include "engine/request.h"
#include "engine/request_handle.h"
#include "engine/stop_checker.h"
#include "tokenizer/streaming_decoder.h"

namespace vela {

struct Task {
  int64_t id = 0;  // unique; the TaskCacheManager key
  RequestHandlePtr handle;
  std::shared_ptr<const Request> request;
  int32_t index = 0;       // sample index within the request (0 .. n-1)
  uint64_t seed = 0;       // sampling seed (request's, or drawn by the engine)
  uint64_t admit_seq = 0;  // admission order (preemption picks the newest)
  bool admitted = false;
  int32_t n_passed = 0;  // later tasks admitted before this one (prefill_policy "prefix")
  bool cached_reported = false;
  std::vector<int32_t> output;              // generated tokens
  int32_t n_computed = 0;                   // tokens of tokens() whose KV is in the cache
  bool kv_from_older = false;               // some of that KV was written by older weights (kMixed)
  Completion completion;                    // accumulated result
  std::unique_ptr<StreamingDecoder> detok;  // null without a tokenizer
  std::unique_ptr<StopChecker> stop;
  // Constrained decoding: the position of output in request->grammar (null without one). It
  // follows `output`: a preemption keeps both, a restart resets both.
  std::unique_ptr<constrain::GrammarMatcher> matcher;
  // Speculative decoding: the draft tokens fed after the last token in this step's item (empty
  // unless the step verifies drafts for this task; see engine/spec/speculator.h).
  std::vector<int32_t> drafts;

  const std::vector<int32_t>& prompt() const { return request->prompt; }
  const SamplingParams& params() const { return request->params; }
  int32_t n_tokens() const { return static_cast<int32_t>(prompt().size() + output.size()); }
  int32_t token_at(int32_t i) const {
    int32_t np = static_cast<int32_t>(prompt().size());
    return i < np ? prompt()[static_cast<size_t>(i)] : output[static_cast<size_t>(i - np)];
  }
  // prompt + output[0 .. n) as one vector.
  std::vector<int32_t> tokens(int32_t n) const {
    std::vector<int32_t> t;
    t.reserve(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) t.push_back(token_at(i));
    return t;
  }
};

}  // namespace vela
