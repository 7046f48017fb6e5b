// Draft-model speculation on CUDA (engine/spec/draft_model.h): greedy output identical with and
// without a draft model in busy mixed batches, with the draft's decode steps replayed from CUDA
// graphs and eagerly; a draft equal to the target accepts every draft (its KV, on its own stream,
// follows the accepted tokens); a random draft of the same vocabulary is rejected and changes
// nothing; sampled rows run the general rule; no KV leaks (target and draft).
#include <gtest/gtest.h>

#include "cuda_test_util.h"
#include "engine/engine.h"

namespace vela {
namespace {

using test::CudaTest;

const std::string kModel = "fixtures/models/qwen3_qknorm";

class CudaSpecDraft : public CudaTest {};

EngineConfig config(bool graphs, bool speculate) {
  EngineConfig cfg;
  cfg.max_seqs = 4;
  cfg.max_tokens_per_step = 13;
  cfg.max_ctx = 64;
  cfg.page_size = 4;
  cfg.cuda_graphs = graphs;
  if (speculate) {
    cfg.speculative.method = SpeculativeConfig::Method::kDraft;
    cfg.speculative.k = 4;
  }
  return cfg;
}

std::vector<Request> requests(float temperature) {
  std::vector<Request> out;
  const std::vector<std::vector<int32_t>> prompts = {
      {3, 9, 27, 81, 3, 9, 27, 81}, {5}, {11, 12, 13, 14, 15, 16, 17}, {40, 41, 40, 41}, {7, 7, 7},
      {100, 3, 77, 100, 3, 77}};
  for (size_t i = 0; i < prompts.size(); ++i) {
    Request r;
    r.prompt = prompts[i];
    r.params.temperature = temperature;
    r.params.max_tokens = 24;
    r.params.ignore_eos = true;
    r.params.seed = 40 + i;
    if (i % 3 == 1) r.params.repetition_penalty = 1.2f;
    out.push_back(r);
  }
  return out;
}

TEST_F(CudaSpecDraft, GreedyOutputIdenticalWithAndWithoutTheDraftModel) {
  for (bool graphs : {true, false}) {
    Engine plain(Transformer::load(kModel, DType::kF32, gpu()), nullptr, config(graphs, false));
    Engine same(Transformer::load(kModel, DType::kF32, gpu()), nullptr, config(graphs, true),
                std::make_unique<Transformer>(Transformer::load(kModel, DType::kF32, gpu())));
    Transformer t = Transformer::load(kModel, DType::kF32, gpu());
    Engine other(std::move(t), nullptr, config(graphs, true),
                 std::make_unique<Transformer>(Transformer::random(Transformer::load(kModel).config,
                                                                   DType::kF32, gpu(), 3, 0.3f)));
    auto reqs = requests(0.0f);
    auto a = plain.generate(reqs), b = same.generate(reqs), c = other.generate(reqs);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(a[i].completions[0].tokens, b[i].completions[0].tokens)
          << "request " << i << " graphs " << graphs;
      EXPECT_EQ(a[i].completions[0].tokens, c[i].completions[0].tokens)
          << "request " << i << " graphs " << graphs;
    }
    SpeculativeStats s1 = same.stats().speculative, s2 = other.stats().speculative;
    EXPECT_GT(s1.acceptance_rate(), 0.97) << "graphs " << graphs;
    EXPECT_LT(s2.accepted, s2.drafted);
    // Sampled rows: the general rule on the device's logits (read back); valid, no leak.
    for (const RequestResult& r : same.generate(requests(0.8f)))
      EXPECT_EQ(r.completions[0].tokens.size(), 24u);
    EXPECT_GT(same.stats().speculative.accepted, s1.accepted);
    for (Engine* e : {&same, &other}) {
      EXPECT_EQ(e->check_integrity(), "");
      EXPECT_EQ(e->stats().kv_pages_used, e->stats().kv_pages_cached);
    }
  }
}

}  // namespace
}  // namespace vela
