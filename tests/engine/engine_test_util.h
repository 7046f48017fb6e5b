// Requests for engine tests: greedy, max_tokens long, EOS ignored (so the length is exact).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/request.h"

namespace vela::test {

inline Request greedy_request(std::vector<int32_t> prompt, int max_tokens) {
  Request r;
  r.prompt = std::move(prompt);
  r.params.temperature = 0;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  return r;
}

}  // namespace vela::test
