// The mixture-of-experts fixtures (tools/make_moe_fixtures.py) through the CPU engine: alone the
// fixture prompt reproduces transformers' greedy tokens; in busy batches (chunked prefill mixed
// with decodes, recycled rows, paged KV) every request equals its plain dense-forward greedy
// continuation — routing is per token, so batching must not change a request's experts.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/json.h"
#include "engine/engine.h"
#include "engine/engine_test_util.h"

namespace vela {
namespace {

class EngineMoe : public ::testing::TestWithParam<const char*> {};

TEST_P(EngineMoe, GreedyMatchesTransformersAloneAndPlainForwardInBusyBatches) {
  const std::string dir = std::string("fixtures/models/") + GetParam();
  if (!std::filesystem::exists(dir + "/reference.json"))
    GTEST_SKIP() << dir << " is absent (tools/make_moe_fixtures.py)";
  std::ifstream f(dir + "/reference.json");
  json ref = json::parse(f);
  const auto prompt = ref["prompt_ids"].get<std::vector<int32_t>>();
  const auto greedy = ref["greedy_ids"].get<std::vector<int32_t>>();
  Transformer plain = Transformer::load(dir);
  const auto request = test::greedy_request;
  auto plain_greedy = [&](std::vector<int32_t> seq, int n) {
    std::vector<int32_t> out;
    for (int s = 0; s < n; ++s) {
      const int64_t t = static_cast<int64_t>(seq.size());
      Tensor l = plain.forward_dense(Tensor::from_vector(seq, {1, t}));
      const float* row = l.data<float>() + (t - 1) * plain.config.vocab_size;
      out.push_back(
          static_cast<int32_t>(std::max_element(row, row + plain.config.vocab_size) - row));
      seq.push_back(out.back());
    }
    return out;
  };
  EngineConfig cfg;
  cfg.kv_strategy = "paged";
  cfg.page_size = 4;
  cfg.max_seqs = 4;
  cfg.max_tokens_per_step = 13;
  cfg.max_ctx = 64;
  Engine engine(Transformer::load(dir), nullptr, cfg);
  auto alone = engine.generate({request(prompt, static_cast<int>(greedy.size()))});
  EXPECT_EQ(alone[0].completions[0].tokens, greedy);
  std::vector<Request> reqs;
  std::vector<std::vector<int32_t>> prompts;
  for (int len : {1, 3, 24, 7, 16, 17, 2, 11}) {
    std::vector<int32_t> p;
    for (int i = 0; i < len; ++i)
      p.push_back(prompt[static_cast<size_t>((i * 5 + len) % prompt.size())]);
    prompts.push_back(p);
    reqs.push_back(request(p, 6));
  }
  auto results = engine.generate(reqs);
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(results[i].completions[0].tokens, plain_greedy(prompts[i], 6)) << "request " << i;
  EXPECT_EQ(engine.stats().running, 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EngineMoe,
                         ::testing::Values("qwen3_moe", "qwen3_moe_hub", "mixtral", "mixtral_hub",
                                           "qwen2_moe_shared"));

}  // namespace
}  // namespace vela
