// AdamW with fp32 master weights; see adamw.h for the update.
#include "train/optim/adamw.h"

#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/parallel.h"
#include "ops/cast.h"

namespace vela {

MasterWeights make_master(const Parameter& p) {
  VELA_CHECK(p.value.defined() && is_floating(p.value.dtype()), "parameter ", p.name,
             " has no floating-point value tensor");
  VELA_CHECK(p.grad.defined() && p.grad.shape() == p.value.shape(), "parameter ", p.name, ": grad ",
             p.grad.defined() ? p.grad.str() : std::string("undefined"), " does not match value ",
             p.value.str());
  MasterWeights w;
  if (p.value.is_cpu() && p.value.dtype() == DType::kF32 && p.value.is_contiguous()) {
    w.master = p.value;
    w.aliases_value = true;
  } else {
    Tensor host = p.value.to(Device::cpu());
    w.master = host.dtype() == DType::kF32 ? host.clone() : ops::to_dtype(host, DType::kF32);
  }
  return w;
}

void write_back(const MasterWeights& w, Parameter& p) {
  if (w.aliases_value) return;
  if (p.value.dtype() == DType::kF32) {
    p.value.copy_(w.master);
    return;
  }
  Tensor rounded = ops::to_dtype(w.master, p.value.dtype());  // CPU, round to nearest even
  p.value.copy_(rounded);
}

Tensor host_grad(const Parameter& p) {
  VELA_CHECK(p.grad.dtype() == DType::kF32, "gradient of ", p.name, " must be f32, got ",
             p.grad.str());
  return p.grad.to(Device::cpu()).contiguous();
}

AdamW::AdamW(const OptimizerConfig& config, ParameterList& params, std::vector<size_t> indices)
    : config_(config), params_(params), indices_(std::move(indices)) {
  config_.validate();
  if (indices_.empty()) {
    indices_.resize(params_.size());
    std::iota(indices_.begin(), indices_.end(), size_t{0});
  }
  for (size_t i : indices_) {
    VELA_ASSERT(i < params_.size());
    const Parameter& p = params_[i];
    master_.push_back(make_master(p));
    exp_avg_.push_back(Tensor::zeros(p.value.shape(), DType::kF32));
    exp_avg_sq_.push_back(Tensor::zeros(p.value.shape(), DType::kF32));
  }
}

void AdamW::step(double lr) {
  step_with_count(lr, step_count_ + 1);
  ++step_count_;
}

void AdamW::step_with_count(double lr, int64_t t) {
  VELA_CHECK(std::isfinite(lr) && lr >= 0, "AdamW: learning rate must be finite and >= 0, got ",
             lr);
  const float b1 = static_cast<float>(config_.beta1);
  const float b2 = static_cast<float>(config_.beta2);
  const double bc1 = 1.0 - std::pow(config_.beta1, static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(config_.beta2, static_cast<double>(t));
  const float step_size = static_cast<float>(lr / bc1);
  const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  const float eps = static_cast<float>(config_.eps);
  for (size_t k = 0; k < indices_.size(); ++k) {
    Parameter& p = params_[indices_[k]];
    const float decay =
        param_decays(p, config_) ? static_cast<float>(1.0 - lr * config_.weight_decay) : 1.0f;
    Tensor g_t = host_grad(p);
    const float* g = g_t.data<float>();
    float* w = master_[k].master.data<float>();
    float* m = exp_avg_[k].data<float>();
    float* v = exp_avg_sq_[k].data<float>();
    parallel_for(g_t.numel(), 1 << 14, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const float gi = g[i];
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        const float denom = std::sqrt(v[i]) * inv_sqrt_bc2 + eps;
        w[i] = w[i] * decay - step_size * (m[i] / denom);
      }
    });
    write_back(master_[k], p);
  }
}

void AdamW::collect_state(std::vector<std::pair<std::string, Tensor>>& tensors,
                          json& scalars) const {
  for (size_t k = 0; k < indices_.size(); ++k) {
    const std::string& name = params_[indices_[k]].name;
    tensors.emplace_back(name + ".exp_avg", exp_avg_[k]);
    tensors.emplace_back(name + ".exp_avg_sq", exp_avg_sq_[k]);
    if (!master_[k].aliases_value) tensors.emplace_back(name + ".master", master_[k].master);
  }
  scalars["adamw"] = config_.to_json();
}

namespace {

void restore_tensor(const SafetensorsReader& reader, const std::string& key, Tensor& dst) {
  VELA_CHECK(reader.contains(key), "optimizer state has no tensor '", key,
             "' (was it saved for a different model?)");
  Tensor src = reader.get(key);
  VELA_CHECK(src.dtype() == DType::kF32 && src.shape() == dst.shape(), "optimizer state tensor '",
             key, "' is ", src.str(), ", expected f32", dst.shape().str());
  dst.copy_(src);
}

}  // namespace

void AdamW::restore_state(const SafetensorsReader& reader, const json& /*scalars*/) {
  for (size_t k = 0; k < indices_.size(); ++k) {
    Parameter& p = params_[indices_[k]];
    restore_tensor(reader, p.name + ".exp_avg", exp_avg_[k]);
    restore_tensor(reader, p.name + ".exp_avg_sq", exp_avg_sq_[k]);
    if (!master_[k].aliases_value) {
      if (reader.contains(p.name + ".master")) {
        restore_tensor(reader, p.name + ".master", master_[k].master);
        write_back(master_[k], p);
      } else {
        // Saved from f32 weights (the model checkpoint holds the master copy): take it from the
        // compute weights, which the caller loaded first.
        master_[k] = make_master(p);
      }
    }
  }
}

}  // namespace vela
