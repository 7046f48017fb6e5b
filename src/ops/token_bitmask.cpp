// apply_token_bitmask: shape, dtype and device checks, then the CPU twin or the CUDA kernel.
#include "ops/token_bitmask.h"

#include "core/error.h"
#include "ops/checks.h"

namespace vela::ops {

void apply_token_bitmask(Tensor& logits, const Tensor& bitmask, const Tensor& row_ids) {
  const char* op = "apply_token_bitmask";
  check_defined(op, "logits", logits);
  check_rank(op, "logits", logits, 2);
  check_dtype(op, "logits", logits, DType::kF32);
  const int64_t vocab = logits.size(1);
  VELA_CHECK(vocab == 1 || logits.stride(1) == 1, op, ": logits ", logits.str(),
             " must have unit column stride");
  check_defined(op, "bitmask", bitmask);
  check_rank(op, "bitmask", bitmask, 2);
  check_dtype(op, "bitmask", bitmask, DType::kI32);
  check_contiguous(op, "bitmask", bitmask);
  VELA_CHECK(bitmask.size(1) == (vocab + 31) / 32, op, ": bitmask ", bitmask.str(),
             " must have ceil(vocab / 32) = ", (vocab + 31) / 32, " words per row");
  check_defined(op, "row_ids", row_ids);
  check_rank(op, "row_ids", row_ids, 1);
  check_dtype(op, "row_ids", row_ids, DType::kI32);
  check_contiguous(op, "row_ids", row_ids);
  VELA_CHECK(row_ids.size(0) == bitmask.size(0), op, ": row_ids ", row_ids.str(), " and bitmask ",
             bitmask.str(), " disagree on the number of masks");
  VELA_CHECK(bitmask.size(0) <= logits.size(0), op, ": more masks than logits rows");
  check_same_device(op, "bitmask", bitmask, "logits", logits);
  check_same_device(op, "row_ids", row_ids, "logits", logits);
  if (bitmask.size(0) == 0) return;
  if (logits.device().is_cuda()) {
#if defined(VELA_HAS_CUDA)
    cuda::apply_token_bitmask(logits, bitmask, row_ids);
#else
    VELA_THROW(Unsupported, op, ": this build has no CUDA backend");
#endif
    return;
  }
  cpu::apply_token_bitmask(logits, bitmask, row_ids);
}

}  // namespace vela::ops
