// Golden gradients: vela's loss and every parameter gradient against PyTorch / transformers
// (float64 reference made by tools/make_grad_fixtures.py into
// tests/fixtures/grads/<model>.safetensors) on the fixture models, a batch with packed documents
// and ignored targets. vela's fused weights are compared slice by slice with HF's split ones
// (q/k/v, gate/up); MoE fixtures (tools/make_moe_fixtures.py) add the router losses and carry the
// expert gradients in vela's stacked layout. Tolerances (vela f32 vs torch f64): loss relative 1e-5; each gradient tensor
// elementwise |vela - torch| <= 1e-4 * max|torch tensor| + 1e-3 * |torch|. Max abs / relative
// errors are printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/safetensors.h"
#include "train/trainable_model.h"

namespace vela {
namespace {

struct Compared {
  double max_abs = 0.0, max_ref = 0.0;
};

Compared compare(const Tensor& got, const Tensor& want, const std::string& what) {
  Compared c;
  EXPECT_EQ(got.shape(), want.shape()) << what;
  if (got.shape() != want.shape()) return c;
  std::vector<float> g = got.contiguous().to_vector<float>(),
                     w = want.contiguous().to_vector<float>();
  for (float v : w) c.max_ref = std::max(c.max_ref, static_cast<double>(std::fabs(v)));
  int64_t n_bad = 0, worst = -1;
  for (size_t i = 0; i < g.size(); ++i) {
    double err = std::fabs(static_cast<double>(g[i]) - w[i]);
    c.max_abs = std::max(c.max_abs, err);
    if (!(err <= 1e-4 * c.max_ref + 1e-3 * std::fabs(w[i]))) {
      if (worst < 0) worst = static_cast<int64_t>(i);
      ++n_bad;
    }
  }
  EXPECT_EQ(n_bad, 0) << what << ": " << n_bad << " of " << g.size()
                      << " elements out of tolerance; max abs error " << c.max_abs
                      << ", max |torch| " << c.max_ref << "; first bad at " << worst;
  return c;
}

class GradGolden : public testing::TestWithParam<std::string> {};

TEST_P(GradGolden, LossAndEveryGradientMatchPyTorch) {
  const std::string name = GetParam();
  const std::string fixture = "fixtures/grads/" + name + ".safetensors";
  if (!std::filesystem::exists(fixture))
    GTEST_SKIP() << fixture << " is absent: run tools/make_grad_fixtures.py (torch + transformers) "
                 << "and commit tests/fixtures/grads/";
  SafetensorsReader ref = SafetensorsReader::open(fixture);
  Transformer model = Transformer::load("fixtures/models/" + name, DType::kF32, Device::cpu());
  const auto& meta = ref.metadata();
  TrainOptions opts;
  opts.label_smoothing =
      meta.count("label_smoothing") ? std::stof(meta.at("label_smoothing")) : 0.0f;
  opts.ce_chunk_tokens = 9;  // several chunks, so chunking is covered against the reference too
  TrainableModel tm(model, opts);
  TrainBatch batch;
  batch.ids = ref.get("ids").clone();
  batch.targets = ref.get("targets").clone();
  batch.doc_ids = ref.get("doc_ids").clone();
  batch.positions = ref.get("positions").clone();
  LossStats st = tm.forward_backward(batch, 1.0f);
  const double want_loss =
      meta.count("loss_f64") ? std::stod(meta.at("loss_f64")) : ref.get("loss").item<float>();
  double got_loss = st.mean();
  if (model.config.is_moe()) {
    // tools/make_moe_fixtures.py: loss = CE + aux_coef * aux + z_coef * z.
    json mm = tm.take_moe_metrics();
    EXPECT_NEAR(st.mean(), std::stod(meta.at("ce_f64")), 1e-5);
    EXPECT_NEAR(mm["router_aux_loss"].get<double>(), std::stod(meta.at("aux_f64")), 1e-5);
    EXPECT_NEAR(mm["router_z_loss"].get<double>(), std::stod(meta.at("z_f64")), 1e-4);
    got_loss += model.config.router_aux_loss_coef * mm["router_aux_loss"].get<double>() +
                model.config.router_z_loss_coef * mm["router_z_loss"].get<double>();
  }
  EXPECT_NEAR(got_loss, want_loss, 1e-5 * std::fabs(want_loss));
  if (meta.count("n_target_tokens")) EXPECT_EQ(st.n_tokens, std::stoll(meta.at("n_target_tokens")));
  std::printf("[golden] %s: loss vela %.8f torch %.8f (%lld tokens)\n", name.c_str(), got_loss,
              want_loss, static_cast<long long>(st.n_tokens));

  const ModelConfig& c = model.config;
  const int64_t qd = c.q_dim(), kvd = c.kv_dim();
  int n_compared = 0;
  double worst_rel = 0.0;
  auto check = [&](const std::string& hf_name, const Tensor& got) {
    const std::string key = "grad." + hf_name;
    ASSERT_TRUE(ref.contains(key)) << fixture << " has no " << key;
    Compared cmp = compare(got, ref.get(key), hf_name);
    worst_rel = std::max(worst_rel, cmp.max_ref > 0 ? cmp.max_abs / cmp.max_ref : 0.0);
    ++n_compared;
  };
  for (const Parameter& p : tm.parameters()) {
    const std::string& n = p.name;
    auto ends = [&](const std::string& s) {
      return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
    };
    if (ends("qkv_proj.weight") || ends("qkv_proj.bias")) {
      const std::string base = n.substr(0, n.find("qkv_proj."));
      const std::string kind = ends("weight") ? "weight" : "bias";
      check(base + "q_proj." + kind, p.grad.slice(0, 0, qd));
      check(base + "k_proj." + kind, p.grad.slice(0, qd, qd + kvd));
      check(base + "v_proj." + kind, p.grad.slice(0, qd + kvd, qd + 2 * kvd));
    } else if (ends("gate_up_proj.weight")) {
      const std::string base = n.substr(0, n.find("gate_up_proj."));
      const int64_t inter = p.grad.size(0) / 2;  // the MLP's, or a shared expert's
      check(base + "gate_proj.weight", p.grad.slice(0, 0, inter));
      check(base + "up_proj.weight", p.grad.slice(0, inter, 2 * inter));
    } else {
      check(n, p.grad);
    }
  }
  int n_ref = 0;
  for (const std::string& k : ref.names()) n_ref += k.rfind("grad.", 0) == 0;
  EXPECT_EQ(n_compared, n_ref) << "the fixture holds gradients vela has no parameter for";
  std::printf("[golden] %s: %d gradient tensors, worst max|err| / max|torch| = %.3e\n",
              name.c_str(), n_compared, worst_rel);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GradGolden,
                         testing::Values("llama_gqa", "qwen2_bias_tied", "qwen3_qknorm",
                                         "qwen3_moe", "mixtral", "qwen2_moe_shared"));

}  // namespace
}  // namespace vela
