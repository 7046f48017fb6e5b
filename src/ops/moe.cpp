// Mixture-of-experts ops: shape, dtype, device and layout checks, then dispatch. The MoE tensors
// are required to be contiguous (they are always fresh workspace tensors or whole weights).
#include "ops/moe.h"

#include "ops/checks.h"
#include "ops/dispatch.h"
#include "ops/moe_impl.h"

namespace vela::ops {

namespace {

void check_plain(const char* op, const char* name, const Tensor& t, const Tensor& ref) {
  check_defined(op, name, t);
  check_contiguous(op, name, t);
  check_same_device(op, name, t, "the first operand", ref);
}

void check_topk_pair(const char* op, const Tensor& weights, const Tensor& ids, int64_t n,
                     const Tensor& ref) {
  check_plain(op, "weights", weights, ref);
  check_plain(op, "expert_ids", ids, ref);
  check_dtype(op, "weights", weights, DType::kF32);
  check_dtype(op, "expert_ids", ids, DType::kI32);
  check_rank(op, "expert_ids", ids, 2);
  VELA_CHECK(ids.size(0) == n, op, ": expert_ids ", ids.str(), " must have ", n, " rows");
  check_shape(op, "weights", weights, ids.shape());
}

}  // namespace

void moe_route(const Tensor& logits, int64_t k, bool normalize, Tensor& weights,
               Tensor& expert_ids) {
  const char* op = "moe_route";
  check_plain(op, "logits", logits, logits);
  check_rank(op, "logits", logits, 2);
  check_dtype(op, "logits", logits, DType::kF32);
  VELA_CHECK(k >= 1 && k <= logits.size(1), op, ": k = ", k, " must be in [1, ", logits.size(1),
             "]");
  check_topk_pair(op, weights, expert_ids, logits.size(0), logits);
  VELA_CHECK(weights.size(1) == k, op, ": weights ", weights.str(), " must have k = ", k,
             " columns");
  if (logits.size(0) == 0) return;
  VELA_DISPATCH(logits.device(), moe_route, logits, k, normalize, weights, expert_ids);
}

void moe_route_backward(const Tensor& logits, const Tensor& expert_ids, const Tensor& dweights,
                        bool normalize, const Tensor& dprob_bias, float z_scale, Tensor& dlogits) {
  const char* op = "moe_route_backward";
  check_plain(op, "logits", logits, logits);
  check_rank(op, "logits", logits, 2);
  check_dtype(op, "logits", logits, DType::kF32);
  check_topk_pair(op, dweights, expert_ids, logits.size(0), logits);
  if (dprob_bias.defined()) {
    check_plain(op, "dprob_bias", dprob_bias, logits);
    check_dtype(op, "dprob_bias", dprob_bias, DType::kF32);
    check_shape(op, "dprob_bias", dprob_bias, Shape{logits.size(1)});
  }
  check_plain(op, "dlogits", dlogits, logits);
  check_dtype(op, "dlogits", dlogits, DType::kF32);
  check_shape(op, "dlogits", dlogits, logits.shape());
  if (logits.size(0) == 0) return;
  VELA_DISPATCH(logits.device(), moe_route_backward, logits, expert_ids, dweights, normalize,
                dprob_bias, z_scale, dlogits);
}

void moe_permute(const Tensor& expert_ids, int64_t n_experts, Tensor& offsets, Tensor& src_rows,
                 Tensor& dst_rows) {
  const char* op = "moe_permute";
  check_plain(op, "expert_ids", expert_ids, expert_ids);
  check_rank(op, "expert_ids", expert_ids, 2);
  check_dtype(op, "expert_ids", expert_ids, DType::kI32);
  VELA_CHECK(n_experts >= 1, op, ": n_experts must be positive, got ", n_experts);
  for (auto [name, t] : {std::pair<const char*, const Tensor*>{"offsets", &offsets},
                         {"src_rows", &src_rows},
                         {"dst_rows", &dst_rows}}) {
    check_plain(op, name, *t, expert_ids);
    check_dtype(op, name, *t, DType::kI32);
  }
  check_shape(op, "offsets", offsets, Shape{n_experts + 1});
  check_shape(op, "src_rows", src_rows, Shape{expert_ids.numel()});
  check_shape(op, "dst_rows", dst_rows, expert_ids.shape());
  VELA_DISPATCH(expert_ids.device(), moe_permute, expert_ids, n_experts, offsets, src_rows,
                dst_rows);
}

void grouped_gemm(const Tensor& a, const Tensor& w, const Tensor& offsets, bool trans_w,
                  Tensor& out) {
  const char* op = "grouped_gemm";
  check_plain(op, "a", a, a);
  check_plain(op, "w", w, a);
  check_plain(op, "offsets", offsets, a);
  check_plain(op, "out", out, a);
  check_rank(op, "a", a, 2);
  check_rank(op, "w", w, 3);
  check_floating(op, "a", a);
  check_same_dtype(op, "w", w, "a", a);
  check_dtype(op, "offsets", offsets, DType::kI32);
  check_shape(op, "offsets", offsets, Shape{w.size(0) + 1});
  const int64_t k = trans_w ? w.size(2) : w.size(1), n = trans_w ? w.size(1) : w.size(2);
  VELA_CHECK(a.size(1) == k, op, ": a ", a.str(), " has ", a.size(1), " columns but w ", w.str(),
             trans_w ? " (trans_w) has " : " has ", k, " inputs");
  check_shape(op, "out", out, Shape{a.size(0), n});
  VELA_CHECK(out.dtype() == a.dtype() || out.dtype() == DType::kF32, op, ": out ", out.str(),
             " must be f32 or a's dtype");
  if (a.size(0) == 0) return;
  VELA_DISPATCH(a.device(), grouped_gemm, a, w, offsets, trans_w, out);
}

void grouped_gemm_wgrad(const Tensor& dy, const Tensor& x, const Tensor& offsets, Tensor& dw) {
  const char* op = "grouped_gemm_wgrad";
  check_plain(op, "dy", dy, dy);
  check_plain(op, "x", x, dy);
  check_plain(op, "offsets", offsets, dy);
  check_plain(op, "dw", dw, dy);
  check_rank(op, "dy", dy, 2);
  check_rank(op, "x", x, 2);
  check_floating(op, "dy", dy);
  check_same_dtype(op, "x", x, "dy", dy);
  check_dtype(op, "dw", dw, DType::kF32);
  check_rank(op, "dw", dw, 3);
  VELA_CHECK(x.size(0) == dy.size(0), op, ": x ", x.str(), " and dy ", dy.str(),
             " must have the same rows");
  check_shape(op, "dw", dw, Shape{dw.size(0), dy.size(1), x.size(1)});
  check_dtype(op, "offsets", offsets, DType::kI32);
  check_shape(op, "offsets", offsets, Shape{dw.size(0) + 1});
  if (dy.size(0) == 0) return;
  VELA_DISPATCH(dy.device(), grouped_gemm_wgrad, dy, x, offsets, dw);
}

namespace {

void check_combine(const char* op, const Tensor& y, const Tensor& dst_rows, const Tensor& weights,
                   const Tensor& shared, const Tensor& shared_logit, int64_t n_out) {
  check_plain(op, "y", y, y);
  check_rank(op, "y", y, 2);
  check_floating(op, "y", y);
  check_plain(op, "dst_rows", dst_rows, y);
  check_rank(op, "dst_rows", dst_rows, 2);
  check_dtype(op, "dst_rows", dst_rows, DType::kI32);
  VELA_CHECK(dst_rows.size(0) == n_out, op, ": dst_rows ", dst_rows.str(), " must have ", n_out,
             " rows");
  VELA_CHECK(dst_rows.numel() == y.size(0), op, ": y ", y.str(),
             " must have n * k = ", dst_rows.numel(), " rows");
  if (weights.defined()) {
    check_plain(op, "weights", weights, y);
    check_dtype(op, "weights", weights, DType::kF32);
    check_shape(op, "weights", weights, dst_rows.shape());
  }
  if (shared.defined()) {
    check_plain(op, "shared", shared, y);
    check_same_dtype(op, "shared", shared, "y", y);
    check_shape(op, "shared", shared, Shape{n_out, y.size(1)});
    check_plain(op, "shared_logit", shared_logit, y);
    check_dtype(op, "shared_logit", shared_logit, DType::kF32);
    VELA_CHECK(shared_logit.numel() == n_out, op, ": shared_logit ", shared_logit.str(),
               " must have one entry per token");
  }
}

}  // namespace

void moe_combine(const Tensor& y, const Tensor& dst_rows, const Tensor& weights,
                 const Tensor& shared, const Tensor& shared_logit, Tensor& out) {
  const char* op = "moe_combine";
  check_plain(op, "out", out, y);
  check_rank(op, "out", out, 2);
  check_combine(op, y, dst_rows, weights, shared, shared_logit, out.size(0));
  check_same_dtype(op, "out", out, "y", y);
  check_shape(op, "out", out, Shape{dst_rows.size(0), y.size(1)});
  if (out.size(0) == 0) return;
  VELA_DISPATCH(y.device(), moe_combine, y, dst_rows, weights, shared, shared_logit, out);
}

void moe_combine_backward(const Tensor& dout, const Tensor& y, const Tensor& dst_rows,
                          const Tensor& weights, const Tensor& shared, const Tensor& shared_logit,
                          Tensor& dy, Tensor& dweights, Tensor& dshared, Tensor& dshared_logit) {
  const char* op = "moe_combine_backward";
  check_plain(op, "dout", dout, y);
  check_rank(op, "dout", dout, 2);
  check_combine(op, y, dst_rows, weights, shared, shared_logit, dout.size(0));
  VELA_CHECK(weights.defined(), op, ": weights are required");
  check_same_dtype(op, "dout", dout, "y", y);
  check_shape(op, "dout", dout, Shape{dst_rows.size(0), y.size(1)});
  check_plain(op, "dy", dy, y);
  check_same_dtype(op, "dy", dy, "y", y);
  check_shape(op, "dy", dy, y.shape());
  check_plain(op, "dweights", dweights, y);
  check_dtype(op, "dweights", dweights, DType::kF32);
  check_shape(op, "dweights", dweights, weights.shape());
  if (shared.defined()) {
    check_plain(op, "dshared", dshared, y);
    check_same_dtype(op, "dshared", dshared, "y", y);
    check_shape(op, "dshared", dshared, shared.shape());
    check_plain(op, "dshared_logit", dshared_logit, y);
    check_dtype(op, "dshared_logit", dshared_logit, DType::kF32);
    check_shape(op, "dshared_logit", dshared_logit, shared_logit.shape());
  }
  if (dout.size(0) == 0) return;
  VELA_DISPATCH(y.device(), moe_combine_backward, dout, y, dst_rows, weights, shared, shared_logit,
                dy, dweights, dshared, dshared_logit);
}

}  // namespace vela::ops
