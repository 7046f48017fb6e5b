// Overlapped steps (EngineConfig::overlap_steps, engine/scheduler.h) on the CPU, where they are
// forced on: the engine launches the next decode step before reading this one's samples, feeding
// it the sampled tokens from the sampler's output. Whatever the requests do (greedy, seeded
// sampling with n > 1, logprobs, stop tokens that end a sample while its next row is in flight,
// penalties, which turn overlap off while they run, cancellation, a full queue, weight updates),
// the results equal those of the same engine without overlap, nothing leaks and the KV cache
// stays consistent.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <thread>

#include "core/json.h"
#include "engine/engine.h"
#include "engine/engine_test_util.h"

namespace vela {
namespace {

const std::string kModel = "fixtures/models/qwen3_qknorm";

std::vector<int32_t> fixture_prompt() {
  std::ifstream f(kModel + "/reference.json");
  return json::parse(f)["prompt_ids"].get<std::vector<int32_t>>();
}

Request request(std::vector<int32_t> prompt, int max_tokens) {
  return test::greedy_request(std::move(prompt), max_tokens);
}

EngineConfig config(int overlap, int max_seqs = 8) {
  EngineConfig cfg;
  cfg.max_ctx = 64;
  cfg.page_size = 4;
  cfg.max_seqs = max_seqs;
  cfg.max_tokens_per_step = 64;
  cfg.overlap_steps = overlap;
  return cfg;
}

// The requests of one mixed workload; `stop_token` ends request 3 early (a token its free run
// produces a few steps in, so the sample finishes while its next row is already in flight).
std::vector<Request> workload(const std::vector<int32_t>& base, int32_t stop_token) {
  std::vector<Request> reqs;
  reqs.push_back(request(base, 24));                           // greedy, long
  Request sampled = request({base[1], base[2], base[3]}, 17);  // seeded sampling, n = 2
  sampled.params.temperature = 0.8f;
  sampled.params.top_p = 0.9f;
  sampled.params.seed = 99;
  sampled.params.n = 2;
  reqs.push_back(sampled);
  Request lp = request({base[4], base[0]}, 13);  // logprobs with top-3
  lp.params.logprobs = true;
  lp.params.top_logprobs = 3;
  reqs.push_back(lp);
  Request stopped = request(base, 20);
  stopped.params.stop_token_ids = {stop_token};
  reqs.push_back(stopped);
  reqs.push_back(request({base[5]}, 1));                               // finishes at its prefill
  Request seeded = request({base[2], base[6], base[1], base[3]}, 11);  // another seed
  seeded.params.temperature = 1.2f;
  seeded.params.top_k = 20;
  seeded.params.seed = 7;
  reqs.push_back(seeded);
  return reqs;
}

void expect_same_results(const std::vector<RequestResult>& a, const std::vector<RequestResult>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].completions.size(), b[i].completions.size()) << "request " << i;
    for (size_t k = 0; k < a[i].completions.size(); ++k) {
      const Completion& x = a[i].completions[k];
      const Completion& y = b[i].completions[k];
      EXPECT_EQ(x.tokens, y.tokens) << "request " << i << " sample " << k;
      EXPECT_EQ(x.finish_reason, y.finish_reason) << "request " << i << " sample " << k;
      ASSERT_EQ(x.logprobs.size(), y.logprobs.size()) << "request " << i;
      for (size_t s = 0; s < x.logprobs.size(); ++s) {
        EXPECT_NEAR(x.logprobs[s].logprob, y.logprobs[s].logprob, 1e-4) << "request " << i;
        ASSERT_EQ(x.logprobs[s].top.size(), y.logprobs[s].top.size());
        for (size_t j = 0; j < x.logprobs[s].top.size(); ++j)
          EXPECT_EQ(x.logprobs[s].top[j].first, y.logprobs[s].top[j].first) << "request " << i;
      }
    }
  }
}

void expect_clean(Engine& engine) {
  EngineStats st = engine.stats();
  EXPECT_EQ(st.running, 0);
  EXPECT_EQ(st.kv_pages_used, st.kv_pages_cached) << "pages leaked";
  EXPECT_EQ(engine.check_integrity(), "");
}

TEST(OverlapSteps, MixedWorkloadMatchesTheEngineWithoutOverlap) {
  const std::vector<int32_t> base = fixture_prompt();
  Engine plain(Transformer::load(kModel), nullptr, config(0));
  const int32_t stop_token =
      plain.generate({request(base, 20)})[0].completions[0].tokens[4];  // ends it at step 5
  const auto reference = plain.generate(workload(base, stop_token));
  ASSERT_EQ(reference[3].completions[0].finish_reason, FinishReason::kStop);
  EXPECT_EQ(plain.stats().overlapped_steps, 0);

  Engine overlapped(Transformer::load(kModel), nullptr, config(1));
  const auto got = overlapped.generate(workload(base, stop_token));
  expect_same_results(reference, got);
  EXPECT_GT(overlapped.stats().overlapped_steps, 10);
  expect_clean(overlapped);
  // Again on the warm engine (prefix cache hits, recycled rows and pages): the same results.
  expect_same_results(reference, overlapped.generate(workload(base, stop_token)));
  expect_clean(overlapped);
}

TEST(OverlapSteps, PenaltiesAndAFullQueueStillMatch) {
  // Two rows at most: the queue stays full, so overlap goes on while requests wait; a penalized
  // request turns it off while it runs (the sampler counts its last token on the host).
  const std::vector<int32_t> base = fixture_prompt();
  std::vector<Request> reqs;
  for (int i = 0; i < 5; ++i)
    reqs.push_back(request({base[static_cast<size_t>(i)], base[7]}, 9 + i));
  reqs[2].params.frequency_penalty = 0.7f;
  reqs[2].params.repetition_penalty = 1.3f;
  Engine plain(Transformer::load(kModel), nullptr, config(0, 2));
  Engine overlapped(Transformer::load(kModel), nullptr, config(1, 2));
  expect_same_results(plain.generate(reqs), overlapped.generate(reqs));
  EXPECT_GT(overlapped.stats().overlapped_steps, 0);
  expect_clean(overlapped);
}

TEST(OverlapSteps, CancellationAndWeightUpdatesWhileDecoding) {
  // A random model big enough that the cancel lands long before the sample could end.
  const ModelConfig mc = ModelConfig::from_json(json::parse(R"({"model_type": "llama",
    "vocab_size": 512, "hidden_size": 256, "num_hidden_layers": 4, "intermediate_size": 512,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 4096})"));
  EngineConfig cfg = config(1);
  cfg.max_ctx = 2100;
  Engine engine(Transformer::random(mc, DType::kF32, Device::cpu(), 7), nullptr, cfg);
  // A stream cancelled after a few tokens, beside two that run to their end (steps of one row
  // do not overlap: Scheduler::kOverlapMinRows).
  RequestHandlePtr keep = engine.submit(request({1, 2, 3}, 300));
  RequestHandlePtr keep2 = engine.submit(request({7, 8}, 300));
  RequestHandlePtr cancel = engine.submit(request({4, 5}, 2000));
  StreamEvent ev;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cancel->next(ev));
  cancel->cancel();
  // A weight update (the same weights) while `keep` decodes: it waits for the gate, which the
  // loop gives up only with no step in flight.
  engine.update_weights(Transformer::random(mc, DType::kF32, Device::cpu(), 7));
  RequestResult kept = keep->wait();
  keep2->wait();
  RequestResult cancelled = cancel->wait();
  EXPECT_EQ(cancelled.completions[0].finish_reason, FinishReason::kCancelled);
  EXPECT_LT(cancelled.completions[0].tokens.size(), 2000u);
  EXPECT_EQ(kept.completions[0].tokens.size(), 300u);
  EXPECT_GT(engine.stats().overlapped_steps, 100);
  cfg.overlap_steps = 0;
  Engine plain(Transformer::random(mc, DType::kF32, Device::cpu(), 7), nullptr, cfg);
  EXPECT_EQ(kept.completions[0].tokens,
            plain.generate({request({1, 2, 3}, 300)})[0].completions[0].tokens);
  for (int i = 0; i < 100 && engine.stats().running != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  expect_clean(engine);
}

TEST(OverlapSteps, DecodeAllocatesNoTensors) {
  const std::vector<int32_t> base = fixture_prompt();
  Engine engine(Transformer::load(kModel), nullptr, config(1, 4));
  engine.generate({request(base, 4), request({base[1]}, 4)});  // warm-up
  const uint64_t before = storage_allocation_count();
  auto res = engine.generate({request(base, 38), request({3, 4, 5}, 60)});
  EXPECT_EQ(storage_allocation_count(), before);
  EXPECT_EQ(res[1].completions[0].tokens.size(), 60u);
  EXPECT_GT(engine.stats().overlapped_steps, 30);
}

TEST(OverlapSteps, KvPressureAndTheLastContextPositionStillMatch) {
  // A pool for ~2 requests of 4: reserving the next positions fails now and then (the step after
  // is a normal one, which preempts); one request ends exactly at max_ctx.
  const std::vector<int32_t> base = fixture_prompt();
  std::vector<Request> reqs;
  reqs.push_back(request(base, 64 - static_cast<int>(base.size())));  // to the last position
  for (int i = 0; i < 3; ++i)
    reqs.push_back(request({base[static_cast<size_t>(i)], base[9], base[3]}, 20 + 5 * i));
  auto cfg = [](int overlap) {
    EngineConfig c = config(overlap, 4);
    c.n_kv_slots = 96;
    return c;
  };
  // All four enter at one step boundary: admitted one by one, the first could be well on its way
  // before the others arrive, and a loaded machine then saw no preemption at all.
  Engine plain(Transformer::load(kModel), nullptr, cfg(0));
  Engine overlapped(Transformer::load(kModel), nullptr, cfg(1));
  const auto reference = test::run_together(plain, reqs);
  expect_same_results(reference, test::run_together(overlapped, reqs));
  EXPECT_EQ(reference[0].completions[0].tokens.size(), 64 - base.size());
  EXPECT_GT(overlapped.stats().preemptions, 0);
  EXPECT_GT(overlapped.stats().overlapped_steps, 0);
  expect_clean(overlapped);
}

TEST(OverlapSteps, SpeculativeEnginesNeverOverlap) {
  // Drafts come from the host's last token: the engine resolves overlap_steps to 0.
  EngineConfig cfg = config(1);
  cfg.speculative = SpeculativeConfig::parse("ngram");
  Engine engine(Transformer::load(kModel), nullptr, cfg);
  EXPECT_EQ(engine.config().overlap_steps, 0);
  engine.generate({request(fixture_prompt(), 12)});
  EXPECT_EQ(engine.stats().overlapped_steps, 0);
}

TEST(OverlapSteps, DynamicRopeModelsNeverOverlap) {
  // Dynamic NTK scales every row's rotary by the batch's longest sequence: a finished task's row
  // left in the step in flight would change the others' tokens, so such models keep it off.
  const std::string dynamic = "fixtures/models/llama_mqa_dynamic";
  Engine engine(Transformer::load(dynamic), nullptr, config(1));
  EXPECT_EQ(engine.config().overlap_steps, 0);
  engine.generate({request({1, 2, 3}, 6), request({4, 5}, 3)});
  EXPECT_EQ(engine.stats().overlapped_steps, 0);
}

// Lone decode rows overlap by default (session 52: the step's copies on side streams and the
// tokens written in place made it pay, 1.13 -> 1.12 ms at 1K on an H100): the same tokens and
// logprobs as without overlap.
TEST(OverlapSteps, SingleRowStepsOverlap) {
  std::vector<Request> reqs{request(fixture_prompt(), 20)};
  reqs[0].params.logprobs = true;
  reqs[0].params.top_logprobs = 2;
  Engine plain(Transformer::load(kModel), nullptr, config(0));
  const std::vector<RequestResult> want = plain.generate(reqs);
  Engine engine(Transformer::load(kModel), nullptr, config(1));
  expect_same_results(engine.generate(reqs), want);
  EXPECT_GT(engine.stats().overlapped_steps, 10);
  expect_clean(engine);
}

// VELA_OVERLAP_MIN_ROWS=2 (read when the engine starts) keeps single-row steps from overlapping.
TEST(OverlapSteps, SingleRowStepsDoNotOverlapWhenTheMinimumIsTwo) {
  struct Env {  // unset again however the engine's construction ends
    Env() { ::setenv("VELA_OVERLAP_MIN_ROWS", "2", 1); }
    ~Env() { ::unsetenv("VELA_OVERLAP_MIN_ROWS"); }
  };
  auto make = [] {
    Env env;
    return std::make_unique<Engine>(Transformer::load(kModel), nullptr, config(1));
  };
  std::unique_ptr<Engine> engine = make();
  engine->generate({request(fixture_prompt(), 20)});
  EXPECT_EQ(engine->stats().overlapped_steps, 0);
}

TEST(OverlapSteps, BadSettingIsAClearError) {
  EngineConfig cfg = config(0);
  cfg.overlap_steps = 2;
  try {
    Engine engine(Transformer::load(kModel), nullptr, cfg);
    FAIL() << "overlap_steps 2 was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("overlap_steps"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vela
