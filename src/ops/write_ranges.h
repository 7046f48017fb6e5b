// write_ranges: runs of int32 values written into the rows of a 2-D int32 table by one op,
// table[r, c + j] = values[off + j] for j < n, for every range (r, c, n, off). The request table's
// sync (engine/cache/req_to_token_pool.h) sends a step's short changes of many rows (a page of
// slots each) as one upload and this op instead of one copy per row.
//   ranges: [n_ranges, 4] i32 (row, column, length, offset into values), contiguous
//   values: [n_values] i32, contiguous       table: [rows, cols] i32, contiguous
// All three on one device. The CPU checks every range before it writes any (InvalidArgument);
// CUDA trusts device metadata and skips a range that does not fit the table or the values.
#pragma once

#include "core/tensor.h"

namespace vela::ops {

void write_ranges(const Tensor& ranges, const Tensor& values, Tensor& table);

}  // namespace vela::ops
