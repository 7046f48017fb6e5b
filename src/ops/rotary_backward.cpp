// rotary_backward: checks, then dispatch.
#include "ops/backward_dispatch.h"
#include "ops/checks.h"
#include "ops/rotary.h"

namespace vela::ops {

void rotary_backward(Tensor& dx, const Tensor& positions, const Tensor& table) {
  const char* op = "rotary_backward";
  check_defined(op, "dx", dx);
  check_defined(op, "positions", positions);
  check_defined(op, "table", table);
  check_rank(op, "dx", dx, 3);
  check_floating(op, "dx", dx);
  if (dx.is_cpu()) check_dtype(op, "dx", dx, DType::kF32);
  check_rank(op, "positions", positions, 1);
  check_dtype(op, "positions", positions, DType::kI32);
  check_contiguous(op, "positions", positions);
  VELA_CHECK(positions.size(0) == dx.size(0), op, ": positions ", positions.str(),
             " must have one entry per token of dx ", dx.str());
  check_rank(op, "table", table, 2);
  check_dtype(op, "table", table, DType::kF32);
  check_contiguous(op, "table", table);
  VELA_CHECK(table.size(1) % 2 == 0 && table.size(1) <= dx.size(2), op, ": table ", table.str(),
             " must have an even rotary_dim <= head_dim of dx ", dx.str());
  VELA_CHECK(dx.stride(2) == 1 && dx.stride(1) == dx.size(2), op, ": dx ", dx.str(),
             " must have contiguous heads");
  check_same_device(op, "positions", positions, "dx", dx);
  check_same_device(op, "table", table, "dx", dx);
  check_positions_in_table(op, positions, table);
  VELA_DISPATCH(dx.device(), rotary_backward, dx, positions, table);
}

}  // namespace vela::ops
