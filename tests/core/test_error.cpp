// The error hierarchy and the checking macros: which type each throws, and that messages carry
// the caller's text and file:line.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "test_util.h"

namespace vela {
namespace {

int check_positive(int x) {
  VELA_CHECK(x > 0, "x must be positive, got ", x);
  return x;
}

TEST(Error, CheckThrowsInvalidArgumentWithLocation) {
  EXPECT_EQ(check_positive(3), 3);
  int line = __LINE__ + 1;
  auto fail = [] { VELA_CHECK(1 + 1 == 3, "math is ", "broken: ", 2); };
  std::string where = "test_error.cpp:" + std::to_string(line) + "]";
  EXPECT_THROW_WITH(fail(), InvalidArgument, "math is broken: 2", where);
  EXPECT_THROW_WITH(check_positive(-4), InvalidArgument, "x must be positive, got -4",
                    "test_error.cpp:");
}

TEST(Error, CheckDoesNotFormatWhenTrue) {
  int n_evaluated = 0;
  auto counted = [&] { return ++n_evaluated; };
  VELA_CHECK(true, "never ", counted());
  VELA_CHECK_T(IoError, true, "never ", counted());
  VELA_ASSERT(true, "never ", counted());
  EXPECT_EQ(n_evaluated, 0);
}

TEST(Error, CheckTThrowsTheGivenType) {
  EXPECT_THROW_WITH(VELA_CHECK_T(IoError, false, "cannot read '", "f.bin", "'"), IoError,
                    "cannot read 'f.bin'", "test_error.cpp:");
  EXPECT_THROW(VELA_CHECK_T(Unsupported, false, "x"), Unsupported);
  EXPECT_THROW(VELA_CHECK_T(OutOfMemory, false, "x"), OutOfMemory);
  EXPECT_THROW(VELA_CHECK_T(CudaError, false, "x"), CudaError);
  EXPECT_THROW_WITH(VELA_THROW(Unsupported, "no ", "way"), Unsupported, "no way");
  // Every kind is a vela::Error and a std::runtime_error.
  EXPECT_THROW(VELA_CHECK_T(IoError, false, "x"), Error);
  EXPECT_THROW(VELA_CHECK(false, "x"), std::runtime_error);
}

TEST(Error, AssertThrowsInternalError) {
  int x = 1;
  EXPECT_THROW_WITH(VELA_ASSERT(x == 2, "x was ", x), InternalError,
                    "internal assertion failed: x == 2", "x was 1", "test_error.cpp:");
  EXPECT_THROW_WITH(VELA_ASSERT(x < 0), InternalError, "x < 0");
}

}  // namespace
}  // namespace vela
