// Engine end-to-end on the CPU with the fixture models: greedy parity with the plain forward path
// (alone, in busy mixed batches, contiguous and paged KV with page sizes 1 and 16), prefix reuse,
// KV pressure with preemption, cancellation, stop strings across tokens, seeded sampling, n > 1,
// logprobs, and weight updates.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "core/json.h"
#include "engine/char_tokenizer.h"
#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "ops/softmax.h"

namespace vela {
namespace {

const std::string kModel = "fixtures/models/qwen3_qknorm";

struct Ref {
  std::vector<int32_t> prompt, greedy;
};
Ref reference(const std::string& dir) {
  std::ifstream f(dir + "/reference.json");
  json j = json::parse(f);
  return {j["prompt_ids"].get<std::vector<int32_t>>(), j["greedy_ids"].get<std::vector<int32_t>>()};
}

// Greedy continuation by the plain dense forward path (the parity reference for any prompt).
std::vector<int32_t> plain_greedy(const Transformer& m, std::vector<int32_t> seq, int n) {
  std::vector<int32_t> out;
  for (int s = 0; s < n; ++s) {
    int64_t t = static_cast<int64_t>(seq.size());
    Tensor l = m.forward_dense(Tensor::from_vector(seq, {1, t}));
    const float* row = l.data<float>() + (t - 1) * m.config.vocab_size;
    int32_t next = static_cast<int32_t>(std::max_element(row, row + m.config.vocab_size) - row);
    out.push_back(next);
    seq.push_back(next);
  }
  return out;
}

using test::greedy_request;
using test::KvVariant;

// Prompts of mixed lengths derived from the fixture prompt.
std::vector<std::vector<int32_t>> mixed_prompts(const std::vector<int32_t>& base) {
  std::vector<std::vector<int32_t>> out;
  for (int len : {1, 3, 24, 7, 16, 17, 2, 11}) {
    std::vector<int32_t> p;
    for (int i = 0; i < len; ++i) p.push_back(base[static_cast<size_t>((i * 5 + len) % base.size())]);
    out.push_back(p);
  }
  return out;
}

class EngineParity : public ::testing::TestWithParam<KvVariant> {};

TEST_P(EngineParity, GreedyEqualsPlainForwardAloneAndInBusyBatches) {
  const KvVariant v = GetParam();
  Ref ref = reference(kModel);
  Transformer plain = Transformer::load(kModel);
  EngineConfig cfg;
  cfg.kv_strategy = v.strategy;
  cfg.page_size = v.page_size;
  cfg.max_seqs = 4;              // fewer rows than requests: rows get recycled
  cfg.max_tokens_per_step = 13;  // forces chunked prefill mixed with decode
  cfg.max_ctx = 64;
  Engine engine(Transformer::load(kModel), nullptr, cfg);
  // Alone: the fixture prompt reproduces transformers' greedy ids.
  auto alone = engine.generate({greedy_request(ref.prompt, 8)});
  EXPECT_EQ(alone[0].completions[0].tokens, ref.greedy);
  // Busy: every request's tokens equal its plain-path greedy continuation.
  std::vector<Request> reqs;
  auto prompts = mixed_prompts(ref.prompt);
  for (const auto& p : prompts) reqs.push_back(greedy_request(p, 6));
  auto results = engine.generate(reqs);
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(results[i].completions[0].tokens, plain_greedy(plain, prompts[i], 6)) << "request " << i;
  EngineStats st = engine.stats();
  EXPECT_EQ(st.running, 0);
  EXPECT_EQ(st.kv_pages_used, st.kv_pages_cached) << "pages leaked";
}

INSTANTIATE_TEST_SUITE_P(Strategies, EngineParity,
                         ::testing::Values(KvVariant{"contiguous", "contiguous", 1},
                                           KvVariant{"paged1", "paged", 1},
                                           KvVariant{"paged16", "paged", 16}),
                         test::kv_variant_name);

TEST(Engine, PrefixReuseReportsCachedTokensAndKeepsOutput) {
  Ref ref = reference(kModel);
  EngineConfig cfg;
  cfg.page_size = 4;
  cfg.max_ctx = 64;
  Engine engine(Transformer::load(kModel), nullptr, cfg);
  auto first = engine.generate({greedy_request(ref.prompt, 8)});
  EXPECT_EQ(first[0].completions[0].cached_tokens, 0);
  auto second = engine.generate({greedy_request(ref.prompt, 8)});
  EXPECT_GT(second[0].completions[0].cached_tokens, 0);
  EXPECT_LT(second[0].completions[0].cached_tokens, static_cast<int32_t>(ref.prompt.size()));
  EXPECT_EQ(second[0].completions[0].tokens, ref.greedy);
  EXPECT_GT(engine.stats().prefix_hit_tokens, 0);
}

TEST(Engine, KvPressurePreemptsAndStillCompletesEverything) {
  Ref ref = reference(kModel);
  Transformer plain = Transformer::load(kModel);
  EngineConfig cfg;
  cfg.page_size = 4;
  cfg.max_seqs = 8;
  cfg.max_ctx = 40;
  cfg.n_kv_slots = 48;  // room for ~1.5 requests at a time
  Engine engine(Transformer::load(kModel), nullptr, cfg);
  std::vector<Request> reqs;
  auto prompts = mixed_prompts(ref.prompt);
  for (const auto& p : prompts) reqs.push_back(greedy_request(p, 10));
  auto results = engine.generate(reqs);
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(results[i].completions[0].tokens, plain_greedy(plain, prompts[i], 10)) << i;
  EngineStats st = engine.stats();
  EXPECT_GT(st.preemptions, 0);
  EXPECT_EQ(st.kv_pages_used, st.kv_pages_cached);
}

TEST(Engine, CancellationTakesEffectPromptly) {
  // A random model big enough that 2000 tokens take far longer than the cancel round trip.
  ModelConfig mc = ModelConfig::from_json(json::parse(R"({"model_type": "llama",
    "vocab_size": 512, "hidden_size": 256, "num_hidden_layers": 4, "intermediate_size": 512,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 4096})"));
  EngineConfig cfg;
  cfg.max_ctx = 2100;
  Engine engine(Transformer::random(mc, DType::kF32, Device::cpu(), 7), nullptr, cfg);
  RequestHandlePtr h = engine.submit(greedy_request({1, 2, 3}, 2000));
  StreamEvent ev;
  ASSERT_TRUE(h->next(ev));  // first token arrived: the request is running
  h->cancel();
  RequestResult res = h->wait();
  EXPECT_EQ(res.completions[0].finish_reason, FinishReason::kCancelled);
  EXPECT_LT(res.completions[0].tokens.size(), 2000u);
  // Stats are published at the end of the scheduler step that emitted the final event.
  for (int i = 0; i < 100 && engine.stats().running != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(engine.stats().running, 0);
  EXPECT_EQ(engine.stats().kv_pages_used, engine.stats().kv_pages_cached);
}

TEST(Engine, SeededSamplingIsReproducibleAndNSamplesDiffer) {
  Ref ref = reference(kModel);
  EngineConfig cfg;
  cfg.max_ctx = 64;
  Engine engine(Transformer::load(kModel), nullptr, cfg);
  Request r;
  r.prompt = ref.prompt;
  r.params.temperature = 1.0f;
  r.params.max_tokens = 12;
  r.params.seed = 1234;
  r.params.n = 3;
  r.params.ignore_eos = true;
  auto a = engine.generate({r});
  // Same request inside a busier batch: identical samples.
  Request other = greedy_request({5, 6, 7}, 9);
  auto b = engine.generate({other, r, other});
  ASSERT_EQ(a[0].completions.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(a[0].completions[i].tokens, b[1].completions[i].tokens);
  EXPECT_NE(a[0].completions[0].tokens, a[0].completions[1].tokens);
}

TEST(Engine, LogprobsEqualLogSoftmaxOfModelLogits) {
  Ref ref = reference(kModel);
  Transformer plain = Transformer::load(kModel);
  EngineConfig cfg;
  cfg.max_ctx = 64;
  Engine engine(Transformer::load(kModel), nullptr, cfg);
  Request r = greedy_request(ref.prompt, 3);
  r.params.logprobs = true;
  r.params.top_logprobs = 4;
  auto res = engine.generate({r});
  const Completion& c = res[0].completions[0];
  ASSERT_EQ(c.logprobs.size(), 3u);
  std::vector<int32_t> seq = ref.prompt;
  for (size_t s = 0; s < 3; ++s) {
    int64_t t = static_cast<int64_t>(seq.size());
    Tensor l = plain.forward_dense(Tensor::from_vector(seq, {1, t})).view({t, -1});
    Tensor last = l.slice(0, t - 1, t).contiguous();
    Tensor lp = Tensor::empty(last.shape(), DType::kF32);
    ops::log_softmax(last, lp);
    EXPECT_NEAR(c.logprobs[s].logprob, lp.data<float>()[c.tokens[s]], 1e-4);
    ASSERT_EQ(c.logprobs[s].top.size(), 4u);
    EXPECT_EQ(c.logprobs[s].top[0].first, c.tokens[s]);  // greedy: the best token
    seq.push_back(c.tokens[s]);
  }
}

TEST(Engine, UpdateWeightsBumpsVersionAndDropsPrefixCache) {
  Ref ref = reference(kModel);
  EngineConfig cfg;
  cfg.page_size = 4;
  cfg.max_ctx = 64;
  Engine engine(Transformer::load(kModel), nullptr, cfg);
  auto before = engine.run_batch({ref.prompt}, [] {
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = 8;
    p.ignore_eos = true;
    return p;
  }());
  EXPECT_EQ(before[0][0].policy_version, 0u);
  EXPECT_EQ(before[0][0].logprobs.size(), 8u);
  EXPECT_GT(engine.stats().kv_pages_cached, 0);
  uint64_t v = engine.update_weights(Transformer::load("fixtures/models/qwen3_qknorm"));
  EXPECT_EQ(v, 1u);
  EXPECT_EQ(engine.stats().kv_pages_cached, 0);
  auto after = engine.generate({greedy_request(ref.prompt, 8)});
  EXPECT_EQ(after[0].completions[0].policy_version, 1u);
  EXPECT_EQ(after[0].completions[0].cached_tokens, 0);
}

TEST(Engine, BadRequestsAreClearErrors) {
  EngineConfig cfg;
  cfg.max_ctx = 32;
  Engine engine(Transformer::load(kModel), nullptr, cfg);
  EXPECT_THROW(engine.submit(greedy_request({}, 4)), InvalidArgument);
  EXPECT_THROW(engine.submit(greedy_request({1, 999}, 4)), InvalidArgument);
  EXPECT_THROW(engine.submit(greedy_request({1, 2}, 40)), InvalidArgument);
  Request stop = greedy_request({1, 2}, 4);
  stop.params.stop = {"x"};
  EXPECT_THROW(engine.submit(stop), InvalidArgument);  // no tokenizer
}

}  // namespace
}  // namespace vela

namespace vela {
namespace {

// n > 1 samples fork sample 0 after its prompt is computed: the prompt is computed once, every
// sample reports the same cached_tokens, and the tokens equal those of an engine that cannot fork
// (max_seqs 1: each sample runs alone and recomputes what the prefix cache lacks).
TEST(Engine, NSamplesShareThePromptsPages) {
  Ref ref = reference(kModel);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(ref.prompt[static_cast<size_t>(i) % ref.prompt.size()]);
  Request r;
  r.prompt = prompt;
  r.params.temperature = 0.8f;
  r.params.max_tokens = 10;
  r.params.seed = 77;
  r.params.n = 4;
  r.params.ignore_eos = true;

  // Four 16-token pages: the leader's prompt takes three, one sibling forks into the fourth and the
  // rest run later under preemption, recomputing what the prefix cache does not hold.
  EngineConfig tight;
  tight.max_ctx = 64;
  tight.max_seqs = 8;
  tight.n_kv_slots = 64;
  Engine pressured(Transformer::load(kModel), nullptr, tight);
  auto b = pressured.generate({r});
  EXPECT_GT(pressured.stats().prompt_tokens, 40);

  for (const char* strategy : {"paged", "contiguous"}) {
    SCOPED_TRACE(strategy);
    EngineConfig cfg;
    cfg.max_ctx = 64;
    cfg.kv_strategy = strategy;
    cfg.max_seqs = 8;
    Engine shared(Transformer::load(kModel), nullptr, cfg);
    auto a = shared.generate({r});
    EXPECT_EQ(shared.stats().prompt_tokens, 40);  // computed once for the four samples
    ASSERT_EQ(a[0].completions.size(), 4u);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(a[0].completions[i].tokens, b[0].completions[i].tokens) << "sample " << i;
      EXPECT_EQ(a[0].completions[i].cached_tokens, 0);
    }
    EXPECT_NE(a[0].completions[0].tokens, a[0].completions[1].tokens);
    EXPECT_EQ(shared.stats().running, 0);
    EXPECT_EQ(shared.stats().kv_pages_used, shared.stats().kv_pages_cached);  // nothing leaked
  }
}

// Prefill and decode take every activation from the executor's arena: a whole generation
// (admission, chunked prefill, 60 decode steps, sampling, stop checks) allocates no tensor.
TEST(Engine, GenerationAllocatesNoTensors) {
  Ref ref = reference(kModel);
  EngineConfig cfg;
  cfg.max_ctx = 64;
  cfg.max_tokens_per_step = 16;  // the prompt arrives in chunks
  cfg.max_seqs = 4;
  Engine engine(Transformer::load(kModel), nullptr, cfg);
  engine.generate({greedy_request(ref.prompt, 4)});  // warm-up
  const uint64_t before = storage_allocation_count();
  auto res = engine.generate({greedy_request(ref.prompt, 38), greedy_request({3, 4, 5}, 60)});
  EXPECT_EQ(storage_allocation_count(), before);
  EXPECT_EQ(res[1].completions[0].tokens.size(), 60u);
}

// Stop strings through the engine with a real tokenizer over the fixture's 128-token vocabulary
// (one printable character per token): the stop string spans two tokens, is not emitted, and the
// finish reason is stop with the matched string reported.
TEST(Engine, StopStringAcrossTokensEndsGenerationWithoutEmittingIt) {
  auto tok = test::char_tokenizer();
  Ref ref = reference(kModel);
  EngineConfig cfg;
  cfg.max_ctx = 64;
  Engine engine(Transformer::load(kModel), std::move(tok), cfg);
  auto free_run = engine.generate({greedy_request(ref.prompt, 12)});
  const Completion& full = free_run[0].completions[0];
  ASSERT_EQ(full.tokens.size(), 12u);
  // The text of tokens 4 and 5 (their last and first characters) is the stop string.
  std::string t4 = engine.tokenizer()->decode({full.tokens[4]});
  std::string t5 = engine.tokenizer()->decode({full.tokens[5]});
  std::string stop = t4.substr(t4.size() - 1) + t5.substr(0, 1);
  std::string before = engine.tokenizer()->decode(
      std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + 5));
  size_t first = (full.text).find(stop);
  ASSERT_NE(first, std::string::npos) << "text '" << full.text << "' t4 '" << t4 << "' t5 '" << t5 << "'";
  Request r = greedy_request(ref.prompt, 12);
  r.params.stop = {stop};
  auto stopped = engine.generate({r});
  const Completion& c = stopped[0].completions[0];
  EXPECT_EQ(c.finish_reason, FinishReason::kStop);
  EXPECT_EQ(c.stop_reason, stop);
  EXPECT_EQ(c.text, full.text.substr(0, first));
  EXPECT_LE(c.tokens.size(), 6u);
  EXPECT_EQ(full.text.substr(0, before.size()), before);
}

}  // namespace
}  // namespace vela
