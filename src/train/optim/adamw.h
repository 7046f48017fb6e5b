// AdamW (Loshchilov & Hutter 2019, torch.optim.AdamW semantics) with fp32 master weights.
// Per element, at update t (1-based), with g the f32 gradient:
//   p <- p * (1 - lr * weight_decay)                     (decoupled; only decayed params)
//   m <- beta1 * m + (1 - beta1) * g
//   v <- beta2 * v + (1 - beta2) * g^2
//   p <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// then the compute weights receive p (rounded to their dtype). One fused ops::adamw_update per
// parameter, on the parameter's device. Also used by Muon for the params it does not
// orthogonalize, over a subset of the list.
#pragma once

#include <vector>

#include "train/optim/optimizer.h"

namespace vela {

// The per-parameter state AdamW keeps; shared with Muon (which adds a momentum buffer).
struct MasterWeights {
  Tensor master;  // f32 on the param's device, its shape; aliases value when that is contiguous f32
  bool aliases_value = false;
};

// Makes the master copy of `p` (see MasterWeights; checks that value and grad share a device) and
// writes it back into the compute weights after an update (stream-ordered on CUDA).
MasterWeights make_master(const Parameter& p);
void write_back(const MasterWeights& w, Parameter& p);
// The param's grad as a contiguous f32 tensor on its device (no copy when it already is one).
Tensor dense_grad(const Parameter& p);

class AdamW : public Optimizer {
 public:
  // `indices` selects the params this instance updates (all when empty).
  AdamW(const OptimizerConfig& config, ParameterList& params, std::vector<size_t> indices = {});

  void step(double lr) override;
  std::string kind() const override { return "adamw"; }

  // For Muon, which owns the step counter of the whole update.
  void step_with_count(double lr, int64_t t);

 protected:
  void collect_state(std::vector<std::pair<std::string, Tensor>>& tensors,
                     json& scalars) const override;
  void restore_state(const SafetensorsReader& reader, const json& scalars) override;

 private:
  friend class Muon;
  OptimizerConfig config_;
  ParameterList& params_;
  std::vector<size_t> indices_;
  std::vector<MasterWeights> master_;  // per selected param
  std::vector<Tensor> exp_avg_;        // m: f32 on the param's device, shape of the param
  std::vector<Tensor> exp_avg_sq_;     // v: f32 on the param's device, shape of the param
};

}  // namespace vela
