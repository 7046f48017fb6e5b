// embedding: shape, dtype and device checks; ids living on the host are range-checked here.
#include "ops/embedding.h"

#include "ops/checks.h"
#include "ops/dispatch.h"

namespace vela::ops {

namespace {

template <typename I>
void check_ids(const Tensor& ids, int64_t vocab) {
  const I* p = ids.data<I>();
  for (int64_t i = 0; i < ids.numel(); ++i) {
    VELA_CHECK(p[i] >= 0 && p[i] < vocab, "embedding: ids[", i, "] = ", static_cast<int64_t>(p[i]),
               " is outside the vocabulary [0, ", vocab, ")");
  }
}

}  // namespace

void embedding(const Tensor& weight, const Tensor& ids, Tensor& out) {
  const char* op = "embedding";
  check_defined(op, "weight", weight);
  check_defined(op, "ids", ids);
  check_defined(op, "out", out);
  check_rank(op, "weight", weight, 2);
  check_floating(op, "weight", weight);
  check_rank(op, "ids", ids, 1);
  VELA_CHECK(ids.dtype() == DType::kI32 || ids.dtype() == DType::kI64, "embedding: ids ", ids.str(),
             " must be i32 or i64");
  check_contiguous(op, "ids", ids);
  check_shape(op, "out", out, Shape{ids.size(0), weight.size(1)});
  VELA_CHECK(out.dtype() == weight.dtype() || out.dtype() == DType::kF32, "embedding: out ",
             out.str(), " must be f32 or the dtype of weight ", weight.str());
  check_same_device(op, "ids", ids, "weight", weight);
  check_same_device(op, "out", out, "weight", weight);
  check_rows(op, "weight", weight);
  check_out_rows(op, "out", out);
  if (ids.is_cpu()) {
    if (ids.dtype() == DType::kI32) {
      check_ids<int32_t>(ids, weight.size(0));
    } else {
      check_ids<int64_t>(ids, weight.size(0));
    }
  }
  VELA_DISPATCH(weight.device(), embedding, weight, ids, out);
}

}  // namespace vela::ops
