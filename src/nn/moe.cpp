// Moe inference forward: route, group by expert, two grouped GEMMs, weighted combine.
#include "nn/moe.h"

#include "core/scratch_arena.h"
#include "ops/embedding.h"
#include "ops/moe.h"
#include "ops/swiglu.h"

namespace vela {

void MoeStats::add(const MoeStats& o) {
  if (counts.empty()) {
    counts.assign(o.counts.size(), 0);
    prob_sum.assign(o.prob_sum.size(), 0.0);
  }
  VELA_ASSERT(counts.size() == o.counts.size());
  n_tokens += o.n_tokens;
  for (size_t e = 0; e < counts.size(); ++e) {
    counts[e] += o.counts[e];
    prob_sum[e] += o.prob_sum[e];
  }
  lse_sq_sum += o.lse_sq_sum;
}

int64_t Moe::scratch_bytes(int64_t n, int64_t hidden, int64_t n_experts, int64_t k, int64_t inter,
                           int64_t shared_inter, int64_t e) {
  const int64_t align = 16 * 256;  // one alignment pad per take (14 takes)
  const int64_t m = n * k;
  int64_t b = n * n_experts * 4 + n * k * 12 + (n_experts + 1) * 4 + m * 4;  // routing
  b += m * e * (hidden + 3 * inter + hidden);                                // xp, h, act, y
  if (shared_inter > 0) b += n * e * (3 * shared_inter + hidden) + n * 4;
  return b + align;
}

void Moe::forward(const Tensor& x, Tensor& out) const {
  const int64_t n = x.size(0), hidden = x.size(1), n_exp = n_experts(), k = top_k, i = inter();
  const int64_t m = n * k;
  const DType dt = x.dtype();
  const Device dev = x.device();
  ScratchMark temporaries;
  Tensor logits = scratch_tensor({n, n_exp}, DType::kF32, dev);
  router.forward(x, logits);
  Tensor weights = scratch_tensor({n, k}, DType::kF32, dev);
  Tensor ids = scratch_tensor({n, k}, DType::kI32, dev);
  ops::moe_route(logits, k, norm_topk_prob, weights, ids);
  Tensor offsets = scratch_tensor({n_exp + 1}, DType::kI32, dev);
  Tensor src = scratch_tensor({m}, DType::kI32, dev);
  Tensor dst = scratch_tensor({n, k}, DType::kI32, dev);
  ops::moe_permute(ids, n_exp, offsets, src, dst);
  Tensor xp = scratch_tensor({m, hidden}, dt, dev);
  ops::embedding(x, src, xp);
  Tensor h = scratch_tensor({m, 2 * i}, dt, dev);
  ops::grouped_gemm(xp, gate_up, offsets, true, h);
  Tensor act = scratch_tensor({m, i}, dt, dev);
  ops::silu_and_mul(h, act);
  Tensor y = scratch_tensor({m, hidden}, dt, dev);
  ops::grouped_gemm(act, down, offsets, true, y);
  Tensor shared_out, shared_logit;
  if (has_shared()) {
    shared_out = scratch_tensor({n, hidden}, dt, dev);
    shared.forward(x, shared_out);
    shared_logit = scratch_tensor({n, 1}, DType::kF32, dev);
    shared_gate.forward(x, shared_logit);
  }
  ops::moe_combine(y, dst, weights, shared_out, shared_logit, out);
}

}  // namespace vela
