// dpo strategy: DPO / cDPO / IPO over preference pairs; see dpo.h.
#include "train/strategies/dpo.h"

#include <cmath>

#include "core/error.h"
#include "train/trainable_model.h"
#include "train/trainer.h"

namespace vela {

namespace {

// log(sigmoid(x)), stable for large |x|.
double log_sigmoid(double x) {
  return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x));
}
double sigmoid(double x) {
  return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x));
}

// Rows 2i and 2i + 1 form pair i; it counts when both sides have a target.
std::vector<bool> valid_pairs(const TrainBatch& b) {
  const int64_t rows = b.targets.size(0), seq = b.targets.size(1);
  VELA_CHECK(rows % 2 == 0, "dpo: a preference batch has an even number of rows, got ", rows);
  std::vector<int32_t> t = b.targets.to_vector<int32_t>();
  std::vector<bool> ok(static_cast<size_t>(rows / 2));
  for (int64_t i = 0; i < rows / 2; ++i) {
    bool c = false, r = false;
    for (int64_t s = 0; s < seq; ++s) {
      c = c || t[(2 * i) * seq + s] != kIgnoreIndex;
      r = r || t[(2 * i + 1) * seq + s] != kIgnoreIndex;
    }
    ok[static_cast<size_t>(i)] = c && r;
  }
  return ok;
}

}  // namespace

DpoPairLoss dpo_pair_loss(const DpoConfig& c, double h) {
  DpoPairLoss r;
  if (c.loss == "ipo") {
    const double d = h - 1.0 / (2.0 * c.beta);
    r.loss = d * d;
    r.dloss_dh = 2.0 * d;
    return r;
  }
  const double eps = c.label_smoothing, bh = c.beta * h;
  r.loss = -(1 - eps) * log_sigmoid(bh) - eps * log_sigmoid(-bh);
  r.dloss_dh = -(1 - eps) * c.beta * sigmoid(-bh) + eps * c.beta * sigmoid(bh);
  return r;
}

DpoStrategy::DpoStrategy(DpoConfig config) : config_(std::move(config)) { config_.validate(); }

void DpoStrategy::attach(Trainer& t) {
  chunk_rows_ = t.config().train.ce_chunk_tokens;
  if (!ref_)
    ref_ = std::make_unique<ReferenceModel>(
        ReferenceModel::for_policy(config_.reference, t.config(), t.model(), t.model_from_config(),
                                   t.resumed_from_step() >= 0));
}

int64_t DpoStrategy::loss_units(const TrainBatch& b) const {
  int64_t n = 0;
  for (bool v : valid_pairs(b)) n += v;
  return n;
}

std::vector<double> DpoStrategy::row_sums(const TrainBatch& b,
                                          const std::vector<float>& logp) const {
  const int64_t rows = b.ids.size(0), seq = b.ids.size(1);
  std::vector<double> s(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < seq; ++t) s[static_cast<size_t>(r)] += logp[r * seq + t];
  return s;
}

MicroLoss DpoStrategy::forward_backward(TrainableModel& model, const TrainBatch& batch,
                                        float loss_scale) {
  VELA_CHECK(ref_ != nullptr, "dpo: no reference model (attach() was not called)");
  const std::vector<bool> ok = valid_pairs(batch);
  int64_t n_pairs = 0;
  for (bool v : ok) n_pairs += v;
  if (n_pairs == 0) return {};
  const std::vector<double> ref = row_sums(batch, ref_->token_logprobs(batch, chunk_rows_));
  const int64_t seq = batch.ids.size(1);
  const std::vector<int32_t> targets = batch.targets.to_vector<int32_t>();
  double loss_sum = 0;
  Sums step;
  model.forward_backward_logprobs(batch, [&](const std::vector<float>& logp) {
    const std::vector<double> pol = row_sums(batch, logp);
    std::vector<float> coef(logp.size(), 0.0f);
    for (size_t i = 0; i < ok.size(); ++i) {
      if (!ok[i]) continue;
      const double pc = pol[2 * i], pr = pol[2 * i + 1], rc = ref[2 * i], rr = ref[2 * i + 1];
      const double h = (pc - pr) - (rc - rr);
      DpoPairLoss l = dpo_pair_loss(config_, h);
      loss_sum += l.loss;
      const double rw_c = config_.beta * (pc - rc), rw_r = config_.beta * (pr - rr);
      step.n += 1;
      step.acc += rw_c > rw_r ? 1.0 : 0.0;
      step.chosen += rw_c;
      step.rejected += rw_r;
      step.logp_chosen += pc;
      step.logp_rejected += pr;
      const float g = static_cast<float>(l.dloss_dh * loss_scale / static_cast<double>(n_pairs));
      for (int64_t t = 0; t < seq; ++t) {
        const int64_t c = static_cast<int64_t>(2 * i) * seq + t, r = c + seq;
        if (targets[c] != kIgnoreIndex) coef[c] = g;
        if (targets[r] != kIgnoreIndex) coef[r] = -g;
      }
    }
    return coef;
  });
  sums_.n += step.n;
  sums_.acc += step.acc;
  sums_.chosen += step.chosen;
  sums_.rejected += step.rejected;
  sums_.logp_chosen += step.logp_chosen;
  sums_.logp_rejected += step.logp_rejected;
  return {loss_sum, n_pairs};
}

MicroLoss DpoStrategy::evaluate(TrainableModel& model, const TrainBatch& batch) {
  VELA_CHECK(ref_ != nullptr, "dpo: no reference model (attach() was not called)");
  const std::vector<bool> ok = valid_pairs(batch);
  const std::vector<double> ref = row_sums(batch, ref_->token_logprobs(batch, chunk_rows_));
  const std::vector<double> pol = row_sums(batch, model.token_logprobs(batch));
  MicroLoss m;
  for (size_t i = 0; i < ok.size(); ++i) {
    if (!ok[i]) continue;
    const double h = (pol[2 * i] - pol[2 * i + 1]) - (ref[2 * i] - ref[2 * i + 1]);
    m.loss_sum += dpo_pair_loss(config_, h).loss;
    m.n_units += 1;
  }
  return m;
}

json DpoStrategy::step_metrics() const {
  if (sums_.n == 0) return json::object();
  const double n = static_cast<double>(sums_.n);
  return json{{"pref_acc", sums_.acc / n},
              {"reward_chosen", sums_.chosen / n},
              {"reward_rejected", sums_.rejected / n},
              {"reward_margin", (sums_.chosen - sums_.rejected) / n},
              {"logp_chosen", sums_.logp_chosen / n},
              {"logp_rejected", sums_.logp_rejected / n},
              {"n_pairs", sums_.n}};
}

}  // namespace vela
