// Numerical parity with transformers on the committed fixture models (tools/make_model_fixtures.py):
// prompt logits (dense path, packed path in one chunk and in several chunks), greedy continuation
// (dense recompute and KV-cached decode), bf16 weights against the f32 reference, and a save/load
// round trip through vela's HF writer.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/json.h"
#include "core/safetensors.h"
#include "model/contiguous_kv_cache.h"
#include "model/transformer.h"
#include "model/weights.h"
#include "ops/topk.h"

namespace vela {
namespace {

namespace fs = std::filesystem;

// head_dim 16 or 32 unless the name says otherwise (qwen3_hd48, llama_hd80_mha,
// mistral_hd96_mqa, qwen3_hd256: the head sizes the CUDA kernels run on padded tiles / the
// 256 tile).
const char* kFixtures[] = {"llama_gqa",        "llama_mha_tied_linear", "llama_mqa_dynamic",
                           "llama3_scaling",   "llama_yarn",            "mistral_gqa",
                           "qwen2_bias_tied",  "qwen3_qknorm",          "qwen3_yarn_mha",
                           "qwen3_hd48",       "llama_hd80_mha",        "mistral_hd96_mqa",
                           "qwen3_hd256"};

struct Reference {
  std::vector<int32_t> prompt, greedy;
  Tensor logits;  // [T, V] f32
};

std::string fixture_dir(const std::string& name) { return "fixtures/models/" + name; }

// The mixture-of-experts fixtures (tools/make_moe_fixtures.py) run the same checks; a test skips
// when its fixture was not generated.
const char* kMoeFixtures[] = {"qwen3_moe", "qwen3_moe_hub", "mixtral", "mixtral_hub",
                              "qwen2_moe_shared"};
bool fixture_absent(const std::string& name) {
  return !fs::exists(fixture_dir(name) + "/reference.json");
}

Reference load_reference(const std::string& name) {
  std::ifstream f(fixture_dir(name) + "/reference.json");
  EXPECT_TRUE(f.good()) << "missing fixture " << name << " (run from tests/, see tools/)";
  json j = json::parse(f);
  Reference r;
  r.prompt = j["prompt_ids"].get<std::vector<int32_t>>();
  r.greedy = j["greedy_ids"].get<std::vector<int32_t>>();
  r.logits = SafetensorsReader::open(fixture_dir(name) + "/reference.safetensors").get("logits").clone();
  return r;
}

// Max |a - b| over rows [row0, row0 + n) of two [*, V] f32 tensors.
double max_err(const Tensor& got, const Tensor& ref, int64_t ref_row0) {
  const int64_t n = got.size(0), v = got.size(1);
  const float* g = got.data<float>();
  const float* r = ref.data<float>() + ref_row0 * v;
  double e = 0;
  for (int64_t i = 0; i < n * v; ++i) e = std::max(e, std::abs(static_cast<double>(g[i]) - r[i]));
  return e;
}

int32_t argmax_row(const Tensor& logits, int64_t row) {
  const int64_t v = logits.size(1);
  const float* l = logits.data<float>() + row * v;
  return static_cast<int32_t>(std::max_element(l, l + v) - l);
}

bool is_dynamic(const Transformer& m) {
  return m.config.rope.scaling.type == ops::RopeScaling::Type::kDynamic;
}

// Greedy decode through the packed path with a KV cache: prefill in the given chunks, then one
// token per step. Returns the generated ids; checks prompt logits against the reference.
std::vector<int32_t> cached_greedy(const Transformer& m, const Reference& ref,
                                   const std::vector<int32_t>& chunks, double tol) {
  const int64_t t = static_cast<int64_t>(ref.prompt.size());
  const int64_t n_steps = static_cast<int64_t>(ref.greedy.size());
  ContiguousKVCache cache(m.config, 1, t + n_steps, m.dtype(), m.device());
  int64_t done = 0;
  Tensor last;
  for (int32_t c : chunks) {
    std::vector<int32_t> ids(ref.prompt.begin() + done, ref.prompt.begin() + done + c);
    PackedStep st = cache.step({0}, {c});
    std::vector<int32_t> rows(static_cast<size_t>(c));
    for (int32_t i = 0; i < c; ++i) rows[i] = i;
    Tensor logits = m.forward_packed(Tensor::from_vector(ids), st.positions, st.kv,
                                     Tensor::from_vector(rows));
    EXPECT_LE(max_err(logits, ref.logits, done), tol) << "chunk at " << done << " of " << c;
    done += c;
    last = logits.slice(0, c - 1, c).contiguous();
  }
  EXPECT_EQ(done, t);
  std::vector<int32_t> out;
  for (int64_t s = 0; s < n_steps; ++s) {
    int32_t next = argmax_row(last, 0);
    out.push_back(next);
    PackedStep st = cache.step({0}, {1});
    last = m.forward_packed(Tensor::from_vector(std::vector<int32_t>{next}), st.positions, st.kv,
                            Tensor::from_vector(std::vector<int32_t>{0}));
  }
  return out;
}

class FixtureTest : public ::testing::TestWithParam<const char*> {};

TEST_P(FixtureTest, DenseLogitsAndGreedyMatchTransformers) {
  const std::string name = GetParam();
  if (fixture_absent(name)) GTEST_SKIP() << "fixture " << name << " was not generated";
  Reference ref = load_reference(name);
  Transformer m = Transformer::load(fixture_dir(name));
  const int64_t t = static_cast<int64_t>(ref.prompt.size());
  Tensor logits = m.forward_dense(Tensor::from_vector(ref.prompt, {1, t}));
  double err = max_err(logits.view({t, m.config.vocab_size}), ref.logits, 0);
  EXPECT_LE(err, 1e-4) << name << " dense prompt logits";
  // Greedy by recomputing the whole sequence each step (the way the reference was made).
  std::vector<int32_t> seq = ref.prompt, out;
  for (size_t s = 0; s < ref.greedy.size(); ++s) {
    int64_t n = static_cast<int64_t>(seq.size());
    Tensor l = m.forward_dense(Tensor::from_vector(seq, {1, n})).view({n, m.config.vocab_size});
    int32_t next = argmax_row(l, n - 1);
    out.push_back(next);
    seq.push_back(next);
  }
  EXPECT_EQ(out, ref.greedy) << name;
  std::printf("[%s] dense max|err| %.3g\n", name.c_str(), err);
}

TEST_P(FixtureTest, PackedPathWithKVCacheMatches) {
  const std::string name = GetParam();
  if (fixture_absent(name)) GTEST_SKIP() << "fixture " << name << " was not generated";
  Reference ref = load_reference(name);
  Transformer m = Transformer::load(fixture_dir(name));
  const int32_t t = static_cast<int32_t>(ref.prompt.size());
  std::vector<int32_t> one = cached_greedy(m, ref, {t}, 1e-4);
  if (!is_dynamic(m)) {
    // With dynamic NTK the base changes as the sequence grows, so cached keys (rotated with the
    // older base) legitimately differ from the no-cache reference — transformers behaves the same.
    EXPECT_EQ(one, ref.greedy) << name << " single-chunk prefill";
  }
  if (!is_dynamic(m)) {
    std::vector<int32_t> chunked = cached_greedy(m, ref, {7, 9, t - 16}, 1e-4);
    EXPECT_EQ(chunked, ref.greedy) << name << " chunked prefill";
  }
}

TEST_P(FixtureTest, Bf16WeightsStayCloseToF32) {
  const std::string name = GetParam();
  if (fixture_absent(name)) GTEST_SKIP() << "fixture " << name << " was not generated";
  Reference ref = load_reference(name);
  Transformer m = Transformer::load(fixture_dir(name), DType::kBF16);
  const int64_t t = static_cast<int64_t>(ref.prompt.size());
  Tensor logits = m.forward_dense(Tensor::from_vector(ref.prompt, {1, t}));
  double err = max_err(logits.view({t, m.config.vocab_size}), ref.logits, 0);
  double scale = 0;
  for (int64_t i = 0; i < ref.logits.numel(); ++i)
    scale = std::max(scale, std::abs(static_cast<double>(ref.logits.data<float>()[i])));
  std::printf("[%s] bf16 max|err| %.4f (max|logit| %.2f, %.2f%%)\n", name.c_str(), err, scale,
              100 * err / scale);
  // bf16 activations (as transformers runs bf16) on these deliberately large random weights
  // (init std 0.3) give 2-8% of the largest logit; 10% is the bound. In a mixture of experts bf16
  // rounding of the router logits can flip a token's top-k choice near a tie, a discontinuous
  // change (measured 2.6-7.2% for the Qwen MoE fixtures, 13.5% and 17.0% for the two Mixtral ones,
  // whose routers have the smallest margins): 20% for MoE.
  EXPECT_LE(err, (m.config.is_moe() ? 0.2 : 0.1) * scale) << name;
}

TEST_P(FixtureTest, SaveLoadRoundTripKeepsLogits) {
  const std::string name = GetParam();
  if (fixture_absent(name)) GTEST_SKIP() << "fixture " << name << " was not generated";
  Reference ref = load_reference(name);
  Transformer m = Transformer::load(fixture_dir(name));
  fs::path dir = fs::temp_directory_path() / ("vela_roundtrip_" + name + "_" + std::to_string(::getpid()));
  save_model(m, dir.string());
  Transformer back = Transformer::load(dir.string());
  const int64_t t = static_cast<int64_t>(ref.prompt.size());
  Tensor a = m.forward_dense(Tensor::from_vector(ref.prompt, {1, t}));
  Tensor b = back.forward_dense(Tensor::from_vector(ref.prompt, {1, t}));
  EXPECT_EQ(max_err(a.view({t, -1}), b.view({t, -1}), 0), 0.0) << name;
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Models, FixtureTest, ::testing::ValuesIn(kFixtures),
                         [](const auto& info) { return std::string(info.param); });
INSTANTIATE_TEST_SUITE_P(MoeModels, FixtureTest, ::testing::ValuesIn(kMoeFixtures),
                         [](const auto& info) { return std::string(info.param); });

TEST(PackedBatch, TwoSequencesInOneForwardMatchSeparateRuns) {
  Reference ref = load_reference("qwen3_qknorm");
  Transformer m = Transformer::load(fixture_dir("qwen3_qknorm"));
  // Sequence 0: the prompt; sequence 1: its first 10 tokens. Packed together, each must match
  // the reference rows of its own positions.
  ContiguousKVCache cache(m.config, 2, 32, DType::kF32, Device::cpu());
  std::vector<int32_t> ids(ref.prompt.begin(), ref.prompt.end());
  ids.insert(ids.end(), ref.prompt.begin(), ref.prompt.begin() + 10);
  PackedStep st = cache.step({0, 1}, {24, 10});
  Tensor logits = m.forward_packed(Tensor::from_vector(ids), st.positions, st.kv, st.last_indices);
  Tensor row0 = logits.slice(0, 0, 1).contiguous(), row1 = logits.slice(0, 1, 2).contiguous();
  EXPECT_LE(max_err(row0, ref.logits, 23), 1e-4);
  EXPECT_LE(max_err(row1, ref.logits, 9), 1e-4);
}

}  // namespace
}  // namespace vela
