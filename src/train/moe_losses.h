// Router losses of a mixture-of-experts model in training, and the expert-load metrics.
//
// Load-balancing loss (Switch Transformer / Mixtral form, as transformers'
// load_balancing_loss_func computes it without an attention mask): over the N rows of every MoE
// layer together (N = n_moe_layers * tokens),
//   aux = E * sum_e f_e * P_e,  f_e = (top-k selections of expert e) / N,  P_e = mean_rows p[., e]
// added to the loss as router_aux_loss_coef * aux when the config has output_router_logits (as
// transformers does). Router z-loss (ST-MoE): z = mean over the same rows of logsumexp(logits)^2,
// added as router_z_loss_coef * z (vela's config extension; 0 = off). f_e carries no gradient.
#pragma once

#include <cstdint>
#include <vector>

#include "core/json.h"
#include "model/model_config.h"
#include "nn/decoder_block.h"

namespace vela {

struct RouterLosses {
  double aux = 0;       // unweighted load-balancing loss (0 without MoE layers)
  double z = 0;         // unweighted z-loss
  double weighted = 0;  // what was added to the loss: aux_coef * aux (when on) + z_coef * z
};

// From the router statistics each MoE layer's forward left in saved[l].moe_stats, computes both
// losses and sets saved[l].router_grad (their gradient times loss_scale) for backward.
RouterLosses apply_router_losses(const ModelConfig& c, std::vector<DecoderBlockSaved>& saved,
                                 float loss_scale, Device device);

// Expert-load metrics accumulated over micro-batches (per layer: the fraction of the (token,
// slot) pairs each expert received) and the router losses' running means.
class MoeMetrics {
 public:
  void add(const std::vector<DecoderBlockSaved>& saved, const RouterLosses& losses);
  // {"router_aux_loss", "router_z_loss", "moe_load_max" (worst layer's max_e f_e * E / k; 1 =
  // balanced), "moe_layers": [{"layer", "load_max", "load": [E fractions]}]}; resets. Empty
  // object when nothing was recorded.
  json take();

 private:
  std::vector<int64_t> layers_;
  std::vector<MoeStats> stats_;
  double aux_sum_ = 0, z_sum_ = 0;
  int64_t n_batches_ = 0;
};

}  // namespace vela
