// Weight updates under concurrent generation (CPU, f32): threads generating, one pushing weights,
// one reading stats, all at once; then every recorded token version is checked by recomputing the
// token's log-probability with the weights of that version (plain dense forward). Also: each
// WeightUpdatePolicy (mixed and marked, restart, finish on the old weights), the prefix cache
// dropped on update, and updates taking effect at the next step boundary (bounded wait).
// scripts/tsan.sh runs these under ThreadSanitizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>

#include "core/json.h"
#include "engine/engine.h"
#include "engine/engine_updates_util.h"

namespace vela {
namespace {

using test::logprob_error;

using Clock = std::chrono::steady_clock;

ModelConfig tiny_config() {
  json c = {
      {"model_type", "qwen3"},      {"vocab_size", 96},       {"hidden_size", 32},
      {"intermediate_size", 64},    {"num_hidden_layers", 2}, {"num_attention_heads", 4},
      {"num_key_value_heads", 2},   {"head_dim", 8},          {"max_position_embeddings", 512},
      {"tie_word_embeddings", true}};
  return ModelConfig::from_json(c, "test");
}

// models[v] holds the weights of policy version v (version 0 is the engine's initial model).
std::vector<Transformer> make_versions(int n) {
  std::vector<Transformer> m;
  for (int v = 0; v < n; ++v)
    m.push_back(Transformer::random(tiny_config(), DType::kF32, Device::cpu(), 1000 + v, 0.2f));
  return m;
}

EngineConfig small_engine() {
  EngineConfig ec;
  ec.max_seqs = 8;
  ec.max_ctx = 256;
  ec.page_size = 4;
  ec.max_tokens_per_step = 64;
  return ec;
}

Request sampled_request(std::mt19937& rng, int max_tokens, std::optional<WeightUpdatePolicy> pol) {
  Request r;
  int len = std::uniform_int_distribution<int>(1, 20)(rng);
  for (int i = 0; i < len; ++i) r.prompt.push_back(std::uniform_int_distribution<int>(0, 95)(rng));
  r.params.temperature = 1.0f;
  r.params.seed = rng();
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  r.params.logprobs = true;
  r.params.on_weight_update = pol;
  return r;
}

// One sample's versions against the models: spans well-formed and rising, every span after the
// first over stale KV, mixed_versions exactly when there is more than one span or stale KV; the
// tokens of a span on its own version's KV (only ever the first) have the log-probabilities of
// that version's weights.
void check_versions(const std::vector<Transformer>& models, const Request& r, const Completion& c,
                    double& worst) {
  ASSERT_EQ(c.tokens.size(), c.logprobs.size());
  if (c.tokens.empty()) return;
  ASSERT_FALSE(c.versions.empty());
  EXPECT_EQ(c.versions.front().first_token, 0);
  for (size_t k = 1; k < c.versions.size(); ++k) {
    EXPECT_GT(c.versions[k].first_token, c.versions[k - 1].first_token);
    EXPECT_GT(c.versions[k].version, c.versions[k - 1].version);
    EXPECT_TRUE(c.versions[k].stale_kv);
  }
  EXPECT_EQ(c.mixed_versions, c.versions.size() > 1 || c.versions.front().stale_kv);
  EXPECT_EQ(c.policy_version, c.versions.back().version);
  ASSERT_LT(c.versions.front().version, models.size());
  size_t first_end =
      c.versions.size() > 1 ? static_cast<size_t>(c.versions[1].first_token) : c.tokens.size();
  if (!c.versions.front().stale_kv)
    worst = std::max(worst,
                     logprob_error(models[c.versions.front().version], r.prompt, c, 0, first_end));
}

TEST(EngineUpdates, ConcurrentGenerationUpdatesAndStats) {
  const int kUpdates = 16, kThreads = 3;
  std::vector<Transformer> models = make_versions(kUpdates + 1);
  Engine engine(models[0], nullptr, small_engine());
  std::atomic<bool> done{false};
  std::mutex mu;
  std::vector<std::pair<Request, RequestResult>> results;
  std::vector<std::thread> gens;
  for (int g = 0; g < kThreads; ++g) {
    gens.emplace_back([&, g] {
      std::mt19937 rng(77 + g);
      const std::optional<WeightUpdatePolicy> pols[] = {std::nullopt, WeightUpdatePolicy::kMixed,
                                                        WeightUpdatePolicy::kRestart,
                                                        WeightUpdatePolicy::kFinishOld};
      while (!done.load()) {
        std::vector<Request> batch;
        for (int i = 0; i < 3; ++i)
          batch.push_back(sampled_request(rng, std::uniform_int_distribution<int>(1, 12)(rng),
                                          pols[rng() % 4]));
        if (rng() % 3 == 0) batch[0].params.n = 2;
        std::vector<RequestResult> out = engine.generate(batch);
        std::lock_guard<std::mutex> lock(mu);
        for (size_t i = 0; i < batch.size(); ++i) results.emplace_back(batch[i], out[i]);
      }
    });
  }
  std::thread stats([&] {
    uint64_t last = 0;
    while (!done.load()) {
      EngineStats s = engine.stats();
      EXPECT_GE(s.policy_version, last);
      last = s.policy_version;
      EXPECT_EQ(engine.model_config().vocab_size, 96);
      EXPECT_EQ(engine.n_cuda_graphs(), 0u);
      EXPECT_GE(engine.policy_version(), last);
      std::this_thread::yield();
    }
  });
  for (int v = 1; v <= kUpdates; ++v) {
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
    EXPECT_EQ(engine.update_weights(models[static_cast<size_t>(v)]), static_cast<uint64_t>(v));
    if (v % 4 == 0) {
      EXPECT_EQ(engine.check_integrity(), "");
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  done = true;
  for (auto& t : gens) t.join();
  stats.join();
  EXPECT_EQ(engine.check_integrity(), "");

  double worst = 0;
  int n_samples = 0, n_mixed = 0, n_after_update = 0;
  for (const auto& [req, res] : results) {
    for (const Completion& c : res.completions) {
      ASSERT_NE(c.finish_reason, FinishReason::kError) << c.error;
      ++n_samples;
      WeightUpdatePolicy pol = req.params.weight_update_policy();
      if (pol != WeightUpdatePolicy::kMixed) {
        EXPECT_FALSE(c.mixed_versions);
      }
      n_mixed += c.mixed_versions;
      n_after_update += c.policy_version > 0;
      check_versions(models, req, c, worst);
    }
  }
  std::printf(
      "[updates] %d samples, %d mixed (marked), %d on updated weights, max |logprob err| "
      "%.2e, restarts %lld\n",
      n_samples, n_mixed, n_after_update, worst, static_cast<long long>(engine.stats().restarts));
  EXPECT_GT(n_samples, 50);
  EXPECT_GT(n_after_update, 0);
  EXPECT_LT(worst, 1e-4) << "a recorded version does not match the weights that made the token";
}

// The CUDA engine test's workload on the CPU with overlapped steps: prompts of up to 60 tokens
// prefilled in chunks (256-token steps, 16 rows), so updates land between a prompt's chunks too;
// such a sample's first span is marked stale_kv and every other span is checked exactly.
TEST(EngineUpdates, ChunkedPromptsAndOverlappedStepsAcrossUpdates) {
  EngineConfig ec;
  ec.overlap_steps = 1;
  test::concurrent_generation_and_updates(Device::cpu(), false, ec);
}

// A long request in flight; one update in the middle. Returns the completion and the number of
// tokens streamed before the update was called.
struct Spanned {
  Completion c;
  int streamed_before = 0;
  bool saw_restart = false;
  uint64_t version = 0;
  int64_t restarts = 0;  // engine.stats().restarts afterwards (landed_mid_run)
};
Spanned across_one_update(Engine& engine, const Transformer& next, const Request& r) {
  Spanned out;
  RequestHandlePtr h = engine.submit(r);
  StreamEvent ev;
  while (out.streamed_before < 5 && h->next(ev))
    out.streamed_before += static_cast<int>(ev.tokens.size());
  out.version = engine.update_weights(next);
  while (h->next(ev)) out.saw_restart = out.saw_restart || ev.restarted;
  out.c = h->wait().completions[0];
  return out;
}

// The tiny model can produce all 120 tokens before this thread has read the fifth one (a loaded
// 2-core box): then the update lands after the sample ended and there is nothing to check. Such
// a run is repeated on a fresh engine (its tokens are still checked to be all old-version).
Spanned landed_mid_run(const std::vector<Transformer>& models, const Request& r, int* attempts) {
  Spanned s;
  for (*attempts = 1; *attempts <= 10; ++*attempts) {
    Engine engine(models[0], nullptr, small_engine());
    s = across_one_update(engine, models[1], r);
    s.restarts = engine.stats().restarts;
    EXPECT_EQ(engine.check_integrity(), "");
    const bool landed = s.saw_restart || s.c.versions.size() > 1;
    if (landed) break;
    EXPECT_EQ(s.c.policy_version, 0u);
    EXPECT_LT(logprob_error(models[0], r.prompt, s.c, 0, s.c.tokens.size()), 1e-4);
  }
  return s;
}

Request long_request(WeightUpdatePolicy pol) {
  std::mt19937 rng(5);
  Request r = sampled_request(rng, 120, pol);
  return r;
}

TEST(EngineUpdates, MixedPolicyMarksTheSample) {
  std::vector<Transformer> models = make_versions(2);
  Request r = long_request(WeightUpdatePolicy::kMixed);
  int attempts = 0;
  Spanned s = landed_mid_run(models, r, &attempts);
  ASSERT_LE(attempts, 10) << "the update never landed mid-generation";
  EXPECT_EQ(s.version, 1u);
  ASSERT_EQ(s.c.tokens.size(), 120u);
  EXPECT_TRUE(s.c.mixed_versions);
  ASSERT_EQ(s.c.versions.size(), 2u);
  EXPECT_EQ(s.c.versions[0].version, 0u);
  EXPECT_EQ(s.c.versions[1].version, 1u);
  EXPECT_FALSE(s.c.versions[0].stale_kv);  // the prompt and first tokens: all version 0
  EXPECT_TRUE(s.c.versions[1].stale_kv);   // over version 0's KV
  EXPECT_GE(s.c.versions[1].first_token, s.streamed_before);
  EXPECT_FALSE(s.saw_restart);
  // The tokens before the update are exactly the old weights'.
  EXPECT_LT(
      logprob_error(models[0], r.prompt, s.c, 0, static_cast<size_t>(s.c.versions[1].first_token)),
      1e-4);
}

TEST(EngineUpdates, RestartPolicyStartsAgainOnTheNewWeights) {
  std::vector<Transformer> models = make_versions(2);
  Request r = long_request(WeightUpdatePolicy::kRestart);
  int attempts = 0;
  Spanned s = landed_mid_run(models, r, &attempts);
  ASSERT_LE(attempts, 10) << "the update never landed mid-generation";
  EXPECT_TRUE(s.saw_restart);
  ASSERT_EQ(s.c.tokens.size(), 120u);
  EXPECT_FALSE(s.c.mixed_versions);
  ASSERT_EQ(s.c.versions.size(), 1u);
  EXPECT_EQ(s.c.policy_version, 1u);
  EXPECT_LT(logprob_error(models[1], r.prompt, s.c, 0, s.c.tokens.size()), 1e-4);
  EXPECT_EQ(s.restarts, 1);
}

TEST(EngineUpdates, FinishOldPolicyDelaysTheUpdate) {
  std::vector<Transformer> models = make_versions(2);
  Engine engine(models[0], nullptr, small_engine());
  Request r = long_request(WeightUpdatePolicy::kFinishOld);
  Spanned s = across_one_update(engine, models[1], r);
  EXPECT_EQ(s.version, 1u);
  ASSERT_EQ(s.c.tokens.size(), 120u);
  EXPECT_FALSE(s.c.mixed_versions);
  EXPECT_EQ(s.c.policy_version, 0u) << "finished on the weights it started with";
  EXPECT_LT(logprob_error(models[0], r.prompt, s.c, 0, s.c.tokens.size()), 1e-4);
  // run_batch defaults to kFinishOld: one version per sample, with behaviour logprobs.
  std::vector<std::vector<RolloutSample>> rb = engine.run_batch({r.prompt}, [] {
    SamplingParams p;
    p.max_tokens = 4;
    p.n = 2;
    return p;
  }());
  ASSERT_EQ(rb[0].size(), 2u);
  for (const RolloutSample& x : rb[0]) {
    EXPECT_EQ(x.policy_version, 1u);
    EXPECT_FALSE(x.mixed_versions);
    EXPECT_EQ(x.logprobs.size(), x.tokens.size());
  }
}

TEST(EngineUpdates, UpdateDropsThePrefixCache) {
  std::vector<Transformer> models = make_versions(2);
  Engine engine(models[0], nullptr, small_engine());
  Request r;
  for (int i = 0; i < 40; ++i) r.prompt.push_back(i % 90);
  r.params.temperature = 0;
  r.params.max_tokens = 2;
  EXPECT_EQ(engine.generate({r})[0].completions[0].cached_tokens, 0);
  EXPECT_GT(engine.generate({r})[0].completions[0].cached_tokens, 0) << "second time: a prefix hit";
  engine.update_weights(models[1]);
  EXPECT_EQ(engine.generate({r})[0].completions[0].cached_tokens, 0)
      << "no KV of the old weights may be reused";
  EXPECT_EQ(engine.check_integrity(), "");
}

// Fairness: while other threads keep the engine busy, each update takes effect within about one
// step of being called (the loop used to re-take its lock at once and run hundreds of steps).
TEST(EngineUpdates, UpdateTakesEffectAtTheNextStepBoundary) {
  const int kUpdates = 30;
  std::vector<Transformer> models = make_versions(2);
  Engine engine(models[0], nullptr, small_engine());
  std::atomic<bool> done{false};
  std::vector<std::thread> gens;
  for (int g = 0; g < 3; ++g) {
    gens.emplace_back([&, g] {
      std::mt19937 rng(11 + g);
      while (!done.load()) {
        std::vector<Request> batch;
        for (int i = 0; i < 2; ++i)
          batch.push_back(sampled_request(rng, 60, WeightUpdatePolicy::kMixed));
        engine.generate(batch);
      }
    });
  }
  while (engine.stats().steps < 20) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::vector<double> wait_ms;
  int64_t worst_steps = 0, worst_wait_steps = 0;
  for (int k = 0; k < kUpdates; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    int64_t s0 = engine.stats().steps;
    auto t0 = Clock::now();
    engine.update_weights(models[static_cast<size_t>(k % 2 == 0 ? 1 : 0)]);
    wait_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    EngineStats after = engine.stats();
    worst_steps = std::max(worst_steps, after.steps - s0);
    worst_wait_steps = std::max(worst_wait_steps, after.update_wait_steps);
  }
  int64_t steps_total = engine.stats().steps;
  done = true;
  for (auto& t : gens) t.join();
  std::sort(wait_ms.begin(), wait_ms.end());
  std::printf(
      "[updates] %d updates under load: wait p50 %.3f ms, p99 %.3f ms, max %.3f ms; at "
      "most %lld steps ran between reaching the step gate and effect, %lld between the call and "
      "effect (%lld steps in all)\n",
      kUpdates, wait_ms[wait_ms.size() / 2], wait_ms[wait_ms.size() * 99 / 100], wait_ms.back(),
      static_cast<long long>(worst_wait_steps), static_cast<long long>(worst_steps),
      static_cast<long long>(steps_total));
  // Counted from the update's announcement at the gate: only the step in flight may finish, or
  // two with overlapped steps (VELA_OVERLAP_STEPS=1: the next was launched before the call). (The
  // count from this thread's call also includes any steps run while this thread was descheduled
  // before it reached the gate, which on a loaded machine is unbounded: printed, not asserted.)
  EXPECT_LE(worst_wait_steps, engine.config().overlap_steps == 1 ? 2 : 1);
  EXPECT_GE(worst_steps, worst_wait_steps);
  EXPECT_EQ(engine.check_integrity(), "");
}

}  // namespace
}  // namespace vela
