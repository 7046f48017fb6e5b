// Moe training path. forward_train is forward() keeping every intermediate (and, for the router
// losses and the expert-load metrics, the router statistics on the host); backward:
//   dy, dweights          = combine_backward(dout)                (+ the shared expert's share)
//   dact = dy @ down_e;   ddown_e += dy^T act;   dh = silu_and_mul_backward(h, dact)
//   dgate_up_e += dh^T xp;  dxp = dh @ gate_up_e;  dx = sum over a token's slots of dxp
//   dlogits = route_backward(dweights, aux bias, z)   drouter += dlogits^T x,  dx += dlogits @
//   router
#include <cmath>

#include "nn/moe.h"
#include "ops/cast.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/moe.h"
#include "ops/swiglu.h"

namespace vela {

namespace {

MoeStats router_stats(const Tensor& logits_dev, const Tensor& ids_dev) {
  Tensor logits = logits_dev.to(Device::cpu()), ids = ids_dev.to(Device::cpu());
  const int64_t n = logits.size(0), n_exp = logits.size(1), k = ids.size(1);
  MoeStats s;
  s.n_tokens = n;
  s.counts.assign(static_cast<size_t>(n_exp), 0);
  s.prob_sum.assign(static_cast<size_t>(n_exp), 0.0);
  const float* l = logits.data<float>();
  const int32_t* id = ids.data<int32_t>();
  for (int64_t t = 0; t < n; ++t) {
    const float* row = l + t * n_exp;
    float m = -INFINITY;
    for (int64_t e = 0; e < n_exp; ++e) m = std::max(m, row[e]);
    double sum = 0;
    for (int64_t e = 0; e < n_exp; ++e) sum += std::exp(static_cast<double>(row[e] - m));
    for (int64_t e = 0; e < n_exp; ++e) s.prob_sum[e] += std::exp(row[e] - m) / sum;
    const double lse = m + std::log(sum);
    s.lse_sq_sum += lse * lse;
    for (int64_t j = 0; j < k; ++j) ++s.counts[static_cast<size_t>(id[t * k + j])];
  }
  return s;
}

// dst += src (same shape and dtype).
void accumulate(Tensor& dst, const Tensor& src) { ops::add(dst, src, dst); }

}  // namespace

void Moe::forward_train(const Tensor& x, Tensor& out, MoeSaved& s, MoeStats* stats) const {
  const int64_t n = x.size(0), hidden = x.size(1), n_exp = n_experts(), k = top_k, i = inter();
  const int64_t m = n * k;
  const DType dt = x.dtype();
  const Device dev = x.device();
  s.logits = Tensor::empty({n, n_exp}, DType::kF32, dev);
  router.forward(x, s.logits);
  s.weights = Tensor::empty({n, k}, DType::kF32, dev);
  s.expert_ids = Tensor::empty({n, k}, DType::kI32, dev);
  ops::moe_route(s.logits, k, norm_topk_prob, s.weights, s.expert_ids);
  s.offsets = Tensor::empty({n_exp + 1}, DType::kI32, dev);
  s.src_rows = Tensor::empty({m}, DType::kI32, dev);
  s.dst_rows = Tensor::empty({n, k}, DType::kI32, dev);
  ops::moe_permute(s.expert_ids, n_exp, s.offsets, s.src_rows, s.dst_rows);
  s.xp = Tensor::empty({m, hidden}, dt, dev);
  ops::embedding(x, s.src_rows, s.xp);
  s.gate_up = Tensor::empty({m, 2 * i}, dt, dev);
  ops::grouped_gemm(s.xp, gate_up, s.offsets, true, s.gate_up);
  s.act = Tensor::empty({m, i}, dt, dev);
  ops::silu_and_mul(s.gate_up, s.act);
  s.y = Tensor::empty({m, hidden}, dt, dev);
  ops::grouped_gemm(s.act, down, s.offsets, true, s.y);
  if (has_shared()) {
    s.shared_out = Tensor::empty({n, hidden}, dt, dev);
    shared.forward_train(x, s.shared_out, s.shared);
    s.shared_logit = Tensor::empty({n, 1}, DType::kF32, dev);
    shared_gate.forward(x, s.shared_logit);
  }
  ops::moe_combine(s.y, s.dst_rows, s.weights, s.shared_out, s.shared_logit, out);
  if (stats) *stats = router_stats(s.logits, s.expert_ids);
}

void Moe::backward(const Tensor& x, const MoeSaved& s, const MoeRouterGrad& rg, const Tensor& dout,
                   Tensor& dx, MoeGrads& g) const {
  const int64_t n = x.size(0), hidden = x.size(1), n_exp = n_experts(), k = top_k, i = inter();
  const int64_t m = n * k;
  const DType dt = x.dtype();
  const Device dev = x.device();
  Tensor none;
  Tensor dy = Tensor::empty({m, hidden}, dt, dev);
  Tensor dweights = Tensor::empty({n, k}, DType::kF32, dev);
  Tensor dshared, dshared_logit;
  if (has_shared()) {
    dshared = Tensor::empty({n, hidden}, dt, dev);
    dshared_logit = Tensor::empty({n, 1}, DType::kF32, dev);
  }
  ops::moe_combine_backward(dout, s.y, s.dst_rows, s.weights, s.shared_out, s.shared_logit, dy,
                            dweights, dshared, dshared_logit);
  // Experts.
  Tensor dact = Tensor::empty({m, i}, dt, dev);
  ops::grouped_gemm(dy, down, s.offsets, false, dact);
  ops::grouped_gemm_wgrad(dy, s.act, s.offsets, g.ddown);
  Tensor dh = Tensor::empty({m, 2 * i}, dt, dev);
  ops::silu_and_mul_backward(s.gate_up, dact, dh);
  ops::grouped_gemm_wgrad(dh, s.xp, s.offsets, g.dgate_up);
  Tensor dxp = Tensor::empty({m, hidden}, dt, dev);
  ops::grouped_gemm(dh, gate_up, s.offsets, false, dxp);
  ops::moe_combine(dxp, s.dst_rows, none, none, none, dx);
  // Router (its logits are fp32; the projection's backward runs in the activation dtype).
  Tensor dlogits = Tensor::empty({n, n_exp}, DType::kF32, dev);
  ops::moe_route_backward(s.logits, s.expert_ids, dweights, norm_topk_prob, rg.dprob_bias,
                          rg.z_scale, dlogits);
  Tensor dl = dlogits;
  if (dt != DType::kF32) {
    dl = Tensor::empty({n, n_exp}, dt, dev);
    ops::cast(dlogits, dl);
  }
  Tensor dx_part = Tensor::empty({n, hidden}, dt, dev);
  router.backward(x, dl, dx_part, g.drouter, none);
  accumulate(dx, dx_part);
  if (has_shared()) {
    shared.backward(x, s.shared, dshared, dx_part, g.shared);
    accumulate(dx, dx_part);
    Tensor dsl = dshared_logit;
    if (dt != DType::kF32) {
      dsl = Tensor::empty({n, 1}, dt, dev);
      ops::cast(dshared_logit, dsl);
    }
    shared_gate.backward(x, dsl, dx_part, g.dshared_gate, none);
    accumulate(dx, dx_part);
  }
}

}  // namespace vela
