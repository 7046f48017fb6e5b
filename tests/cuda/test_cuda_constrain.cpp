// Constrained decoding through the CUDA engine (masks filled on the host, uploaded on a side
// stream, applied on the device): on the CPU fixture model in f32 with a character tokenizer,
// every constraint kind (JSON Schema, regex, choice, EBNF, json_object; greedy and sampled, n = 2,
// logprobs, stop strings) gives the CPU engine's tokens, with and without prompt-lookup
// speculation, and every output is a path through its grammar. Greedy rows must match exactly;
// sampled rows draw from the same masked distributions with the same seeds, so they match too
// unless a near-tie rounds differently (counted, at most a few allowed).
#include <gtest/gtest.h>

#include "cuda_test_util.h"
#include "engine/spec_constrain_util.h"

namespace vela {
namespace {

using test::CudaTest;

class CudaConstrain : public CudaTest {};

std::unique_ptr<Engine> engine_on(Device dev, const std::string& spec) {
  EngineConfig cfg = test::fixture_config("paged", 4, spec);
  return std::make_unique<Engine>(Transformer::load(test::kSpecFixtureModel, DType::kF32, dev),
                                  test::fixture_char_tokenizer(), cfg);
}

TEST_F(CudaConstrain, EngineMatchesTheCpuEngineWithAndWithoutSpeculation) {
  for (const char* spec : {"off", "ngram,k=4"}) {
    SCOPED_TRACE(spec);
    auto cpu = engine_on(Device::cpu(), spec), dev = engine_on(gpu(), spec);
    const std::vector<Request> reqs = test::constrained_requests(*cpu->tokenizer());
    auto a = cpu->generate(reqs), b = dev->generate(reqs);
    ASSERT_EQ(a.size(), b.size());
    int sampled_differ = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_EQ(a[i].completions.size(), b[i].completions.size()) << "request " << i;
      for (size_t k = 0; k < b[i].completions.size(); ++k) {
        const std::string at = "request " + std::to_string(i) + "." + std::to_string(k);
        test::expect_valid(*dev, reqs[i].params.constraint, b[i].completions[k], at);
        if (a[i].completions[k].tokens == b[i].completions[k].tokens) continue;
        if (reqs[i].params.temperature == 0.0f) {
          ADD_FAILURE() << at << " (greedy): cpu '" << a[i].completions[k].text << "' cuda '"
                        << b[i].completions[k].text << "'";
        } else {
          ++sampled_differ;
        }
      }
    }
    EXPECT_LE(sampled_differ, 2) << "sampled constrained outputs differ from the CPU engine's";
    EXPECT_EQ(dev->stats().running, 0);
    EXPECT_EQ(dev->check_integrity(), "");
  }
}

}  // namespace
}  // namespace vela
