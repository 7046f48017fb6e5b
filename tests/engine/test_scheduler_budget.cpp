// Chunked prefill under the step budget (EngineConfig::max_tokens_per_step, max_prefill_chunk,
// max_prefills_per_step, prefill_policy) on a small random model on the CPU: a long prompt that
// arrives while others decode is chunked across steps, no step exceeds the budget, every decode
// row gets its token in every step (never starved), and the prefix-cache aware policy admits a
// cached prompt before an older uncached one.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "core/json.h"
#include "engine/engine.h"
#include "engine/engine_test_util.h"

namespace vela {
namespace {

Transformer small_model() {
  ModelConfig mc = ModelConfig::from_json(json::parse(R"({"model_type": "llama",
    "vocab_size": 256, "hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 128,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 1024})"));
  return Transformer::random(mc, DType::kF32, Device::cpu(), 11);
}

Request request(std::vector<int32_t> prompt, int max_tokens) {
  return test::greedy_request(std::move(prompt), max_tokens);
}

std::vector<int32_t> tokens(int n, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back((i * 7 + salt * 13 + 1) % 256);
  return p;
}

struct BudgetCase {
  const char* name;
  int32_t max_prefill_chunk;
  int32_t max_step_tokens;  // the largest forward the plan may build
};

class StepBudget : public ::testing::TestWithParam<BudgetCase> {};

TEST_P(StepBudget, LongPromptArrivingWhileOthersDecodeIsChunkedAndDecodesAreNeverStarved) {
  const BudgetCase c = GetParam();
  EngineConfig cfg;
  cfg.max_seqs = 4;
  cfg.page_size = 4;
  cfg.max_ctx = 512;
  cfg.max_tokens_per_step = 16;
  cfg.max_prefill_chunk = c.max_prefill_chunk;
  Engine engine(small_model(), nullptr, cfg);
  // Three streams decoding (long outputs: they outlive the long prompt's prefill; 2-token prompts,
  // so their own first step stays under every case's max_step_tokens).
  std::vector<RequestHandlePtr> decoders;
  for (int i = 0; i < 3; ++i) {
    decoders.push_back(engine.submit(request(tokens(2, i), 400)));
    ASSERT_NE(decoders.back(), nullptr);
  }
  for (auto& h : decoders) {
    StreamEvent ev;
    ASSERT_TRUE(h->next(ev));  // decoding now
  }
  const EngineStats before = engine.stats();
  const int kLong = 150;
  RequestResult res = engine.submit(request(tokens(kLong, 9), 3))->wait();
  ASSERT_EQ(res.completions[0].tokens.size(), 3u);
  const EngineStats after = engine.stats();
  for (auto& h : decoders) h->cancel();
  for (auto& h : decoders) h->wait();

  EXPECT_LE(after.max_step_tokens, c.max_step_tokens);
  EXPECT_EQ(after.decode_rows_deferred, 0);
  EXPECT_EQ(after.preemptions, 0);
  // The prompt took at least ceil(150 / per-step share) chunks, each beside the 3 decode rows.
  const int32_t share = c.max_prefill_chunk > 0 ? c.max_prefill_chunk : cfg.max_tokens_per_step - 3;
  const int64_t min_chunks = (kLong + share - 1) / share;
  EXPECT_GE(after.prefill_chunks - before.prefill_chunks, min_chunks);
  EXPECT_GE(after.mixed_steps - before.mixed_steps, min_chunks);
  // Each of those steps was timed as a mixed one (StepTimes), decode-only steps apart.
  EXPECT_EQ(after.step_times.mixed.count() - before.step_times.mixed.count(),
            after.mixed_steps - before.mixed_steps);
  EXPECT_GT(after.step_times.decode.count(), before.step_times.decode.count());
  EXPECT_GT(after.step_times.mixed.quantile(0.5), 0.0);
  // Every step between the two snapshots gave each of the 3 decoders a token (plus the long
  // request's own 3): a step that left a decode row out would make this fall short.
  const int64_t steps = after.steps - before.steps;
  const int64_t generated = after.generated_tokens - before.generated_tokens;
  EXPECT_GE(steps, min_chunks);
  EXPECT_GE(generated, 3 * steps) << steps << " steps";
}

INSTANTIATE_TEST_SUITE_P(Caps, StepBudget,
                         ::testing::Values(BudgetCase{"budget_only", 0, 16},
                                           BudgetCase{"chunk_cap_5", 5, 3 + 5}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(StepBudget, MaxPrefillsPerStepChunksOnePromptAtATime) {
  EngineConfig cfg;
  cfg.max_seqs = 4;
  cfg.page_size = 4;
  cfg.max_ctx = 512;
  cfg.max_tokens_per_step = 64;
  cfg.max_prefills_per_step = 1;
  Engine engine(small_model(), nullptr, cfg);
  // Two 100-token prompts at once: one prompt per step means 100 / 64 -> 2 chunks each, 4 steps
  // before both have computed their prompt (without the cap the second would share the steps).
  auto results = engine.generate({request(tokens(100, 1), 1), request(tokens(100, 2), 1)});
  ASSERT_EQ(results.size(), 2u);
  EngineStats st = engine.stats();
  EXPECT_EQ(st.prefill_chunks, 4);
  EXPECT_LE(st.max_step_tokens, 64);
}

// With one request row busy, two prompts wait: B (older, nothing cached) and C (newer, its first
// 64 tokens in the prefix cache). Returns true when C finished before B.
bool cached_prompt_goes_first(const std::string& policy) {
  EngineConfig cfg;
  cfg.max_seqs = 1;
  cfg.page_size = 4;
  cfg.max_ctx = 1024;
  cfg.kv_pages = 512;  // A's output never evicts the cached prefix
  cfg.max_tokens_per_step = 32;
  cfg.prefill_policy = policy;
  Engine engine(small_model(), nullptr, cfg);
  const std::vector<int32_t> shared = tokens(64, 5);
  engine.generate({request(shared, 1)});  // records the prefix
  RequestHandlePtr a = engine.submit(request(tokens(4, 3), 1000));
  StreamEvent ev;
  EXPECT_TRUE(a->next(ev));  // A holds the only row
  RequestHandlePtr b = engine.submit(request(tokens(64, 6), 2));
  std::vector<int32_t> c_prompt = shared;
  c_prompt.push_back(7);
  RequestHandlePtr c = engine.submit(request(c_prompt, 2));
  // Both wait in the queue (the row is busy) before A goes.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (engine.stats().waiting < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(engine.stats().waiting, 2);
  // Listeners run on the engine thread after every event: the last call of each is its final
  // event, so the order below is the engine's, not the test threads' wake-up order.
  std::atomic<int> seq{0}, b_done{0}, c_done{0};
  b->set_listener([&] { b_done = ++seq; });
  c->set_listener([&] { c_done = ++seq; });
  a->cancel();
  a->wait();
  EXPECT_EQ(b->wait().completions[0].tokens.size(), 2u);
  EXPECT_EQ(c->wait().completions[0].tokens.size(), 2u);
  b->set_listener({});
  c->set_listener({});
  return c_done.load() < b_done.load();
}

TEST(PrefillPolicy, PrefixAwareAdmitsTheCachedPromptFirstFcfsTheOlder) {
  EXPECT_FALSE(cached_prompt_goes_first("fcfs"));
  EXPECT_TRUE(cached_prompt_goes_first("prefix"));
}

TEST(PrefillPolicy, BadKnobsAreClearErrors) {
  auto make = [](auto edit) {
    EngineConfig cfg;
    cfg.max_seqs = 8;
    edit(cfg);
    return std::make_unique<Engine>(small_model(), nullptr, cfg);
  };
  EXPECT_THROW(make([](EngineConfig& c) { c.prefill_policy = "lifo"; }), InvalidArgument);
  EXPECT_THROW(make([](EngineConfig& c) { c.max_tokens_per_step = 4; }), InvalidArgument);
  EXPECT_THROW(make([](EngineConfig& c) { c.max_prefill_chunk = -1; }), InvalidArgument);
  EXPECT_THROW(make([](EngineConfig& c) { c.max_prefills_per_step = -2; }), InvalidArgument);
}

}  // namespace
}  // namespace vela
