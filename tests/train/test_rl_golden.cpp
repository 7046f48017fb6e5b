// DPO / cDPO / IPO and GRPO (clipped ratio, k3 KL) losses and their gradients w.r.t. the
// log-probs against PyTorch (tests/fixtures/rl/rl_losses.json, made by tools/make_rl_fixtures.py
// in float64 with autograd on the GPU machine). The gradients w.r.t. the model follow from these
// through the log-prob head, checked by finite differences in test_rl_losses.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/json.h"
#include "train/strategies/dpo.h"
#include "train/strategies/grpo.h"

namespace vela {
namespace {

json load_fixture() {
  std::ifstream f("fixtures/rl/rl_losses.json");
  return f.good() ? json::parse(f) : json();
}

TEST(RlGolden, DpoLossesAndGradientsMatchPyTorch) {
  json fx = load_fixture();
  if (fx.is_null()) GTEST_SKIP() << "fixtures/rl/rl_losses.json missing";
  int64_t n = 0;
  for (const json& set : fx["dpo"]) {
    DpoConfig c;
    c.beta = set["config"]["beta"].get<double>();
    c.loss = set["config"]["loss"].get<std::string>();
    c.label_smoothing = set["config"]["label_smoothing"].get<double>();
    for (const json& p : set["pairs"]) {
      const double h =
          (p[0].get<double>() - p[1].get<double>()) - (p[2].get<double>() - p[3].get<double>());
      DpoPairLoss l = dpo_pair_loss(c, h);
      EXPECT_NEAR(l.loss, p[4].get<double>(), 1e-12 * (1 + std::fabs(l.loss))) << c.loss;
      // dL/dlogp_chosen = dL/dh.
      EXPECT_NEAR(l.dloss_dh, p[5].get<double>(), 1e-12 * (1 + std::fabs(l.dloss_dh))) << c.loss;
      ++n;
    }
  }
  EXPECT_EQ(n, 48);
}

TEST(RlGolden, GrpoTokenLossesAndGradientsMatchPyTorch) {
  json fx = load_fixture();
  if (fx.is_null()) GTEST_SKIP() << "fixtures/rl/rl_losses.json missing";
  int64_t n = 0, n_clipped = 0;
  for (const json& set : fx["grpo"]) {
    GrpoConfig c;
    c.clip_eps = set["config"]["clip_eps"].get<double>();
    c.clip_eps_high = set["config"]["clip_eps_high"].get<double>();
    c.kl_coef = set["config"]["kl_coef"].get<double>();
    for (const json& t : set["tokens"]) {
      GrpoTokenLoss l = grpo_token_loss(c, t[0].get<double>(), t[1].get<double>(),
                                        t[3].get<double>(), t[2].get<double>());
      EXPECT_NEAR(l.loss, t[4].get<double>(), 1e-12 * (1 + std::fabs(l.loss)));
      EXPECT_NEAR(l.dloss_dlogp, t[5].get<double>(), 1e-12 * (1 + std::fabs(l.dloss_dlogp)));
      n_clipped += l.clipped;
      ++n;
    }
  }
  EXPECT_EQ(n, 64);
  EXPECT_GT(n_clipped, 0);  // the fixture exercises the clip
}

}  // namespace
}  // namespace vela
