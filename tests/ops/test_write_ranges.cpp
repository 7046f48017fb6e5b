// write_ranges: runs of values land where their ranges say and nowhere else; a malformed operand
// or a range out of bounds is an InvalidArgument, and a failed call writes nothing.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "ops/write_ranges.h"

namespace vela {
namespace {

Tensor ranges_of(const std::vector<int32_t>& flat) {
  return Tensor::from_vector(flat).view({static_cast<int64_t>(flat.size() / 4), 4});
}

TEST(WriteRanges, WritesEachRunIntoItsRow) {
  const int64_t rows = 4, cols = 10;
  Tensor table = Tensor::from_vector(std::vector<int32_t>(rows * cols, -1)).view({rows, cols});
  std::vector<int32_t> values = {10, 11, 12, 20, 30, 31, 32, 33, 34, 35};
  // row 2 cols 7..9, row 0 col 0, row 3 cols 1..6 (the last run uses the values' tail), and an
  // empty run
  Tensor ranges = ranges_of({2, 7, 3, 0, 0, 0, 1, 3, 3, 1, 6, 4, 1, 5, 0, 0});
  ops::write_ranges(ranges, Tensor::from_vector(values), table);
  std::vector<int32_t> want(rows * cols, -1);
  want[2 * cols + 7] = 10, want[2 * cols + 8] = 11, want[2 * cols + 9] = 12;
  want[0] = 20;
  for (int j = 0; j < 6; ++j) want[3 * cols + 1 + j] = values[static_cast<size_t>(4 + j)];
  EXPECT_EQ(table.to_vector<int32_t>(), want);
}

TEST(WriteRanges, RejectsBadOperands) {
  Tensor table = Tensor::from_vector(std::vector<int32_t>(20, 0)).view({2, 10});
  Tensor values = Tensor::from_vector(std::vector<int32_t>(5, 7));
  auto fails = [&](std::vector<int32_t> range) {
    EXPECT_THROW(ops::write_ranges(ranges_of(range), values, table), InvalidArgument)
        << range[0] << " " << range[1] << " " << range[2] << " " << range[3];
  };
  fails({2, 0, 1, 0});              // row past the table
  fails({-1, 0, 1, 0});             // negative row
  fails({0, 8, 3, 0});              // run past the row's end
  fails({0, 0, 3, 3});              // run past the values
  fails({0, 0, -1, 0});             // negative length
  fails({0, 0, 1, -1});             // negative offset
  fails({0, 0, 2, 0, 1, 9, 2, 0});  // a good range, then one past the row's end
  EXPECT_EQ(table.to_vector<int32_t>(), std::vector<int32_t>(20, 0));
  EXPECT_THROW(ops::write_ranges(Tensor::from_vector(std::vector<int32_t>{0, 0, 1}).view({1, 3}),
                                 values, table),
               InvalidArgument);  // ranges not [n, 4]
  Tensor f32_table = Tensor::empty({2, 10}, DType::kF32);
  EXPECT_THROW(ops::write_ranges(ranges_of({0, 0, 1, 0}), values, f32_table), InvalidArgument);
  EXPECT_THROW(ops::write_ranges(ranges_of({0, 0, 1, 0}), values.view({5, 1}), table),
               InvalidArgument);  // values not 1-D
}

}  // namespace
}  // namespace vela
