// Muon: Newton-Schulz orthogonalized momentum for the 2-D hidden matrices, AdamW for the rest;
// see muon.h for the update, the coefficients and the scales.
#include "train/optim/muon.h"

#include <algorithm>
#include <cmath>

#include "core/cuda/cuda_api.h"
#include "core/error.h"
#include "ops/cast.h"
#include "ops/gemm.h"
#include "ops/optim.h"

namespace vela {
namespace {

// Jordan's quintic coefficients (github.com/KellerJordan/Muon, muon.py).
constexpr float kNsA = 3.4445f, kNsB = -4.7750f, kNsC = 2.0315f;

// A new contiguous copy of the view `t` on its device. On CUDA a stream-ordered gather:
// Tensor::clone would wait for the copy, once per matrix per step.
Tensor dense_copy(const Tensor& t) {
  if (t.is_cpu()) return t.clone();
  Tensor out = Tensor::empty(t.shape(), t.dtype(), t.device());
  cuda::strided_copy(out.data_ptr(), t.data_ptr(), t.element_size(), t.dim(), t.shape().begin(),
                     t.strides().begin(), t.device().index);
  return out;
}

Tensor transpose_copy(const Tensor& x) { return dense_copy(x.transpose(0, 1)); }

}  // namespace

Tensor newton_schulz5(const Tensor& g, int n_steps, DType dtype) {
  VELA_CHECK(g.dim() == 2 && g.dtype() == DType::kF32,
             "newton_schulz5: expected a 2-D f32 matrix, got ", g.str());
  const bool tall = g.size(0) > g.size(1);
  Tensor x = tall ? transpose_copy(g) : dense_copy(g);  // [r, c], r <= c
  const int64_t r = x.size(0);
  if (x.is_cpu()) {
    const int64_t n = x.numel();
    float* xp = x.data<float>();
    double sq = 0;
    for (int64_t i = 0; i < n; ++i) sq += static_cast<double>(xp[i]) * xp[i];
    const float inv = static_cast<float>(1.0 / (std::sqrt(sq) + 1e-7));
    for (int64_t i = 0; i < n; ++i) xp[i] *= inv;
  } else {
    // The same X / (||X||_F + 1e-7), with the norm reduced and applied on the device.
    std::vector<Tensor> xs = {x};
    Tensor sq = ops::make_f64_scalar(x.device());
    ops::sum_squares(xs, sq);
    ops::scale_by_norm(xs, sq, 1.0, 1e-7, -1.0);
  }

  VELA_CHECK(dtype == DType::kF32 || (dtype == DType::kBF16 && x.is_cuda()),
             "newton_schulz5: the iteration runs in f32, or in bf16 on CUDA; got ",
             dtype_name(dtype), " on ", x.device().str());
  if (dtype != DType::kF32) {
    Tensor xf = x;
    x = Tensor::empty(xf.shape(), dtype, xf.device());
    ops::cast(xf, x);
  }
  Tensor a = Tensor::empty({r, r}, dtype, x.device());  // X X^T
  Tensor b = Tensor::empty({r, r}, dtype, x.device());  // b A + c A A
  Tensor next = Tensor::empty(x.shape(), dtype, x.device());
  for (int s = 0; s < n_steps; ++s) {
    ops::gemm(x, x, a, /*trans_a=*/false, /*trans_b=*/true);
    ops::cast(a, b);  // a copy (stream-ordered on CUDA)
    ops::gemm(a, a, b, false, false, /*alpha=*/kNsC, /*beta=*/kNsB);  // b = c A A + b A
    ops::cast(x, next);
    ops::gemm(b, x, next, false, false, 1.0f, /*beta=*/kNsA);  // a X + B X
    std::swap(x, next);
  }
  if (dtype != DType::kF32) {
    Tensor xf = Tensor::empty(x.shape(), DType::kF32, x.device());
    ops::cast(x, xf);
    x = xf;
  }
  return tall ? transpose_copy(x) : x;
}

Muon::Muon(const OptimizerConfig& config, ParameterList& params)
    : config_(config), params_(params) {
  config_.validate();
  std::vector<size_t> rest;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Parameter& p = params_[i];
    if (p.kind == ParamKind::kMatrix) {
      VELA_CHECK(p.value.dim() == 2, "Muon: matrix parameter ", p.name, " is ", p.value.str(),
                 ", expected 2-D");
      VELA_CHECK(config_.muon_ns_dtype != "bf16" || p.value.is_cuda(),
                 "Muon: muon_ns_dtype bf16 needs the parameters on CUDA (", p.name, " is on ",
                 p.value.device().str(), "); use f32 or auto");
      muon_idx_.push_back(i);
      master_.push_back(make_master(p));
      momentum_.push_back(Tensor::zeros(p.value.shape(), DType::kF32, p.value.device()));
    } else {
      rest.push_back(i);
    }
  }
  // An AdamW over an empty subset would take every param: only build it when there is a rest.
  if (!rest.empty()) adamw_ = std::make_unique<AdamW>(config_, params_, rest);
}

void Muon::set_row_blocks(const std::string& name, std::vector<int64_t> rows) {
  for (size_t i : muon_idx_) {
    if (params_[i].name != name) continue;
    int64_t total = 0;
    for (int64_t r : rows) {
      VELA_CHECK(r > 0, "Muon: row block of ", name, " must be positive, got ", r);
      total += r;
    }
    VELA_CHECK(total == params_[i].value.size(0), "Muon: row blocks of ", name, " add up to ",
               total, " but it has ", params_[i].value.size(0), " rows");
    row_blocks_[name] = std::move(rows);
    return;
  }
  VELA_THROW(InvalidArgument, "Muon: no matrix parameter named '", name, "'");
}

void Muon::step(double lr) {
  VELA_CHECK(std::isfinite(lr) && lr >= 0, "Muon: learning rate must be finite and >= 0, got ", lr);
  const int64_t t = step_count_ + 1;
  const float mu = static_cast<float>(config_.muon_momentum);
  const double lr_m = lr * config_.muon_lr_mult;
  const double wd =
      config_.muon_weight_decay >= 0 ? config_.muon_weight_decay : config_.weight_decay;
  const float decay = static_cast<float>(1.0 - lr_m * wd);
  for (size_t k = 0; k < muon_idx_.size(); ++k) {
    Parameter& p = params_[muon_idx_[k]];
    Tensor g = dense_grad(p);
    const bool low = p.value.dtype() == DType::kBF16 || p.value.dtype() == DType::kF16;
    const DType ns_dtype = config_.muon_ns_dtype == "bf16" ||
                                   (config_.muon_ns_dtype == "auto" && p.value.is_cuda() && low)
                               ? DType::kBF16
                               : DType::kF32;
    Tensor u = Tensor::empty(g.shape(), DType::kF32, g.device());  // what NS orthogonalizes
    ops::muon_momentum(momentum_[k], g, u, mu, config_.muon_nesterov);
    const int64_t cols = g.size(1);
    std::vector<int64_t> blocks = {g.size(0)};
    if (auto it = row_blocks_.find(p.name); it != row_blocks_.end()) blocks = it->second;
    int64_t row0 = 0;
    for (int64_t rows : blocks) {
      Tensor o = newton_schulz5(u.slice(0, row0, row0 + rows), config_.muon_ns_steps, ns_dtype);
      const double scale = config_.muon_scale == "moonlight"
                               ? 0.2 * std::sqrt(static_cast<double>(std::max(rows, cols)))
                               : std::sqrt(std::max(1.0, static_cast<double>(rows) / cols));
      Tensor w = master_[k].master.slice(0, row0, row0 + rows);  // whole rows: contiguous
      ops::decayed_step(w, o, decay, static_cast<float>(lr_m * scale));
      row0 += rows;
    }
    write_back(master_[k], p);
  }
  if (adamw_) adamw_->step_with_count(lr, t);
  step_count_ = t;
}

void Muon::collect_state(std::vector<std::pair<std::string, Tensor>>& tensors,
                         json& scalars) const {
  for (size_t k = 0; k < muon_idx_.size(); ++k) {
    const std::string& name = params_[muon_idx_[k]].name;
    tensors.emplace_back(name + ".momentum_buffer", momentum_[k]);
    if (!master_[k].aliases_value) tensors.emplace_back(name + ".master", master_[k].master);
  }
  if (adamw_) adamw_->collect_state(tensors, scalars);
  scalars["muon"] = config_.to_json();
}

void Muon::restore_state(const SafetensorsReader& reader, const json& scalars) {
  for (size_t k = 0; k < muon_idx_.size(); ++k) {
    Parameter& p = params_[muon_idx_[k]];
    const std::string key = p.name + ".momentum_buffer";
    VELA_CHECK(reader.contains(key), "optimizer state has no tensor '", key,
               "' (was it saved for a different model?)");
    Tensor src = reader.get(key);
    VELA_CHECK(src.dtype() == DType::kF32 && src.shape() == momentum_[k].shape(),
               "optimizer state tensor '", key, "' is ", src.str(), ", expected f32",
               momentum_[k].shape().str());
    momentum_[k].copy_(src);
    if (!master_[k].aliases_value) {
      if (reader.contains(p.name + ".master")) {
        Tensor m = reader.get(p.name + ".master");
        VELA_CHECK(m.dtype() == DType::kF32 && m.shape() == p.value.shape(),
                   "optimizer state tensor '", p.name, ".master' is ", m.str());
        master_[k].master.copy_(m);
        write_back(master_[k], p);
      } else {
        master_[k] = make_master(p);
      }
    }
  }
  if (adamw_) adamw_->restore_state(reader, scalars);
}

}  // namespace vela
