// Moe: a sparse mixture-of-experts feed-forward layer (Qwen2-MoE / Qwen3-MoE / Mixtral), in place
// of the dense SwiGLU MLP of a decoder block.
//   p = softmax(x @ router^T)                      [n, E] fp32
//   (w, e) = top-k(p) (renormalised when norm_topk_prob; Mixtral always)
//   out[t] = sum_j w[t, j] * expert_{e[t, j]}(x[t])  (+ sigmoid(x[t] . g) * shared(x[t]) when the
//            layer has a gated shared expert, Qwen2-MoE)
// expert(x) = down_e(silu(gate_e x) * up_e x), the experts' weights stacked in one tensor each.
// The forward groups the n * k (token, expert) pairs by expert (ops::moe_permute), gathers the
// rows, runs two grouped GEMMs over the experts and combines the weighted results back per token
// (ops::moe_combine); no routing decision is read on the host, so a CUDA decode step stays
// capturable in a graph. Backward (nn/moe_train.cpp) returns the input gradient and accumulates
// every parameter gradient, including the router's from the load-balancing and z-losses.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "nn/linear.h"
#include "nn/mlp.h"

namespace vela {

// Parameter gradients (f32, accumulated).
struct MoeGrads {
  Tensor drouter;       // [n_experts, hidden]
  Tensor dgate_up;      // [n_experts, 2 * inter, hidden]
  Tensor ddown;         // [n_experts, hidden, inter]
  MlpGrads shared;      // shared expert (undefined without one)
  Tensor dshared_gate;  // [1, hidden]
};

// What backward needs from the forward (all on the layer's device).
struct MoeSaved {
  Tensor logits;      // [n, E] f32 router logits
  Tensor weights;     // [n, k] f32 routing weights
  Tensor expert_ids;  // [n, k] i32
  Tensor offsets;     // [E + 1] i32 expert segments of the permuted rows
  Tensor src_rows;    // [n * k] i32 token of each permuted row
  Tensor dst_rows;    // [n, k] i32 permuted row of each (token, slot)
  Tensor xp;          // [n * k, hidden] permuted input rows
  Tensor gate_up;     // [n * k, 2 * inter]
  Tensor act;         // [n * k, inter]
  Tensor y;           // [n * k, hidden] expert outputs before weighting
  MlpSaved shared;
  Tensor shared_out;    // [n, hidden]
  Tensor shared_logit;  // [n, 1] f32
};

// Router statistics of one forward, host side: what the load-balancing / z-losses and the
// trainer's expert-load metrics are made of. Sums over the forward's tokens.
struct MoeStats {
  int64_t n_tokens = 0;
  std::vector<int64_t> counts;   // [E] (token, slot) pairs routed to each expert
  std::vector<double> prob_sum;  // [E] sum over tokens of softmax(router logits)
  double lse_sq_sum = 0;         // sum over tokens of logsumexp(router logits)^2

  void add(const MoeStats& o);
};

// The router losses' gradient for one layer (set by the trainer after the whole forward, since
// the load-balancing loss couples every MoE layer).
struct MoeRouterGrad {
  Tensor dprob_bias;  // [E] f32: d(loss) / d(p[t, e]), the same for every token; or undefined
  float z_scale = 0;  // d(loss) / d(lse_t^2) for every token
};

struct Moe {
  Linear router;       // weight [n_experts, hidden]
  Tensor gate_up;      // [n_experts, 2 * inter, hidden]: rows [0, inter) gate, then up
  Tensor down;         // [n_experts, hidden, inter]
  Mlp shared;          // optional shared expert (shared.gate_up.weight undefined: none)
  Linear shared_gate;  // weight [1, hidden] when there is a shared expert
  int64_t top_k = 1;
  bool norm_topk_prob = false;

  bool defined() const { return router.weight.defined(); }
  bool has_shared() const { return shared.gate_up.weight.defined(); }
  int64_t n_experts() const { return gate_up.size(0); }
  int64_t inter() const { return down.size(2); }

  // x: [n, hidden] -> out: [n, hidden] (temporaries from the scratch arena).
  void forward(const Tensor& x, Tensor& out) const;
  // forward keeping what backward needs; `stats` (when given) receives the router statistics
  // (reads the router output on the host).
  void forward_train(const Tensor& x, Tensor& out, MoeSaved& saved, MoeStats* stats) const;
  // x: [n, hidden] the forward input   dout: [n, hidden]   dx: [n, hidden] (overwritten).
  void backward(const Tensor& x, const MoeSaved& saved, const MoeRouterGrad& router_grad,
                const Tensor& dout, Tensor& dx, MoeGrads& grads) const;

  // Scratch bytes one forward of n tokens takes (the engine sizes its arena with it).
  static int64_t scratch_bytes(int64_t n_tokens, int64_t hidden, int64_t n_experts, int64_t top_k,
                               int64_t inter, int64_t shared_inter, int64_t dtype_bytes);
};

}  // namespace vela
