// The KV cache under a real model: the qwen3_qknorm fixture run through forward_packed with a
// TaskCacheManager (contiguous, paged 1, paged 16) — chunked prefill then greedy decode must give
// transformers' greedy ids; a request reusing a cached prefix must give the same ids and logits;
// and in a busy batch (prefill chunks mixed with decodes, staggered arrivals, recycled rows,
// prefix hits mid-run) every request's tokens must equal its run alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "cache_test_util.h"
#include "core/json.h"
#include "core/safetensors.h"
#include "model/contiguous_kv_cache.h"
#include "model/transformer.h"

namespace vela {
namespace {

const char* kModel = "fixtures/models/qwen3_qknorm";

struct Reference {
  std::vector<int32_t> prompt, greedy;
  Tensor logits;  // [T, V] f32 prompt logits
};

Reference load_reference() {
  std::ifstream f(std::string(kModel) + "/reference.json");
  EXPECT_TRUE(f.good()) << "missing fixture " << kModel << " (run from tests/)";
  json j = json::parse(f);
  Reference r;
  r.prompt = j["prompt_ids"].get<std::vector<int32_t>>();
  r.greedy = j["greedy_ids"].get<std::vector<int32_t>>();
  r.logits =
      SafetensorsReader::open(std::string(kModel) + "/reference.safetensors").get("logits").clone();
  return r;
}

int32_t argmax_row(const Tensor& logits, int64_t row) {
  const int64_t v = logits.size(1);
  const float* l = logits.data<float>() + row * v;
  return static_cast<int32_t>(std::max_element(l, l + v) - l);
}

double row_err(const Tensor& logits, int64_t row, const Tensor& ref, int64_t ref_row) {
  const int64_t v = logits.size(1);
  const float* a = logits.data<float>() + row * v;
  const float* b = ref.data<float>() + ref_row * v;
  double e = 0;
  for (int64_t i = 0; i < v; ++i) e = std::max(e, std::abs(static_cast<double>(a[i]) - b[i]));
  return e;
}

// One request driven by a tiny test scheduler: prefill in chunks, then one token per step.
struct Job {
  int64_t id;
  std::vector<int32_t> prompt;
  int32_t chunk;
  int32_t start_step;
  int32_t n_gen;
  std::vector<int32_t> tokens{}, out{};
  std::vector<float> last_prompt_logits{};  // [V] logits of the last prompt position
  int32_t n_fed = 0, cached = -1;
  bool done = false;
};

// Runs the jobs to completion, all active ones packed into each forward; check_integrity after
// every step. Finished jobs are freed with their tokens recorded for prefix reuse.
void run_jobs(const Transformer& model, TaskCacheManager& mgr, std::vector<Job>& jobs) {
  for (int32_t step = 0; step < 1000; ++step) {
    if (std::all_of(jobs.begin(), jobs.end(), [](const Job& j) { return j.done; })) return;
    std::vector<BindItem> items;
    std::vector<Job*> batch;
    for (Job& j : jobs) {
      if (j.done || step < j.start_step) continue;
      if (j.cached < 0) {
        std::optional<int32_t> c = mgr.alloc(j.id, j.prompt);
        ASSERT_TRUE(c.has_value()) << "no row for job " << j.id;
        j.cached = *c;
        j.n_fed = *c;
        j.tokens = j.prompt;
      }
      int32_t n = std::min<int32_t>(j.chunk, static_cast<int32_t>(j.tokens.size()) - j.n_fed);
      ASSERT_TRUE(mgr.extend(j.id, n)) << "out of KV for job " << j.id;
      items.push_back({j.id, n, j.tokens.data() + j.n_fed});
      batch.push_back(&j);
    }
    if (items.empty()) continue;
    BoundBatch b = mgr.bind(items);
    mgr.check_integrity();
    Tensor logits = model.forward_packed(b.input_ids, b.positions, b.kv, b.logits_indices);
    for (size_t i = 0; i < batch.size(); ++i) {
      Job& j = *batch[i];
      j.n_fed += items[i].n_new;
      if (j.n_fed < static_cast<int32_t>(j.tokens.size())) continue;  // mid-prefill
      if (j.out.empty()) {
        const float* l = logits.data<float>() + static_cast<int64_t>(i) * logits.size(1);
        j.last_prompt_logits.assign(l, l + logits.size(1));
      }
      int32_t next = argmax_row(logits, static_cast<int64_t>(i));
      j.out.push_back(next);
      j.tokens.push_back(next);
      if (static_cast<int32_t>(j.out.size()) == j.n_gen) {
        mgr.free(j.id, j.tokens, true);
        mgr.check_integrity();
        j.done = true;
      }
    }
  }
  FAIL() << "jobs did not finish";
}

// Greedy ids through the model's own ContiguousKVCache (one prefill chunk, then decode).
std::vector<int32_t> plain_greedy(const Transformer& m, const std::vector<int32_t>& prompt,
                                  int32_t n_gen) {
  const int32_t t = static_cast<int32_t>(prompt.size());
  ContiguousKVCache cache(m.config, 1, t + n_gen, m.dtype(), m.device());
  PackedStep st = cache.step({0}, {t});
  Tensor logits =
      m.forward_packed(Tensor::from_vector(prompt), st.positions, st.kv, st.last_indices);
  std::vector<int32_t> out;
  for (int32_t s = 0; s < n_gen; ++s) {
    int32_t next = argmax_row(logits, 0);
    out.push_back(next);
    if (s + 1 == n_gen) break;
    st = cache.step({0}, {1});
    logits = m.forward_packed(Tensor::from_vector(std::vector<int32_t>{next}), st.positions, st.kv,
                              st.last_indices);
  }
  return out;
}

struct ModelStack {
  test::CacheStack c;
  ModelStack(const Transformer& m, int32_t page_size, int32_t max_reqs, int32_t max_ctx,
             int64_t n_slots)
      : c(page_size, max_reqs, max_ctx, n_slots, m.config.n_layers, m.config.n_kv_heads,
          m.config.head_dim, 64, m.config.vocab_size) {}
};

class CacheModel : public ::testing::TestWithParam<int32_t> {};

TEST_P(CacheModel, ChunkedPrefillThenDecodeMatchesTransformers) {
  const int32_t ps = GetParam();
  Reference ref = load_reference();
  Transformer model = Transformer::load(kModel);
  const int32_t t = static_cast<int32_t>(ref.prompt.size());
  const int32_t n_gen = static_cast<int32_t>(ref.greedy.size());
  ModelStack s(model, ps, 4, 48, 4 * 48);
  TaskCacheManager& mgr = s.c.mgr;

  std::vector<Job> first = {{1, ref.prompt, 7, 0, n_gen}};
  run_jobs(model, mgr, first);
  EXPECT_EQ(first[0].cached, 0);
  EXPECT_EQ(first[0].out, ref.greedy) << test::strategy_label(ps);
  Tensor last = Tensor::from_vector(first[0].last_prompt_logits, {1, model.config.vocab_size});
  EXPECT_LE(row_err(last, 0, ref.logits, t - 1), 1e-4);

  // The same prompt again: the whole cached pages are reused, prefill resumes after them.
  std::vector<Job> second = {{2, ref.prompt, 5, 0, n_gen}};
  run_jobs(model, mgr, second);
  const int32_t want_cached = ps == 0 ? 0 : (t - 1) / ps * ps;
  EXPECT_EQ(second[0].cached, want_cached);
  EXPECT_EQ(second[0].out, ref.greedy) << test::strategy_label(ps) << " with a cached prefix";
  Tensor last2 = Tensor::from_vector(second[0].last_prompt_logits, {1, model.config.vocab_size});
  EXPECT_LE(row_err(last2, 0, ref.logits, t - 1), 1e-4);
  EXPECT_EQ(mgr.stats().prefix_hit_tokens, want_cached);

  mgr.invalidate_prefix_cache();
  EXPECT_EQ(mgr.stats().pages_free, mgr.stats().pages_total);
  mgr.check_integrity();
}

TEST_P(CacheModel, BusyBatchDoesNotChangeAnyRequest) {
  const int32_t ps = GetParam();
  Reference ref = load_reference();
  Transformer model = Transformer::load(kModel);
  const int32_t n_gen = static_cast<int32_t>(ref.greedy.size());
  std::vector<int32_t> rev(ref.prompt.rbegin(), ref.prompt.rend());
  std::vector<int32_t> shared(ref.prompt.begin(), ref.prompt.begin() + 20);
  shared.push_back(7);
  shared.push_back(11);
  std::vector<int32_t> short_prompt = {5, 9};
  // Only 3 rows for 5 requests: later ones recycle the rows of finished ones.
  ModelStack s(model, ps, 3, 48, 3 * 48);
  TaskCacheManager& mgr = s.c.mgr;
  std::vector<Job> jobs = {
      {10, ref.prompt, 7, 0, n_gen},     // chunked prefill while others decode
      {11, rev, 4, 2, n_gen},            // arrives later, small chunks
      {12, short_prompt, 16, 3, n_gen},  // tiny prompt: decodes beside prefills
      {13, ref.prompt, 24, 14, n_gen},   // after 10 finished: prefix hit, row recycled
      {14, shared, 6, 15, 5},            // shares 20 tokens with 10's prompt
  };
  run_jobs(model, mgr, jobs);
  for (const Job& j : jobs) {
    std::vector<int32_t> alone = plain_greedy(model, j.prompt, j.n_gen);
    EXPECT_EQ(j.out, alone) << test::strategy_label(ps) << " job " << j.id;
  }
  EXPECT_EQ(jobs[0].out, ref.greedy);
  EXPECT_EQ(jobs[3].out, ref.greedy);
  if (ps > 0) {
    EXPECT_GT(jobs[3].cached, 0) << "job 13 should reuse job 10's pages";
    EXPECT_EQ(jobs[4].cached, 20 / ps * ps);
  }
  EXPECT_EQ(mgr.stats().n_tasks, 0);
  mgr.invalidate_prefix_cache();
  EXPECT_EQ(mgr.stats().pages_free, mgr.stats().pages_total);
  mgr.check_integrity();
}

INSTANTIATE_TEST_SUITE_P(Strategies, CacheModel, ::testing::Values(0, 1, 16),
                         [](const auto& info) { return test::strategy_label(info.param); });

}  // namespace
}  // namespace vela
