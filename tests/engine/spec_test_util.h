// Shared by the speculative-decoding engine tests (test_spec.cpp, test_spec_constrained.cpp,
// spec/test_draft_model.cpp, spec/test_draft_constrained.cpp): the CPU fixture model with its busy
// engine configuration, seeded requests, a perturbed draft, the target's exact sampling
// distribution, and the cancellation of requests mid-speculation on a long-context random model.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/json.h"
#include "engine/engine.h"
#include "engine/spec/spec_config.h"
#include "model/transformer.h"

namespace vela::test {

inline const std::string kSpecFixtureModel = "fixtures/models/qwen3_qknorm";

inline EngineConfig fixture_config(const std::string& strategy, int32_t page_size,
                                   const std::string& spec) {
  EngineConfig cfg;
  cfg.kv_strategy = strategy;
  cfg.page_size = page_size;
  cfg.max_seqs = 4;              // fewer rows than requests: rows recycled, batches mixed
  cfg.max_tokens_per_step = 13;  // chunked prefills beside decodes and verification rows
  cfg.max_ctx = 64;
  cfg.speculative = SpeculativeConfig::parse(spec);
  return cfg;
}

// The message of the InvalidArgument SpeculativeConfig::parse throws for `spec`, or "no error".
inline std::string spec_parse_error(const std::string& spec) {
  try {
    SpeculativeConfig::parse(spec);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "no error";
}

// Speculation by a draft model handed to the Engine directly (no draft_dir), k drafts a step.
inline SpeculativeConfig draft_speculation(int32_t k) {
  SpeculativeConfig c;
  c.method = SpeculativeConfig::Method::kDraft;
  c.k = k;
  return c;
}

// fixture_config with a draft model proposing k tokens.
inline EngineConfig draft_fixture_config(const std::string& strategy, int32_t page_size,
                                         int32_t k) {
  EngineConfig cfg = fixture_config(strategy, page_size, "off");
  cfg.speculative = draft_speculation(k);
  return cfg;
}

// A request of max_tokens tokens exactly (EOS ignored) at `temperature`, seeded.
inline Request make_request(std::vector<int32_t> prompt, int max_tokens, float temperature,
                            uint64_t seed) {
  Request r;
  r.prompt = std::move(prompt);
  r.params.temperature = temperature;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  r.params.seed = seed;
  return r;
}

// The fixture with its LM head perturbed: the same vocabulary, a different distribution (agrees
// with the target often, not always).
inline std::unique_ptr<Transformer> perturbed_draft(float noise, uint64_t seed) {
  auto d = std::make_unique<Transformer>(Transformer::load(kSpecFixtureModel));
  Tensor& w = d->lm_head.weight;
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> nd(0.0f, noise);
  float* x = w.data<float>();
  for (int64_t i = 0; i < w.numel(); ++i) x[i] += nd(rng);
  return d;
}

// The target's sampling distribution at the end of `seq` (temperature T, top-k), by the plain
// dense forward path.
inline std::vector<double> target_probs(const Transformer& m, const std::vector<int32_t>& seq,
                                        float T, int top_k) {
  int64_t t = static_cast<int64_t>(seq.size()), V = m.config.vocab_size;
  Tensor l = m.forward_dense(Tensor::from_vector(seq, {1, t}));
  const float* row = l.data<float>() + (t - 1) * V;
  std::vector<float> sorted(row, row + V);
  std::sort(sorted.begin(), sorted.end(), std::greater<float>());
  float kth = sorted[static_cast<size_t>(top_k - 1)], mx = sorted[0];
  std::vector<double> p(static_cast<size_t>(V), 0.0);
  double sum = 0;
  for (int64_t i = 0; i < V; ++i)
    if (row[i] >= kth) sum += p[static_cast<size_t>(i)] = std::exp((row[i] - mx) / T);
  for (double& x : p) x /= sum;
  return p;
}

// The engine of the cancellation tests: long contexts, 8 rows, small pages.
inline EngineConfig cancellation_config(SpeculativeConfig speculative) {
  EngineConfig cfg;
  cfg.max_ctx = 1024;
  cfg.page_size = 4;
  cfg.max_seqs = 8;
  cfg.speculative = std::move(speculative);
  return cfg;
}

// A random 64-token model with a 1024-token context (greedy from a repetitive prompt loops, so
// drafts are accepted).
inline Transformer long_context_model(uint64_t seed = 11) {
  ModelConfig mc = ModelConfig::from_json(json::parse(R"({"model_type": "llama",
    "vocab_size": 64, "hidden_size": 128, "num_hidden_layers": 2, "intermediate_size": 256,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 1024})"));
  return Transformer::random(mc, DType::kF32, Device::cpu(), seed);
}

// Cancels the requests of `handles` while they speculate: the even ones after their first event,
// the odd ones five events later, checking the engine's integrity after each cancellation round.
// may_finish: a request may end (its grammar) before its five events; otherwise each must come.
inline void cancel_mid_speculation(Engine& engine, std::vector<RequestHandlePtr>& handles,
                                   bool may_finish) {
  StreamEvent ev;
  for (auto& h : handles) ASSERT_TRUE(h->next(ev));
  for (size_t i = 0; i < handles.size(); i += 2) handles[i]->cancel();
  EXPECT_EQ(engine.check_integrity(), "");
  for (size_t i = 1; i < handles.size(); i += 2) {
    for (int j = 0; j < 5; ++j) {
      if (may_finish) {
        if (!handles[i]->next(ev)) break;
      } else {
        ASSERT_TRUE(handles[i]->next(ev));
      }
    }
    handles[i]->cancel();
    EXPECT_EQ(engine.check_integrity(), "");
  }
}

// After the cancelled requests have been waited for: gives the engine up to a second to retire
// them, then checks that nothing runs, no KV page leaked, speculation happened, and the caches
// (the draft's too) pass their integrity check.
inline void expect_drained_after_cancellation(Engine& engine) {
  for (int i = 0; i < 100 && engine.stats().running != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EngineStats st = engine.stats();
  EXPECT_EQ(st.running, 0);
  EXPECT_EQ(st.kv_pages_used, st.kv_pages_cached) << "pages leaked";
  EXPECT_GT(st.speculative.rows, 0);
  EXPECT_EQ(engine.check_integrity(), "");
}

}  // namespace vela::test
