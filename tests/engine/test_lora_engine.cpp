// Multi-LoRA serving on the CPU engine: two PEFT adapters of different ranks and target modules
// over the qwen3 fixture, requests choosing an adapter (or the base) per request, batched
// together. Each request must get exactly what it gets alone, and what the dense forward of
// base + that adapter gives (the oracle); the prefix cache never hands one adapter's KV to another
// (or to the base); unknown adapter names are errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/rng.h"
#include "engine/engine.h"
#include "lora_test_util.h"
#include "model/lora_adapter.h"

namespace vela {
namespace {
namespace fs = std::filesystem;

const std::string kModel = "fixtures/models/qwen3_qknorm";

struct Adapters {
  fs::path root;
  std::string a, b;
  Adapters() {
    root = fs::temp_directory_path() / ("vela_lora_engine_" + std::to_string(::getpid()));
    fs::remove_all(root);
    a = (root / "a").string();
    b = (root / "b").string();
    make(a, 4, 8.0, {"all-linear"}, 1);
    make(b, 2, 3.0, {"q_proj", "v_proj", "down_proj"}, 2);
  }
  ~Adapters() { fs::remove_all(root); }
  static void make(const std::string& dir, int64_t r, double alpha,
                   std::vector<std::string> modules, uint64_t seed) {
    test::make_lora_adapter(dir, kModel, r, alpha, std::move(modules), seed);
  }
};

// Greedy continuation by the dense forward of base + adapter `dir` ("" = base).
std::vector<int32_t> oracle_greedy(const std::string& dir, std::vector<int32_t> seq, int n) {
  Transformer m = Transformer::load(kModel);
  if (!dir.empty()) {
    attach_lora_adapters(m, {{"x", dir}});
    m.lora_adapters->reserve_rows(256, Device::cpu());
    int32_t* s = m.lora_adapters->rows->host.data<int32_t>();
    for (int i = 0; i < 256; ++i) s[i] = 0;
  }
  std::vector<int32_t> out;
  for (int s = 0; s < n; ++s) {
    const int64_t t = static_cast<int64_t>(seq.size());
    Tensor l = m.forward_dense(Tensor::from_vector(seq, {1, t}));
    const float* row = l.data<float>() + (t - 1) * m.config.vocab_size;
    const int32_t next =
        static_cast<int32_t>(std::max_element(row, row + m.config.vocab_size) - row);
    out.push_back(next);
    seq.push_back(next);
  }
  return out;
}

using test::greedy_lora_request;

std::vector<std::vector<int32_t>> prompts() {
  std::vector<std::vector<int32_t>> out;
  int k = 0;
  for (int len : {1, 5, 19, 9, 33, 12}) {
    std::vector<int32_t> p;
    for (int i = 0; i < len; ++i) p.push_back((i * 7 + len * 3 + k) % 120 + 1);
    out.push_back(p);
    ++k;
  }
  return out;
}

TEST(LoraEngine, MixedAdapterBatchesEqualEachRequestAloneAndTheOracle) {
  Adapters ad;
  EngineConfig cfg;
  cfg.page_size = 4;
  cfg.max_seqs = 8;
  cfg.max_tokens_per_step = 24;  // chunked prefill across steps, mixed with decodes
  auto engine = Engine::load(kModel, cfg, DType::kF32, Device::cpu(), {{"a", ad.a}, {"b", ad.b}});
  EXPECT_EQ(engine->lora_names(), (std::vector<std::string>{"a", "b"}));
  const std::vector<std::string> names = {"a", "b", "", "b", "a", ""};
  const std::vector<std::string> dirs = {ad.a, ad.b, "", ad.b, ad.a, ""};
  const auto ps = prompts();
  const int n_new = 6;
  std::vector<Request> reqs;
  for (size_t i = 0; i < ps.size(); ++i)
    reqs.push_back(greedy_lora_request(ps[i], n_new, names[i]));
  std::vector<RequestResult> together = engine->generate(reqs);
  int n_differs_from_base = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i) + " adapter '" + names[i] + "'");
    RequestResult alone = engine->generate({reqs[i]})[0];
    const Completion& t = together[i].completions[0];
    const Completion& a = alone.completions[0];
    EXPECT_EQ(t.tokens, a.tokens);
    ASSERT_EQ(t.logprobs.size(), a.logprobs.size());
    for (size_t k = 0; k < t.logprobs.size(); ++k)
      EXPECT_NEAR(t.logprobs[k].logprob, a.logprobs[k].logprob, 1e-5);
    EXPECT_EQ(t.tokens, oracle_greedy(dirs[i], ps[i], n_new));
    if (!dirs[i].empty()) n_differs_from_base += t.tokens != oracle_greedy("", ps[i], n_new);
  }
  EXPECT_GT(n_differs_from_base, 0) << "the adapters never changed a greedy token: a weak test";
  EXPECT_EQ(engine->check_integrity(), "");
}

TEST(LoraEngine, ThePrefixCacheKeepsAdaptersApart) {
  Adapters ad;
  EngineConfig cfg;
  cfg.page_size = 4;
  auto engine = Engine::load(kModel, cfg, DType::kF32, Device::cpu(), {{"a", ad.a}, {"b", ad.b}});
  std::vector<int32_t> p = prompts()[4];  // 33 tokens: 8 full pages
  // Base first (its pages enter the radix), then each adapter on the same prompt, then the base
  // again (which may reuse its own pages).
  for (const std::string name : {"", "a", "b", "a", ""}) {
    SCOPED_TRACE("adapter '" + name + "'");
    RequestResult r = engine->generate({greedy_lora_request(p, 5, name)})[0];
    const std::string dir = name == "a" ? ad.a : name == "b" ? ad.b : "";
    EXPECT_EQ(r.completions[0].tokens, oracle_greedy(dir, p, 5));
  }
  EXPECT_EQ(engine->check_integrity(), "");
}

TEST(LoraEngine, UnknownAdaptersAndBadDirectoriesAreErrors) {
  Adapters ad;
  auto engine = Engine::load(kModel, {}, DType::kF32, Device::cpu(), {{"a", ad.a}});
  EXPECT_THROW(engine->submit(greedy_lora_request({1, 2, 3}, 2, "nope")), InvalidArgument);
  auto base = Engine::load(kModel);
  EXPECT_TRUE(base->lora_names().empty());
  EXPECT_THROW(base->submit(greedy_lora_request({1, 2, 3}, 2, "a")), InvalidArgument);
  EXPECT_THROW(Engine::load(kModel, {}, DType::kF32, Device::cpu(), {{"x", "/nonexistent"}}),
               IoError);
  EXPECT_THROW(Engine::load(kModel, {}, DType::kF32, Device::cpu(), {{"a", ad.a}, {"a", ad.b}}),
               InvalidArgument);
  EXPECT_EQ(parse_lora_arg("sql=/x/y").first, "sql");
  EXPECT_EQ(parse_lora_arg("/x/adapter/").first, "adapter");
}

// The committed PEFT-parity fixture (written on the GPU machine by test_cuda's
// LoraFixture.WritePeftFixture, checked there against transformers + peft by
// tools/lora_peft_check.py): vela still computes the committed logits from the committed adapter.
TEST(LoraEngine, PeftFixtureLogitsStillMatch) {
  if (const char* out = std::getenv("VELA_WRITE_LORA_FIXTURE")) {  // the same writer as test_cuda's
    test::write_lora_fixture(out, kModel);
    GTEST_SKIP() << "wrote the fixture into " << out;
  }
  const std::string dir = test::kLoraFixtureDir;
  if (!fs::exists(dir + "/adapter/adapter_model.safetensors")) GTEST_SKIP() << "no " << dir;
  json j = json::parse(std::ifstream(dir + "/vela_logits.json"));
  EXPECT_EQ(j["prompt_ids"].get<std::vector<int32_t>>(), test::kLoraFixturePrompt);
  const std::vector<float> want = j["logits"].get<std::vector<float>>();
  const std::vector<float> got = test::lora_fixture_logits(kModel, dir + "/adapter");
  ASSERT_EQ(got.size(), want.size());
  // Written by the GPU machine's CPU (another OpenBLAS build): equal to ~1e-5.
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4) << i;
}

}  // namespace
}  // namespace vela
