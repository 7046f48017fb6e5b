// causal_attention_backward: checks, then dispatch.
#include "ops/attention.h"
#include "ops/backward_dispatch.h"
#include "ops/checks.h"

namespace vela::ops {

void causal_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& doc_ids, float scale, const Tensor& out,
                               const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv,
                               const Tensor& lse) {
  const char* op = "causal_attention_backward";
  const Tensor* all[] = {&q, &k, &v, &out, &dout, &dq, &dk, &dv};
  const char* names[] = {"q", "k", "v", "out", "dout", "dq", "dk", "dv"};
  for (int i = 0; i < 8; ++i) {
    check_defined(op, names[i], *all[i]);
    check_rank(op, names[i], *all[i], 4);
    check_contiguous(op, names[i], *all[i]);
    check_same_dtype(op, names[i], *all[i], "q", q);
    check_same_device(op, names[i], *all[i], "q", q);
  }
  check_floating(op, "q", q);
  if (q.is_cpu()) check_dtype(op, "q", q, DType::kF32);
  check_same_shape(op, "v", v, "k", k);
  check_same_shape(op, "out", out, "q", q);
  check_same_shape(op, "dout", dout, "q", q);
  check_same_shape(op, "dq", dq, "q", q);
  check_same_shape(op, "dk", dk, "k", k);
  check_same_shape(op, "dv", dv, "k", k);
  VELA_CHECK(k.size(0) == q.size(0) && k.size(1) == q.size(1) && k.size(3) == q.size(3), op, ": k ",
             k.str(), " must match q ", q.str(), " in batch, seq and head_dim");
  VELA_CHECK(k.size(2) > 0 && q.size(2) % k.size(2) == 0, op, ": n_heads of q ", q.str(),
             " must be a multiple of n_kv_heads of k ", k.str());
  if (doc_ids.defined()) {
    check_dtype(op, "doc_ids", doc_ids, DType::kI32);
    check_shape(op, "doc_ids", doc_ids, Shape{q.size(0), q.size(1)});
    check_contiguous(op, "doc_ids", doc_ids);
    check_same_device(op, "doc_ids", doc_ids, "q", q);
  }
  if (lse.defined()) {
    check_dtype(op, "lse", lse, DType::kF32);
    check_shape(op, "lse", lse, Shape{q.size(0), q.size(2), q.size(1)});  // [batch, n_heads, seq]
    check_contiguous(op, "lse", lse);
    check_same_device(op, "lse", lse, "q", q);
  }
  VELA_DISPATCH(q.device(), causal_attention_backward, q, k, v, doc_ids, scale, out, dout, dq, dk,
                dv, lse);
}

}  // namespace vela::ops
