// Mixture of experts: config parsing in both dialects (and its errors), the layer-type rule, the
// Moe forward against a naive per-token loop (softmax, top-k, renormalisation, SwiGLU experts,
// gated shared expert), the ops' determinism, and a random MoE model through save / load.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/json.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "model/transformer.h"
#include "model/weights.h"
#include "ops/moe.h"

namespace vela {
namespace {

json qwen3_moe_json(bool v5) {
  json j = {{"model_type", "qwen3_moe"},
            {"vocab_size", 50},
            {"hidden_size", 16},
            {"num_hidden_layers", 4},
            {"intermediate_size", 24},
            {"moe_intermediate_size", 8},
            {"num_attention_heads", 2},
            {"num_key_value_heads", 1},
            {"head_dim", 8},
            {"num_experts_per_tok", 2},
            {"norm_topk_prob", true},
            {"decoder_sparse_step", 1},
            {"mlp_only_layers", {2}},
            {"router_aux_loss_coef", 0.001},
            {"output_router_logits", false},
            {"use_sliding_window", false},
            {"sliding_window", nullptr},
            {"max_window_layers", 4}};
  if (v5) {
    j["num_local_experts"] = 6;
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}};
    j["dtype"] = "bfloat16";
  } else {
    j["num_experts"] = 6;
    j["rope_theta"] = 1e6;
    j["rope_scaling"] = nullptr;
    j["torch_dtype"] = "bfloat16";
  }
  return j;
}

TEST(MoeConfig, Qwen3MoeReadsBothDialects) {
  for (bool v5 : {false, true}) {
    ModelConfig c = ModelConfig::from_json(qwen3_moe_json(v5));
    EXPECT_EQ(c.n_experts, 6);
    EXPECT_EQ(c.n_experts_per_tok, 2);
    EXPECT_EQ(c.moe_intermediate_size, 8);
    EXPECT_TRUE(c.norm_topk_prob);
    EXPECT_TRUE(c.qk_norm);
    EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);
    EXPECT_FLOAT_EQ(c.router_aux_loss_coef, 0.001f);
    EXPECT_TRUE(c.is_moe_layer(0));
    EXPECT_TRUE(c.is_moe_layer(1));
    EXPECT_FALSE(c.is_moe_layer(2));  // mlp_only_layers
    EXPECT_TRUE(c.is_moe_layer(3));
  }
  json j = qwen3_moe_json(false);
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = json::array();
  ModelConfig c = ModelConfig::from_json(j);
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
  // Parameters: 3 MoE layers of 6 experts, 1 dense; active: 2 experts per MoE layer.
  ModelConfig a = ModelConfig::from_json(qwen3_moe_json(false));
  EXPECT_EQ(a.n_params() - a.n_active_params(), 3 * 4 * 3 * 16 * 8);
  // to_hf_json round trip keeps every MoE field.
  ModelConfig back = ModelConfig::from_json(a.to_hf_json());
  EXPECT_EQ(back.n_experts, a.n_experts);
  EXPECT_EQ(back.mlp_only_layers, a.mlp_only_layers);
  EXPECT_EQ(back.norm_topk_prob, a.norm_topk_prob);
  EXPECT_EQ(back.n_params(), a.n_params());
}

TEST(MoeConfig, MixtralAndQwen2Moe) {
  json m = {{"model_type", "mixtral"},    {"vocab_size", 50},          {"hidden_size", 16},
            {"num_hidden_layers", 2},     {"intermediate_size", 12},   {"num_attention_heads", 2},
            {"num_key_value_heads", 1},   {"num_local_experts", 4},    {"num_experts_per_tok", 2},
            {"router_jitter_noise", 0.0}, {"sliding_window", nullptr}, {"rope_theta", 1e6}};
  ModelConfig c = ModelConfig::from_json(m);
  EXPECT_EQ(c.n_experts, 4);
  EXPECT_EQ(c.moe_intermediate_size, 12);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_TRUE(c.is_moe_layer(0) && c.is_moe_layer(1));
  EXPECT_EQ(ModelConfig::from_json(c.to_hf_json()).n_params(), c.n_params());
  json q = m;
  q["model_type"] = "qwen2_moe";
  q.erase("num_local_experts");
  q.erase("router_jitter_noise");
  q["num_experts"] = 4;
  q["moe_intermediate_size"] = 6;
  q["shared_expert_intermediate_size"] = 10;
  ModelConfig s = ModelConfig::from_json(q);
  EXPECT_EQ(s.shared_expert_intermediate_size, 10);
  EXPECT_TRUE(s.qkv_bias);
  EXPECT_FALSE(s.norm_topk_prob);
}

TEST(MoeConfig, BadFieldsAreNamedErrors) {
  auto fails_with = [](json j, const std::string& what) {
    try {
      ModelConfig::from_json(j);
      ADD_FAILURE() << "accepted a config with " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  json j = qwen3_moe_json(false);
  j["num_experts_per_tok"] = 7;
  fails_with(j, "num_experts_per_tok");
  j = qwen3_moe_json(false);
  j.erase("moe_intermediate_size");
  fails_with(j, "moe_intermediate_size");
  j = qwen3_moe_json(false);
  j["shared_expert_intermediate_size"] = 8;
  fails_with(j, "shared expert");
  j = qwen3_moe_json(false);
  j["router_jitter_noise"] = 0.1;
  fails_with(j, "router_jitter_noise");
  j = qwen3_moe_json(false);
  j["model_type"] = "qwen3";
  fails_with(j, "with experts");
}

// A naive reference of one Moe layer on CPU f32: per token, softmax over the router logits,
// the top-k (ties to the lower index), optional renormalisation, each expert's SwiGLU MLP
// summed with its weight, plus the sigmoid-gated shared expert.
std::vector<float> naive_moe(const Moe& moe, const Tensor& x) {
  const int64_t n = x.size(0), h = x.size(1), n_exp = moe.n_experts(), inter = moe.inter();
  const float* px = x.data<float>();
  auto dot = [&](const float* a, const float* b, int64_t len) {
    double s = 0;
    for (int64_t i = 0; i < len; ++i) s += static_cast<double>(a[i]) * b[i];
    return s;
  };
  auto mlp = [&](const float* gu, const float* down, int64_t in, const float* xr,
                 std::vector<double>& acc, double scale) {
    std::vector<double> act(static_cast<size_t>(in));
    for (int64_t i = 0; i < in; ++i) {
      const double g = dot(gu + i * h, xr, h), u = dot(gu + (in + i) * h, xr, h);
      act[i] = g / (1 + std::exp(-g)) * u;
    }
    for (int64_t c = 0; c < h; ++c) {
      double s = 0;
      for (int64_t i = 0; i < in; ++i) s += down[c * in + i] * act[i];
      acc[c] += scale * s;
    }
  };
  std::vector<float> out(static_cast<size_t>(n * h));
  for (int64_t t = 0; t < n; ++t) {
    const float* xr = px + t * h;
    std::vector<double> p(static_cast<size_t>(n_exp));
    double mx = -1e30, sum = 0;
    for (int64_t e = 0; e < n_exp; ++e) {
      p[e] = dot(moe.router.weight.data<float>() + e * h, xr, h);
      mx = std::max(mx, p[e]);
    }
    for (auto& v : p) sum += (v = std::exp(v - mx));
    for (auto& v : p) v /= sum;
    std::vector<int64_t> order(static_cast<size_t>(n_exp));
    for (int64_t e = 0; e < n_exp; ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    double wsum = 0;
    for (int64_t j = 0; j < moe.top_k; ++j) wsum += p[order[j]];
    std::vector<double> acc(static_cast<size_t>(h), 0.0);
    for (int64_t j = 0; j < moe.top_k; ++j) {
      const int64_t e = order[j];
      const double w = moe.norm_topk_prob ? p[e] / wsum : p[e];
      mlp(moe.gate_up.data<float>() + e * 2 * inter * h, moe.down.data<float>() + e * h * inter,
          inter, xr, acc, w);
    }
    if (moe.has_shared()) {
      const double g = 1 / (1 + std::exp(-dot(moe.shared_gate.weight.data<float>(), xr, h)));
      mlp(moe.shared.gate_up.weight.data<float>(), moe.shared.down.weight.data<float>(),
          moe.shared.inter(), xr, acc, g);
    }
    for (int64_t c = 0; c < h; ++c) out[t * h + c] = static_cast<float>(acc[c]);
  }
  return out;
}

ModelConfig tiny_moe(const std::string& type, int64_t shared) {
  json j = {{"model_type", type},       {"vocab_size", 40},         {"hidden_size", 16},
            {"num_hidden_layers", 1},   {"intermediate_size", 12},  {"moe_intermediate_size", 10},
            {"num_attention_heads", 2}, {"num_key_value_heads", 1}, {"head_dim", 8},
            {"num_experts", 7},         {"num_experts_per_tok", 3}, {"norm_topk_prob", shared == 0},
            {"rope_theta", 10000.0}};
  if (shared > 0) j["shared_expert_intermediate_size"] = shared;
  return ModelConfig::from_json(j);
}

class MoeForward : public ::testing::TestWithParam<int64_t> {};

TEST_P(MoeForward, MatchesNaivePerTokenLoop) {
  const int64_t shared = GetParam();
  ModelConfig c = tiny_moe(shared > 0 ? "qwen2_moe" : "qwen3_moe", shared);
  Transformer m = Transformer::random(c, DType::kF32, Device::cpu(), 7, 0.5f);
  const Moe& moe = m.blocks[0].moe;
  ASSERT_TRUE(moe.defined());
  EXPECT_EQ(moe.has_shared(), shared > 0);
  for (int64_t n : {1, 5, 33}) {
    Tensor x = Tensor::empty({n, 16}, DType::kF32);
    Rng rng(100 + n);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 2 * rng.uniform() - 1;
    Tensor out = Tensor::empty({n, 16}, DType::kF32);
    moe.forward(x, out);
    std::vector<float> want = naive_moe(moe, x), got = out.to_vector<float>();
    double err = 0, scale = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      err = std::max(err, static_cast<double>(std::fabs(got[i] - want[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
    }
    EXPECT_LE(err, 1e-5 * std::max(1.0, scale)) << "n = " << n;
    // Deterministic: a second forward is bit-identical.
    Tensor again = Tensor::empty({n, 16}, DType::kF32);
    moe.forward(x, again);
    EXPECT_EQ(again.to_vector<float>(), got);
  }
}

INSTANTIATE_TEST_SUITE_P(Shared, MoeForward, ::testing::Values(0, 9));

TEST(MoeOps, PermuteIsStableAndCombineInverts) {
  // 5 tokens, k = 2, 4 experts (expert 2 gets nothing).
  Tensor ids = Tensor::from_vector(std::vector<int32_t>{1, 0, 3, 1, 0, 3, 1, 3, 0, 1}, {5, 2});
  Tensor off = Tensor::empty({5}, DType::kI32), src = Tensor::empty({10}, DType::kI32),
         dst = Tensor::empty({5, 2}, DType::kI32);
  ops::moe_permute(ids, 4, off, src, dst);
  EXPECT_EQ(off.to_vector<int32_t>(), (std::vector<int32_t>{0, 3, 7, 7, 10}));
  EXPECT_EQ(src.to_vector<int32_t>(), (std::vector<int32_t>{0, 2, 4, 0, 1, 3, 4, 1, 2, 3}));
  // Gather rows of x by src, combine them back with unit weights: each token gets k copies.
  Tensor y = Tensor::empty({10, 1}, DType::kF32);
  for (int i = 0; i < 10; ++i) y.data<float>()[i] = static_cast<float>(src.data<int32_t>()[i]);
  Tensor out = Tensor::empty({5, 1}, DType::kF32);
  ops::moe_combine(y, dst, Tensor(), Tensor(), Tensor(), out);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{0, 2, 4, 6, 8}));
  Tensor bad = Tensor::from_vector(std::vector<int32_t>{0, 4}, {1, 2});
  Tensor o2 = Tensor::empty({5}, DType::kI32), s2 = Tensor::empty({2}, DType::kI32),
         d2 = Tensor::empty({1, 2}, DType::kI32);
  EXPECT_THROW(ops::moe_permute(bad, 4, o2, s2, d2), Error);
}

TEST(MoeModel, RandomModelSavesInHubLayoutAndLoadsBack) {
  json j = qwen3_moe_json(false);
  j["torch_dtype"] = "float32";
  ModelConfig c = ModelConfig::from_json(j);
  Transformer m = Transformer::random(c, DType::kF32, Device::cpu(), 3, 0.3f);
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("vela_moe_rt_" + std::to_string(::getpid())))
          .string();
  save_model(m, dir);
  SafetensorsReader r = SafetensorsReader::open(dir);
  EXPECT_TRUE(r.contains("model.layers.0.mlp.experts.5.down_proj.weight"));
  EXPECT_TRUE(r.contains("model.layers.2.mlp.gate_proj.weight"));  // the dense layer
  EXPECT_FALSE(r.contains("model.layers.2.mlp.gate.weight"));
  Transformer back = Transformer::load(dir);
  std::vector<int32_t> ids = {3, 9, 17, 4, 4, 30, 2};
  Tensor a = m.forward_dense(Tensor::from_vector(ids, {1, 7}));
  Tensor b = back.forward_dense(Tensor::from_vector(ids, {1, 7}));
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  std::filesystem::remove_all(dir);
}

// Checkpoints with fused expert stacks (mlp.experts.gate_up_proj [E, 2I, H] / down_proj
// [E, H, I], as transformers 5 holds them in memory, or stored transposed) load to the same model.
TEST(MoeModel, FusedExpertStacksLoadInBothOrientations) {
  json j = qwen3_moe_json(false);
  j["torch_dtype"] = "float32";
  j["moe_intermediate_size"] = 6;  // 2I != H, I != H: the orientation is known from the shape
  ModelConfig c = ModelConfig::from_json(j);
  Transformer m = Transformer::random(c, DType::kF32, Device::cpu(), 5, 0.3f);
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("vela_moe_fused_" + std::to_string(::getpid())))
          .string();
  save_model(m, dir);
  std::vector<int32_t> ids = {3, 9, 17, 4, 4, 30, 2};
  Tensor want = m.forward_dense(Tensor::from_vector(ids, {1, 7}));
  for (bool transposed : {false, true}) {
    SafetensorsReader r = SafetensorsReader::open(dir);
    std::vector<std::pair<std::string, Tensor>> t;
    for (const std::string& n : r.names())
      if (n.find(".experts.") == std::string::npos) t.emplace_back(n, r.get(n).clone());
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const Moe& moe = m.blocks[static_cast<size_t>(l)].moe;
      if (!moe.defined()) continue;
      const std::string p = "model.layers." + std::to_string(l) + ".mlp.experts.";
      t.emplace_back(p + "gate_up_proj",
                     transposed ? moe.gate_up.transpose(1, 2).contiguous() : moe.gate_up);
      t.emplace_back(p + "down_proj",
                     transposed ? moe.down.transpose(1, 2).contiguous() : moe.down);
    }
    const std::string fused = dir + (transposed ? "_t" : "_f");
    std::filesystem::create_directories(fused);
    std::filesystem::copy_file(dir + "/config.json", fused + "/config.json",
                               std::filesystem::copy_options::overwrite_existing);
    save_safetensors(fused + "/model.safetensors", t, {{"format", "pt"}});
    Transformer back = Transformer::load(fused);
    Tensor got = back.forward_dense(Tensor::from_vector(ids, {1, 7}));
    EXPECT_EQ(got.to_vector<float>(), want.to_vector<float>()) << "transposed " << transposed;
    std::filesystem::remove_all(fused);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vela
