// Router losses (load balancing, z-loss) and expert-load metrics; see moe_losses.h.
#include "train/moe_losses.h"

#include <algorithm>

namespace vela {

RouterLosses apply_router_losses(const ModelConfig& c, std::vector<DecoderBlockSaved>& saved,
                                 float loss_scale, Device device) {
  RouterLosses out;
  if (!c.is_moe()) return out;
  const int64_t n_exp = c.n_experts;
  MoeStats all;
  for (size_t l = 0; l < saved.size(); ++l)
    if (c.is_moe_layer(static_cast<int64_t>(l))) all.add(saved[l].moe_stats);
  if (all.n_tokens == 0) return out;
  const double n = static_cast<double>(all.n_tokens);
  for (int64_t e = 0; e < n_exp; ++e)
    out.aux += (static_cast<double>(all.counts[e]) / n) * (all.prob_sum[e] / n);
  out.aux *= static_cast<double>(n_exp);
  out.z = all.lse_sq_sum / n;
  const bool aux_on = c.output_router_logits && c.router_aux_loss_coef > 0;
  out.weighted = (aux_on ? c.router_aux_loss_coef * out.aux : 0.0) + c.router_z_loss_coef * out.z;
  Tensor bias;
  if (aux_on) {
    std::vector<float> b(static_cast<size_t>(n_exp));
    for (int64_t e = 0; e < n_exp; ++e)
      b[e] = static_cast<float>(loss_scale * c.router_aux_loss_coef * n_exp *
                                (static_cast<double>(all.counts[e]) / n) / n);
    bias = Tensor::from_vector(b).to(device);
  }
  const float z_scale = static_cast<float>(loss_scale * c.router_z_loss_coef / n);
  for (size_t l = 0; l < saved.size(); ++l) {
    if (!c.is_moe_layer(static_cast<int64_t>(l))) continue;
    saved[l].router_grad.dprob_bias = bias;
    saved[l].router_grad.z_scale = z_scale;
  }
  return out;
}

void MoeMetrics::add(const std::vector<DecoderBlockSaved>& saved, const RouterLosses& losses) {
  size_t slot = 0;
  for (size_t l = 0; l < saved.size(); ++l) {
    if (saved[l].moe_stats.counts.empty()) continue;
    if (slot == stats_.size()) {
      layers_.push_back(static_cast<int64_t>(l));
      stats_.emplace_back();
    }
    stats_[slot++].add(saved[l].moe_stats);
  }
  if (slot == 0) return;
  aux_sum_ += losses.aux;
  z_sum_ += losses.z;
  ++n_batches_;
}

json MoeMetrics::take() {
  json j = json::object();
  if (n_batches_ == 0) return j;
  j["router_aux_loss"] = aux_sum_ / static_cast<double>(n_batches_);
  j["router_z_loss"] = z_sum_ / static_cast<double>(n_batches_);
  json layers = json::array();
  double worst = 0;
  for (size_t i = 0; i < stats_.size(); ++i) {
    const MoeStats& s = stats_[i];
    int64_t pairs = 0;
    for (int64_t c : s.counts) pairs += c;
    std::vector<double> load(s.counts.size());
    double mx = 0;
    for (size_t e = 0; e < load.size(); ++e) {
      load[e] = pairs > 0 ? static_cast<double>(s.counts[e]) / static_cast<double>(pairs) : 0.0;
      mx = std::max(mx, load[e]);
    }
    const double load_max = mx * static_cast<double>(load.size());
    worst = std::max(worst, load_max);
    layers.push_back({{"layer", layers_[i]}, {"load_max", load_max}, {"load", load}});
  }
  j["moe_load_max"] = worst;
  j["moe_layers"] = layers;
  layers_.clear();
  stats_.clear();
  aux_sum_ = z_sum_ = 0;
  n_batches_ = 0;
  return j;
}

}  // namespace vela
