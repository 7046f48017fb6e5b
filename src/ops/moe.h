// Mixture-of-experts ops: routing (softmax top-k), token grouping by expert (permute), grouped
// GEMM over experts, the weighted combine (unpermute) and their backward passes. Everything the
// routing decides stays in device tensors (offsets, row maps), so a CUDA decode step that runs
// these ops never reads them on the host and can be captured in a graph. All results are
// deterministic: grouping is stable (token-major order within an expert) and every reduction has
// a fixed order.
//
// Shapes: n = tokens, k = experts per token, E = experts, M = n * k permuted rows, H = hidden.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace vela::ops {

// Router: p = softmax(logits) per row (fp32), the k largest p (ties: lower expert index) sorted
// descending; with `normalize` they are divided by their sum.
//   logits: [n, E] f32   weights: [n, k] f32 (out)   expert_ids: [n, k] i32 (out)
void moe_route(const Tensor& logits, int64_t k, bool normalize, Tensor& weights,
               Tensor& expert_ids);

// Backward of moe_route plus the two router losses, into dlogits [n, E] f32 (overwritten):
//   dweights: [n, k] f32  d(loss) / d(weights)
//   dprob_bias: [E] f32 added to d(loss) / d(p[row, e]) for every row (the load-balancing loss's
//               gradient, which is the same for every row), or undefined
//   z_scale: d(loss) / d(lse_row^2) for every row (router z-loss), 0 for none
void moe_route_backward(const Tensor& logits, const Tensor& expert_ids, const Tensor& dweights,
                        bool normalize, const Tensor& dprob_bias, float z_scale, Tensor& dlogits);

// Groups the (token, slot) pairs by expert, stably.
//   expert_ids: [n, k] i32 in [0, E)
//   offsets: [E + 1] i32 (out): expert e owns permuted rows [offsets[e], offsets[e + 1])
//   src_rows: [M] i32 (out): the token that permuted row r reads
//   dst_rows: [n, k] i32 (out): the permuted row of (token, slot)
void moe_permute(const Tensor& expert_ids, int64_t n_experts, Tensor& offsets, Tensor& src_rows,
                 Tensor& dst_rows);

// Grouped GEMM: for each expert e and each row r of its segment, out[r] = a[r] @ op(w[e]).
//   a: [M, K]   w: [E, N, K] when trans_w (nn.Linear layout: out = a @ w[e]^T), else [E, K, N]
//   offsets: [E + 1] i32 on a's device, offsets[E] == M   out: [M, N], a's dtype or f32
// a, w share a dtype (f32, bf16, f16); fp32 accumulation.
void grouped_gemm(const Tensor& a, const Tensor& w, const Tensor& offsets, bool trans_w,
                  Tensor& out);

// Weight gradient of grouped_gemm(trans_w): dw[e] += dy[seg e]^T @ x[seg e].
//   dy: [M, N]   x: [M, K] (same dtype as dy)   dw: [E, N, K] f32 (accumulated)
void grouped_gemm_wgrad(const Tensor& dy, const Tensor& x, const Tensor& offsets, Tensor& dw);

// Combine (unpermute): out[t] = sum_j weights[t, j] * y[dst_rows[t, j]]  (j in order)
//                               + sigmoid(shared_logit[t]) * shared[t]   (when shared is given)
//   y: [M, H]   dst_rows: [n, k] i32   weights: [n, k] f32 or undefined (all 1: the backward of
//   the row gather)   shared: [n, H] or undefined   shared_logit: [n] f32   out: [n, H]
// y, shared and out share a dtype; fp32 accumulation, one rounding.
void moe_combine(const Tensor& y, const Tensor& dst_rows, const Tensor& weights,
                 const Tensor& shared, const Tensor& shared_logit, Tensor& out);

// Backward of moe_combine (weights defined):
//   dy: [M, H] (out) = weights[t, j] * dout[t] at row dst_rows[t, j]
//   dweights: [n, k] f32 (out) = dout[t] . y[dst_rows[t, j]]
//   when shared is given: dshared [n, H] (out) = sigmoid(s) * dout,
//                         dshared_logit [n] f32 (out) = sigmoid'(s) * (dout . shared)
void moe_combine_backward(const Tensor& dout, const Tensor& y, const Tensor& dst_rows,
                          const Tensor& weights, const Tensor& shared, const Tensor& shared_logit,
                          Tensor& dy, Tensor& dweights, Tensor& dshared, Tensor& dshared_logit);

}  // namespace vela::ops
