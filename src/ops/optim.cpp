// Optimizer ops: argument checks (dtypes, shapes, one device, contiguity), then dispatch.
#include "ops/optim.h"

#include <cstring>

#include "ops/checks.h"
#include "ops/optim_dispatch.h"

namespace vela::ops {

namespace {

void check_f32(const char* op, const char* name, const Tensor& t, const Tensor& ref) {
  check_defined(op, name, t);
  check_dtype(op, name, t, DType::kF32);
  check_same_shape(op, name, t, "the first operand", ref);
  check_same_device(op, name, t, "the first operand", ref);
  check_contiguous(op, name, t);
}

void check_f64_scalar(const char* op, const char* name, const Tensor& t) {
  check_defined(op, name, t);
  VELA_CHECK(t.dtype() == DType::kI64 && t.numel() == 1 && t.is_contiguous(), op, ": ", name, " ",
             t.str(), " must be an f64 scalar (a [1] i64 tensor, see make_f64_scalar)");
}

void check_tensor_list(const char* op, const std::vector<Tensor>& xs, const Tensor& anchor) {
  for (const Tensor& x : xs) {
    check_defined(op, "x", x);
    check_dtype(op, "x", x, DType::kF32);
    check_contiguous(op, "x", x);
    check_same_device(op, "x", x, "the f64 scalar", anchor);
  }
}

}  // namespace

void adamw_update(Tensor& master, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                  Tensor& weight, const AdamWHyper& h) {
  const char* op = "adamw_update";
  check_f32(op, "master", master, master);
  check_f32(op, "grad", grad, master);
  check_f32(op, "exp_avg", exp_avg, master);
  check_f32(op, "exp_avg_sq", exp_avg_sq, master);
  Tensor none;
  const bool write_weight = weight.defined() && weight.data_ptr() != master.data_ptr();
  if (write_weight) {
    check_floating(op, "weight", weight);
    check_same_shape(op, "weight", weight, "master", master);
    check_same_device(op, "weight", weight, "master", master);
    check_contiguous(op, "weight", weight);
  }
  Tensor& w = write_weight ? weight : none;
  VELA_DISPATCH(master.device(), adamw_update, master, grad, exp_avg, exp_avg_sq, w, h);
}

void muon_momentum(Tensor& buf, const Tensor& grad, Tensor& u, float mu, bool nesterov) {
  const char* op = "muon_momentum";
  check_f32(op, "buf", buf, buf);
  check_f32(op, "grad", grad, buf);
  check_f32(op, "u", u, buf);
  VELA_DISPATCH(buf.device(), muon_momentum, buf, grad, u, mu, nesterov);
}

void decayed_step(Tensor& w, const Tensor& update, float decay, float step) {
  const char* op = "decayed_step";
  check_f32(op, "w", w, w);
  check_f32(op, "update", update, w);
  VELA_DISPATCH(w.device(), decayed_step, w, update, decay, step);
}

void sum_squares(const std::vector<Tensor>& xs, Tensor& out) {
  check_f64_scalar("sum_squares", "out", out);
  check_tensor_list("sum_squares", xs, out);
  VELA_DISPATCH(out.device(), sum_squares, xs, out);
}

void scale_by_norm(std::vector<Tensor>& xs, const Tensor& sum_sq, double numer, double eps,
                   double threshold) {
  check_f64_scalar("scale_by_norm", "sum_sq", sum_sq);
  check_tensor_list("scale_by_norm", xs, sum_sq);
  VELA_DISPATCH(sum_sq.device(), scale_by_norm, xs, sum_sq, numer, eps, threshold);
}

Tensor make_f64_scalar(Device device) { return Tensor::zeros({1}, DType::kI64, device); }

double read_f64_scalar(const Tensor& t) {
  check_f64_scalar("read_f64_scalar", "t", t);
  const int64_t bits = t.to(Device::cpu()).data<int64_t>()[0];
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

}  // namespace vela::ops
