// Global-norm clipping; see grad_clip.h. The reduction and the scaling are ops on the gradients'
// device; only the final double crosses to the host.
#include "train/optim/grad_clip.h"

#include <cmath>
#include <vector>

#include "core/error.h"
#include "ops/optim.h"

namespace vela {
namespace {

// The params' grads (checked f32, one device) and that device (the CPU for an empty list).
std::vector<Tensor> gradients(const ParameterList& params, bool need_contiguous, Device* device) {
  std::vector<Tensor> grads;
  grads.reserve(params.size());
  *device = params.empty() || !params[0].grad.defined() ? Device::cpu() : params[0].grad.device();
  for (const Parameter& p : params) {
    VELA_CHECK(p.grad.defined(), "parameter ", p.name, " has no gradient tensor");
    VELA_CHECK(p.grad.dtype() == DType::kF32, "gradient of ", p.name, " must be f32, got ",
               p.grad.str());
    VELA_CHECK(p.grad.device() == *device, "gradient of ", p.name, " ", p.grad.str(),
               " is not on the device of the first gradient (", params[0].grad.str(), ")");
    VELA_CHECK(!need_contiguous || p.grad.is_contiguous(), "gradient of ", p.name, " ",
               p.grad.str(), " must be contiguous to be clipped in place");
    grads.push_back(p.grad.contiguous());
  }
  return grads;
}

}  // namespace

double grad_global_norm(const ParameterList& params) {
  Device device;
  std::vector<Tensor> grads = gradients(params, false, &device);
  Tensor sum_sq = ops::make_f64_scalar(device);
  ops::sum_squares(grads, sum_sq);
  return std::sqrt(ops::read_f64_scalar(sum_sq));
}

double clip_grad_norm(ParameterList& params, double max_norm) {
  Device device;
  std::vector<Tensor> grads = gradients(params, true, &device);
  Tensor sum_sq = ops::make_f64_scalar(device);
  ops::sum_squares(grads, sum_sq);
  // Scales only a finite norm above max_norm, by max_norm / (norm + 1e-6): decided on the device.
  if (max_norm > 0) ops::scale_by_norm(grads, sum_sq, max_norm, 1e-6, max_norm);
  return std::sqrt(ops::read_f64_scalar(sum_sq));
}

}  // namespace vela
