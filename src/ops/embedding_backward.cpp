// embedding_backward: checks (host ids range-checked), then dispatch.
#include "ops/backward_dispatch.h"
#include "ops/checks.h"
#include "ops/embedding.h"

namespace vela::ops {

void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dweight) {
  const char* op = "embedding_backward";
  check_defined(op, "ids", ids);
  check_defined(op, "dout", dout);
  check_defined(op, "dweight", dweight);
  check_rank(op, "ids", ids, 1);
  check_dtype(op, "ids", ids, DType::kI32);
  check_contiguous(op, "ids", ids);
  check_rank(op, "dweight", dweight, 2);
  check_dtype(op, "dweight", dweight, DType::kF32);
  check_contiguous(op, "dweight", dweight);
  check_floating(op, "dout", dout);
  if (dout.is_cpu()) check_dtype(op, "dout", dout, DType::kF32);
  check_shape(op, "dout", dout, Shape{ids.size(0), dweight.size(1)});
  check_rows(op, "dout", dout);
  check_same_device(op, "ids", ids, "dweight", dweight);
  check_same_device(op, "dout", dout, "dweight", dweight);
  if (ids.is_cpu()) {
    const int32_t* p = ids.data<int32_t>();
    for (int64_t i = 0; i < ids.numel(); ++i)
      VELA_CHECK(p[i] >= 0 && p[i] < dweight.size(0), op, ": ids[", i, "] = ", p[i],
                 " is outside the vocabulary [0, ", dweight.size(0), ")");
  }
  VELA_DISPATCH(dweight.device(), embedding_backward, ids, dout, dweight);
}

}  // namespace vela::ops
