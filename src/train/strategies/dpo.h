// dpo: Direct Preference Optimisation over chosen/rejected pairs (dataset kind "pair": rows
// [c0, r0, c1, r1, ...], only response tokens are targets) against a frozen reference
// (train/rl/reference_model.h) whose log-probs are computed once per batch, forward only.
//
// Per pair, with sequence log-probs summed over the response tokens,
//   h = (log pi(c) - log pi(r)) - (log ref(c) - log ref(r))
//   sigmoid (DPO, cDPO with label smoothing eps):  L = -(1 - eps) log s(beta h) - eps log s(-beta
//   h) ipo:                                           L = (h - 1 / (2 beta))^2
// and the implicit rewards beta (log pi - log ref) of each side. The loss is the mean over the
// step's pairs; metrics: pref_acc (reward_chosen > reward_rejected), reward_chosen,
// reward_rejected, reward_margin, logp_chosen, logp_rejected (means over the step's pairs).
// The gradient is dL/dh pushed onto every response token of the pair (+ on chosen, - on rejected)
// through TrainableModel::forward_backward_logprobs. Pairs with an empty side are skipped.
#pragma once

#include <memory>
#include <vector>

#include "train/rl/reference_model.h"
#include "train/strategies/strategy.h"
#include "train/strategies/strategy_config.h"

namespace vela {

// The per-pair loss and dL/dh (h as above); exposed for the loss tests.
struct DpoPairLoss {
  double loss = 0, dloss_dh = 0;
};
DpoPairLoss dpo_pair_loss(const DpoConfig& c, double h);

class DpoStrategy final : public Strategy {
 public:
  explicit DpoStrategy(DpoConfig config);
  const char* name() const override { return "dpo"; }
  const char* data_kind() const override { return "pair"; }
  void attach(Trainer& trainer) override;
  void prepare_step(Trainer&, std::vector<TrainBatch>&) override { sums_ = {}; }
  int64_t loss_units(const TrainBatch& batch) const override;
  MicroLoss forward_backward(TrainableModel& model, const TrainBatch& batch,
                             float loss_scale) override;
  MicroLoss evaluate(TrainableModel& model, const TrainBatch& batch) override;
  json step_metrics() const override;

  // For tests: the reference the strategy was given instead of the one attach() builds.
  void set_reference(std::unique_ptr<ReferenceModel> reference) { ref_ = std::move(reference); }

 private:
  struct Sums {
    int64_t n = 0;
    double acc = 0, chosen = 0, rejected = 0, logp_chosen = 0, logp_rejected = 0;
  };
  // Per-row sums of `logp` over target tokens ([rows]).
  std::vector<double> row_sums(const TrainBatch& b, const std::vector<float>& logp) const;

  DpoConfig config_;
  std::unique_ptr<ReferenceModel> ref_;
  int64_t chunk_rows_ = 4096;
  Sums sums_;
};

}  // namespace vela
