// cross_entropy: shape, dtype and device checks; targets living on the host are range-checked here.
#include "ops/cross_entropy.h"

#include "ops/checks.h"
#include "ops/dispatch.h"

namespace vela::ops {

void cross_entropy(const Tensor& logits, const Tensor& targets, Tensor& losses,
                   int32_t ignore_index, float label_smoothing) {
  const char* op = "cross_entropy";
  check_defined(op, "logits", logits);
  check_defined(op, "targets", targets);
  check_defined(op, "losses", losses);
  check_rank(op, "logits", logits, 2);
  check_floating(op, "logits", logits);
  VELA_CHECK(logits.size(1) >= 1, "cross_entropy: logits ", logits.str(),
             " must have at least one column");
  check_rows(op, "logits", logits);
  check_dtype(op, "targets", targets, DType::kI32);
  check_shape(op, "targets", targets, Shape{logits.size(0)});
  check_contiguous(op, "targets", targets);
  check_dtype(op, "losses", losses, DType::kF32);
  check_shape(op, "losses", losses, Shape{logits.size(0)});
  check_contiguous(op, "losses", losses);
  check_same_device(op, "targets", targets, "logits", logits);
  check_same_device(op, "losses", losses, "logits", logits);
  VELA_CHECK(label_smoothing >= 0.0f && label_smoothing <= 1.0f, "cross_entropy: label_smoothing ",
             label_smoothing, " must be in [0, 1]");
  if (targets.is_cpu()) {
    const int32_t* t = targets.data<int32_t>();
    int64_t vocab = logits.size(1);
    for (int64_t i = 0; i < targets.numel(); ++i) {
      VELA_CHECK(t[i] == ignore_index || (t[i] >= 0 && t[i] < vocab), "cross_entropy: targets[", i,
                 "] = ", t[i], " is outside [0, ", vocab, ") and is not ignore_index (",
                 ignore_index, ")");
    }
  }
  VELA_DISPATCH(logits.device(), cross_entropy, logits, targets, losses, ignore_index,
                label_smoothing);
}

}  // namespace vela::ops
