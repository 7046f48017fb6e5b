// Engine test helpers: greedy requests max_tokens long with EOS ignored (so the length is exact),
// a batch submitted at one step boundary, and the KV variants the parity tests run over.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
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

// Submits all requests while the scheduler is paused (they enter at one step boundary: one
// deterministic step composition, whatever the machine's load) and waits for their results.
inline std::vector<RequestResult> run_together(Engine& e, const std::vector<Request>& reqs) {
  std::vector<RequestHandlePtr> handles;
  {
    auto paused = e.pause();
    for (const Request& r : reqs) handles.push_back(e.submit(r));
  }
  std::vector<RequestResult> out;
  for (auto& h : handles) out.push_back(h->wait());
  return out;
}

// One KV layout of a parameterized engine test: EngineConfig::kv_strategy and page_size.
struct KvVariant {
  const char* name;
  const char* strategy;
  int32_t page_size;
};

// The test name suffix of a KvVariant (INSTANTIATE_TEST_SUITE_P's name generator).
inline std::string kv_variant_name(const ::testing::TestParamInfo<KvVariant>& info) {
  return info.param.name;
}

}  // namespace vela::test
