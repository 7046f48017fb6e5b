// cross_entropy_backward: checks (host targets range-checked), then dispatch.
#include "ops/backward_dispatch.h"
#include "ops/checks.h"
#include "ops/cross_entropy.h"

namespace vela::ops {

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, Tensor& dlogits,
                            float grad_scale, int32_t ignore_index, float label_smoothing,
                            const Tensor& losses) {
  const char* op = "cross_entropy_backward";
  check_defined(op, "logits", logits);
  check_defined(op, "targets", targets);
  check_defined(op, "dlogits", dlogits);
  check_floating(op, "logits", logits);
  RowLayout r = check_rows(op, "logits", logits);
  check_rank(op, "targets", targets, 1);
  check_dtype(op, "targets", targets, DType::kI32);
  check_contiguous(op, "targets", targets);
  VELA_CHECK(targets.size(0) == r.n_rows, op, ": targets ", targets.str(),
             " must have one entry per row of logits ", logits.str());
  if (dlogits.is_cpu()) {
    check_dtype(op, "dlogits", dlogits, DType::kF32);
  } else {
    check_floating(op, "dlogits", dlogits);  // f32, or bf16 / f16 on CUDA
  }
  check_same_shape(op, "dlogits", dlogits, "logits", logits);
  check_out_rows(op, "dlogits", dlogits);
  check_same_device(op, "targets", targets, "logits", logits);
  check_same_device(op, "dlogits", dlogits, "logits", logits);
  VELA_CHECK(label_smoothing >= 0.0f && label_smoothing <= 1.0f, op, ": label_smoothing ",
             label_smoothing, " must be in [0, 1]");
  if (targets.is_cpu()) {
    const int32_t* t = targets.data<int32_t>();
    for (int64_t i = 0; i < targets.numel(); ++i)
      VELA_CHECK(t[i] == ignore_index || (t[i] >= 0 && t[i] < r.n_cols), op, ": target[", i,
                 "] = ", t[i], " is outside [0, ", r.n_cols, ") and not the ignore index ",
                 ignore_index);
  }
  if (losses.defined()) {
    check_dtype(op, "losses", losses, DType::kF32);
    check_shape(op, "losses", losses, Shape{r.n_rows});
    check_contiguous(op, "losses", losses);
    check_same_device(op, "losses", losses, "logits", logits);
  }
  VELA_DISPATCH(logits.device(), cross_entropy_backward, logits, targets, dlogits, grad_scale,
                ignore_index, label_smoothing, losses);
}

}  // namespace vela::ops
