// write_ranges dispatcher: operand checks, then the CPU or CUDA kernel.
#include "ops/write_ranges.h"

#include "ops/checks.h"
#include "ops/dispatch.h"

namespace vela::ops {

void write_ranges(const Tensor& ranges, const Tensor& values, Tensor& table) {
  const char* op = "write_ranges";
  auto check = [op](const char* name, const Tensor& t, int rank) {
    check_defined(op, name, t);
    check_rank(op, name, t, rank);
    check_dtype(op, name, t, DType::kI32);
    check_contiguous(op, name, t);
  };
  check("ranges", ranges, 2);
  check("values", values, 1);
  check("table", table, 2);
  VELA_CHECK(ranges.size(1) == 4, op, ": ranges must be [n, 4] (row, column, length, offset), got ",
             ranges.str());
  check_same_device(op, "ranges", ranges, "table", table);
  check_same_device(op, "values", values, "table", table);
  if (ranges.size(0) == 0) return;
  VELA_DISPATCH(table.device(), write_ranges, ranges, values, table);
}

}  // namespace vela::ops
