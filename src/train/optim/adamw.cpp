// AdamW with fp32 master weights; see adamw.h for the update. State lives on the parameter's
// device; a step launches one fused ops::adamw_update per parameter and never waits for it.
#include "train/optim/adamw.h"

#include <cmath>
#include <numeric>

#include "core/error.h"
#include "ops/cast.h"
#include "ops/optim.h"

namespace vela {

MasterWeights make_master(const Parameter& p) {
  VELA_CHECK(p.value.defined() && is_floating(p.value.dtype()), "parameter ", p.name,
             " has no floating-point value tensor");
  VELA_CHECK(p.grad.defined() && p.grad.shape() == p.value.shape(), "parameter ", p.name, ": grad ",
             p.grad.defined() ? p.grad.str() : std::string("undefined"), " does not match value ",
             p.value.str());
  VELA_CHECK(p.grad.device() == p.value.device(), "parameter ", p.name, ": grad ", p.grad.str(),
             " is not on the device of value ", p.value.str());
  MasterWeights w;
  if (p.value.dtype() == DType::kF32 && p.value.is_contiguous()) {
    w.master = p.value;
    w.aliases_value = true;
  } else if (p.value.dtype() == DType::kF32) {
    w.master = p.value.clone();
  } else {
    w.master = ops::to_dtype(p.value, DType::kF32);  // on the value's device
  }
  return w;
}

void write_back(const MasterWeights& w, Parameter& p) {
  if (w.aliases_value) return;
  if (p.value.is_contiguous()) {
    ops::cast(w.master, p.value);  // round to nearest even; a plain copy for f32
    return;
  }
  p.value.copy_(ops::to_dtype(w.master, p.value.dtype()));
}

Tensor dense_grad(const Parameter& p) {
  VELA_CHECK(p.grad.dtype() == DType::kF32, "gradient of ", p.name, " must be f32, got ",
             p.grad.str());
  VELA_CHECK(p.grad.device() == p.value.device(), "gradient of ", p.name, " ", p.grad.str(),
             " is not on the device of its value ", p.value.str());
  return p.grad.contiguous();
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
    exp_avg_.push_back(Tensor::zeros(p.value.shape(), DType::kF32, p.value.device()));
    exp_avg_sq_.push_back(Tensor::zeros(p.value.shape(), DType::kF32, p.value.device()));
  }
}

void AdamW::step(double lr) {
  step_with_count(lr, step_count_ + 1);
  ++step_count_;
}

void AdamW::step_with_count(double lr, int64_t t) {
  VELA_CHECK(std::isfinite(lr) && lr >= 0, "AdamW: learning rate must be finite and >= 0, got ",
             lr);
  ops::AdamWHyper h;
  h.b1 = static_cast<float>(config_.beta1);
  h.b2 = static_cast<float>(config_.beta2);
  const double bc1 = 1.0 - std::pow(config_.beta1, static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(config_.beta2, static_cast<double>(t));
  h.step_size = static_cast<float>(lr / bc1);
  h.inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  h.eps = static_cast<float>(config_.eps);
  for (size_t k = 0; k < indices_.size(); ++k) {
    Parameter& p = params_[indices_[k]];
    h.decay = param_decays(p, config_) ? static_cast<float>(1.0 - lr * config_.weight_decay) : 1.0f;
    MasterWeights& mw = master_[k];
    // The kernel writes the rounded compute weights itself unless the master is the value; a
    // strided value (never one of the model's own weights) is written back afterwards.
    const bool fused_write = !mw.aliases_value && p.value.is_contiguous();
    Tensor weight = fused_write ? p.value : Tensor();
    ops::adamw_update(mw.master, dense_grad(p), exp_avg_[k], exp_avg_sq_[k], weight, h);
    if (!mw.aliases_value && !fused_write) write_back(mw, p);
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
