// Weight updates on the CUDA engine under concurrent generation: threads generating while one
// thread pushes weights written on another stream; every recorded token version checked by
// recomputing its log-probability with that version's weights on the GPU (f32); weights that
// share storage keep the CUDA graphs; and the wait from the call to the effect, printed (the
// figures in bench/results/engine_updates_h200.txt come from this test).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "core/json.h"
#include "cuda_test_util.h"
#include "engine/engine.h"
#include "engine/engine_updates_util.h"

namespace vela {
namespace {

using Clock = std::chrono::steady_clock;

class CudaEngineUpdates : public test::CudaTest {};

EngineConfig graphs_at_start() {
  EngineConfig ec;
  ec.capture_graphs_at_start = true;  // the graph counts printed compare against the start
  return ec;
}

TEST_F(CudaEngineUpdates, ConcurrentGenerationAndUpdates) {
  test::concurrent_generation_and_updates(gpu(), true, graphs_at_start());
}
TEST_F(CudaEngineUpdates, UpdateLatencyUnderLoad) {
  test::concurrent_generation_and_updates(gpu(), false, graphs_at_start());
}

TEST_F(CudaEngineUpdates, SharedStorageKeepsTheGraphs) {
  Transformer m = Transformer::random(test::updates_config(), DType::kBF16, gpu(), 7);
  EngineConfig ec;
  ec.capture_graphs_at_start = true;  // graph counts below compare against the start
  ec.max_seqs = 8;
  ec.max_ctx = 256;
  Engine engine(m, nullptr, ec);
  size_t graphs = engine.n_cuda_graphs();
  ASSERT_GT(graphs, 0u);
  // A by-value copy shares the tensors (an in-process trainer's compute weights).
  auto t0 = Clock::now();
  EXPECT_EQ(engine.update_weights(m), 1u);
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  EXPECT_EQ(engine.n_cuda_graphs(), graphs) << "same weight memory: the graphs stay valid";
  std::printf("[cuda updates] in-place push (shared storage, idle engine): %.3f ms\n", ms);
  Request r;
  r.prompt = {1, 2, 3};
  r.params.temperature = 0;
  r.params.max_tokens = 8;
  RequestResult out = engine.generate({r})[0];
  EXPECT_EQ(out.completions[0].tokens.size(), 8u);
  EXPECT_EQ(out.completions[0].policy_version, 1u);
}

// n > 1 forks the siblings off the leader's forward row: a step can sample more rows than the
// forward produced (one prompt, G samples: GRPO's rollouts). The device sampler must gather them.
TEST_F(CudaEngineUpdates, MoreSamplesThanForwardRows) {
  Transformer m = Transformer::random(test::updates_config(), DType::kBF16, gpu(), 8);
  EngineConfig ec;
  ec.capture_graphs_at_start = true;  // graph counts below compare against the start
  ec.max_seqs = 16;
  ec.max_ctx = 256;
  Engine engine(m, nullptr, ec);
  SamplingParams p;
  p.n = 8;
  p.max_tokens = 16;
  p.seed = 3;
  std::vector<std::vector<RolloutSample>> out = engine.run_batch({{1, 2, 3}, {4, 5}}, p);
  ASSERT_EQ(out.size(), 2u);
  for (const auto& group : out) {
    ASSERT_EQ(group.size(), 8u);
    for (const RolloutSample& s : group) {
      EXPECT_EQ(s.tokens.size(), 16u);
      EXPECT_EQ(s.logprobs.size(), 16u);
    }
  }
}

}  // namespace
}  // namespace vela
