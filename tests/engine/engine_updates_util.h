// Weight-update test helpers shared by the CPU and CUDA engine tests: a recorded token's
// log-probability against a recompute with given weights, and the concurrent generation +
// updates workload (tests/engine/test_engine_updates.cpp, tests/cuda/test_cuda_engine_updates.cpp).
#pragma once

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
#include <vector>

#include "core/json.h"
#include "engine/engine.h"

namespace vela::test {

// The model of concurrent_generation_and_updates (4 layers, GQA, vocab 512).
inline ModelConfig updates_config() {
  json c = {
      {"model_type", "qwen3"},       {"vocab_size", 512},      {"hidden_size", 256},
      {"intermediate_size", 512},    {"num_hidden_layers", 4}, {"num_attention_heads", 4},
      {"num_key_value_heads", 2},    {"head_dim", 64},         {"max_position_embeddings", 1024},
      {"tie_word_embeddings", false}};
  return ModelConfig::from_json(c, "test");
}

// The largest |recorded - recomputed| log-probability over tokens [first, last) of c, recomputed
// by m's dense forward over prompt + tokens (on m's device); first_bad (when given): the first
// token whose error exceeds bad_above, or -1.
inline double logprob_error(const Transformer& m, const std::vector<int32_t>& prompt,
                            const Completion& c, size_t first, size_t last,
                            int* first_bad = nullptr, double bad_above = 2e-3) {
  std::vector<int32_t> seq = prompt;
  seq.insert(seq.end(), c.tokens.begin(), c.tokens.end());
  const int64_t t = static_cast<int64_t>(seq.size()), vocab = m.config.vocab_size;
  Tensor ids = Tensor::from_vector(seq, {1, t}).to(m.device());
  Tensor logits = m.forward_dense(ids).to(Device::cpu());
  double worst = 0;
  if (first_bad != nullptr) *first_bad = -1;
  for (size_t i = first; i < last; ++i) {
    const float* row = logits.data<float>() + (static_cast<int64_t>(prompt.size() + i) - 1) * vocab;
    double mx = *std::max_element(row, row + vocab), sum = 0;
    for (int64_t j = 0; j < vocab; ++j) sum += std::exp(row[j] - mx);
    const double err = std::abs(row[c.tokens[i]] - mx - std::log(sum) - c.logprobs[i].logprob);
    if (first_bad != nullptr && *first_bad < 0 && err > bad_above) *first_bad = static_cast<int>(i);
    worst = std::max(worst, err);
  }
  return worst;
}

// Four threads generating (prompts of 1-60 tokens, so prompts are prefilled in chunks) while this
// one pushes 40 updates cycling through 3 weight sets (f32, on `device`), then every sample's
// versions checked: spans well-formed, mixed samples marked, and the tokens of a span on its own
// version's KV recomputed with that version's weights. all_policies: the samples draw mixed /
// restart / finish (an update then also waits for the finish samples in flight); else all are
// mixed and the wait is the step boundary alone. ec: the engine's settings (its KV shape is
// set here).
inline void concurrent_generation_and_updates(Device device, bool all_policies, EngineConfig ec) {
  const int kVersions = 3, kUpdates = 40;
  std::vector<Transformer> models;
  for (int v = 0; v < kVersions; ++v)
    models.push_back(Transformer::random(updates_config(), DType::kF32, device, 500 + v, 0.05f));
  ec.max_seqs = 16;
  ec.max_ctx = 512;
  ec.page_size = 16;
  ec.max_tokens_per_step = 256;
  Engine engine(models[0], nullptr, ec);
  const size_t graphs_at_start = engine.n_cuda_graphs();
  std::atomic<bool> done{false};
  std::mutex mu;
  std::vector<std::pair<Request, Completion>> results;
  std::atomic<int> n_results{0};
  std::vector<std::thread> gens;
  for (int g = 0; g < 4; ++g) {
    gens.emplace_back([&, g] {
      std::mt19937 rng(9 + g);
      const WeightUpdatePolicy pols[] = {WeightUpdatePolicy::kMixed, WeightUpdatePolicy::kRestart,
                                         WeightUpdatePolicy::kFinishOld};
      while (!done.load()) {
        std::vector<Request> batch(4);
        for (Request& r : batch) {
          int len = std::uniform_int_distribution<int>(1, 60)(rng);
          for (int i = 0; i < len; ++i) r.prompt.push_back(static_cast<int32_t>(rng() % 512));
          r.params.temperature = 1.0f;
          r.params.seed = rng();
          r.params.max_tokens = std::uniform_int_distribution<int>(1, 64)(rng);
          r.params.ignore_eos = true;
          r.params.logprobs = true;
          r.params.on_weight_update = all_policies ? pols[rng() % 3] : WeightUpdatePolicy::kMixed;
        }
        std::vector<RequestResult> out = engine.generate(batch);
        std::lock_guard<std::mutex> lock(mu);
        for (size_t i = 0; i < batch.size(); ++i)
          results.emplace_back(batch[i], out[i].completions[0]);
        n_results += static_cast<int>(batch.size());
      }
    });
  }
  std::vector<double> wait_ms;
  // worst_steps: steps between the call and its effect, which on a loaded machine include steps
  // run while this thread was descheduled before reaching the step gate; worst_wait_steps: from
  // the gate (EngineStats::update_wait_steps), what the engine bounds.
  int64_t worst_steps = 0, worst_wait_steps = 0;
  while (engine.stats().steps < 10) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (int k = 1; k <= kUpdates; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    size_t v = static_cast<size_t>(k % kVersions);
    // "Train" on this thread's stream (CUDA): the update must be ordered after it on the engine's.
    Tensor scratch = Tensor::empty({1 << 20}, DType::kF32, device);
    scratch.zero_();
    int64_t s0 = engine.stats().steps;
    auto t0 = std::chrono::steady_clock::now();
    engine.update_weights(models[v]);
    wait_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    const EngineStats after = engine.stats();
    worst_steps = std::max(worst_steps, after.steps - s0);
    worst_wait_steps = std::max(worst_wait_steps, after.update_wait_steps);
  }
  // A loaded machine (the CPU run beside other tests) may finish few samples during the updates:
  // generation goes on until enough have (bounded), so the checks below see a real population.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (n_results.load() <= 48 && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  done = true;
  for (auto& t : gens) t.join();
  EXPECT_EQ(engine.check_integrity(), "");

  // Versions cycle through kVersions weight sets: version u was served by models[u % kVersions].
  double worst = 0;
  int n = 0, mixed = 0, stale_first = 0;
  for (const auto& [req, c] : results) {
    ASSERT_NE(c.finish_reason, FinishReason::kError) << c.error;
    if (c.tokens.empty()) continue;
    ++n;
    if (req.params.weight_update_policy() != WeightUpdatePolicy::kMixed) {
      EXPECT_FALSE(c.mixed_versions);
    }
    mixed += c.mixed_versions;
    for (size_t k = 1; k < c.versions.size(); ++k) EXPECT_TRUE(c.versions[k].stale_kv);
    EXPECT_EQ(c.mixed_versions, c.versions.size() > 1 || c.versions[0].stale_kv);
    size_t last =
        c.versions.size() > 1 ? static_cast<size_t>(c.versions[1].first_token) : c.tokens.size();
    // Part of the prompt's KV written before an update (a prompt prefilled in chunks): the first
    // span is not exactly its version's either.
    stale_first += c.versions[0].stale_kv;
    if (c.versions[0].stale_kv) continue;
    const double err =
        logprob_error(models[c.versions[0].version % kVersions], req.prompt, c, 0, last);
    if (err >= 2e-3) {
      // Which weights (if any) explain the span, and where it goes wrong: a version recorded
      // for another set's tokens, or KV that no single set computed.
      std::string spans, under;
      for (const VersionSpan& v : c.versions)
        spans += " (" + std::to_string(v.first_token) + ": v" + std::to_string(v.version) +
                 (v.stale_kv ? " stale" : "") + ")";
      for (int u = 0; u < kVersions; ++u) {
        int bad = -1;
        const double e = logprob_error(models[u], req.prompt, c, 0, last, &bad);
        under += " set " + std::to_string(u) + ": " + std::to_string(e) + " from token " +
                 std::to_string(bad) + ";";
      }
      ADD_FAILURE() << "prompt " << req.prompt.size() << " tokens, " << c.tokens.size()
                    << " generated, mixed " << c.mixed_versions << ", spans" << spans
                    << "; first span's error under" << under;
    }
    worst = std::max(worst, err);
  }
  std::sort(wait_ms.begin(), wait_ms.end());
  std::printf(
      "[updates, %s] %s: %d samples (%d mixed, marked; %d from a prompt's KV written across an "
      "update), %d updates: wait p50 %.3f ms, "
      "p99 %.3f ms, max %.3f ms, at most %lld steps between the step gate and effect (%lld "
      "from the call); max |logprob err| %.2e; graphs %zu -> %zu; restarts %lld\n",
      device.is_cuda() ? "cuda" : "cpu", all_policies ? "all policies" : "mixed only", n, mixed,
      stale_first, kUpdates, wait_ms[wait_ms.size() / 2], wait_ms[wait_ms.size() * 99 / 100],
      wait_ms.back(), static_cast<long long>(worst_wait_steps), static_cast<long long>(worst_steps),
      worst, graphs_at_start, engine.n_cuda_graphs(),
      static_cast<long long>(engine.stats().restarts));
  EXPECT_GT(n, 40);
  if (!all_policies) {
    // The step in flight (and, with overlapped steps, the one launched before it was read).
    EXPECT_LE(worst_wait_steps, engine.config().overlap_steps == 1 ? 2 : 1)
        << "an update must take effect at the next step boundary";
  }
  EXPECT_LT(worst, 2e-3) << "f32: a recorded version does not match its weights";
}

}  // namespace vela::test
