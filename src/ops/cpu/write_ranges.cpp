// CPU write_ranges (ops/write_ranges.h): every range checked against the table and the values
// before any is written.
#include <algorithm>

#include "ops/cpu/cpu_ops.h"

namespace vela::ops::cpu {

void write_ranges(const Tensor& ranges, const Tensor& values, Tensor& table) {
  const int64_t rows = table.size(0), cols = table.size(1), n_values = values.size(0);
  const int32_t* rg = ranges.data<int32_t>();
  const int32_t* v = values.data<int32_t>();
  int32_t* t = table.data<int32_t>();
  for (int64_t i = 0; i < ranges.size(0); ++i) {  // all checked before any is written
    const int32_t* g = rg + 4 * i;
    const int64_t r = g[0], c = g[1], n = g[2], off = g[3];
    VELA_CHECK(
        r >= 0 && r < rows && c >= 0 && n >= 0 && c + n <= cols && off >= 0 && off + n <= n_values,
        "write_ranges: range ", i, " (row ", r, ", column ", c, ", length ", n, ", offset ", off,
        ") does not fit a [", rows, ", ", cols, "] table and ", n_values, " values");
  }
  for (int64_t i = 0; i < ranges.size(0); ++i, rg += 4)
    std::copy_n(v + rg[3], rg[2], t + int64_t{rg[0]} * cols + rg[1]);
}

}  // namespace vela::ops::cpu
