// write_ranges dispatcher: operand checks, then the CPU or CUDA kernel.
#include "ops/write_ranges.h"

#include "ops/dispatch.h"

namespace vela::ops {

void write_ranges(const Tensor& ranges, const Tensor& values, Tensor& table) {
  const char* op = "write_ranges";
  auto check = [&](const char* name, const Tensor& t, int rank) {
    VELA_CHECK(t.defined() && t.dtype() == DType::kI32 && t.dim() == rank && t.is_contiguous(), op,
               ": ", name, " must be a contiguous i32 tensor of rank ", rank, ", got ", t.str());
  };
  check("ranges", ranges, 2);
  check("values", values, 1);
  check("table", table, 2);
  VELA_CHECK(ranges.size(1) == 4, op, ": ranges must be [n, 4] (row, column, length, offset), got ",
             ranges.str());
  VELA_CHECK(values.device() == table.device() && ranges.device() == table.device(), op,
             ": ranges ", ranges.str(), ", values ", values.str(), " and table ", table.str(),
             " must be on one device");
  if (ranges.size(0) == 0) return;
  VELA_DISPATCH(table.device(), write_ranges, ranges, values, table);
}

}  // namespace vela::ops
