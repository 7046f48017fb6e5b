// cast / to_dtype: every 16-bit pattern widened exactly, f32 -> bf16 / f16 rounding to nearest
// even on hand-picked ties, inf, NaN, f16 subnormals and overflow, vector body and scalar tail
// agreeing with the scalar conversions, same-dtype copies, and the InvalidArgument paths.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "ops/cast.h"
#include "ops/op_test_util.h"

namespace vela {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Casts f32 values to dt through the op and returns the 16-bit patterns.
std::vector<uint16_t> narrow_bits(const std::vector<float>& values, DType dt) {
  Tensor out = Tensor::empty({static_cast<int64_t>(values.size())}, dt);
  ops::cast(Tensor::from_vector(values), out);
  std::vector<uint16_t> bits(values.size());
  std::memcpy(bits.data(), out.data_ptr(), bits.size() * 2);
  return bits;
}

TEST(Cast, WidensEvery16BitPattern) {
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  for (DType dt : {DType::kBF16, DType::kF16}) {
    Tensor src = Tensor::empty({65536}, dt);
    std::memcpy(src.data_ptr(), all.data(), 65536 * 2);
    Tensor wide = Tensor::empty({65536}, DType::kF32);
    ops::cast(src, wide);
    std::vector<float> got = wide.to_vector<float>();
    for (uint32_t i = 0; i < 65536; ++i) {
      float want = dt == DType::kBF16 ? from_bits(i << 16) : f16::to_f32(static_cast<uint16_t>(i));
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got[i])) << dtype_name(dt) << " pattern " << i;
      } else {
        ASSERT_EQ(f32_bits(got[i]), f32_bits(want)) << dtype_name(dt) << " pattern " << i;
      }
    }
    // And back: every non-NaN pattern survives the round trip bit-exactly.
    Tensor back = Tensor::empty({65536}, dt);
    ops::cast(wide, back);
    std::vector<uint16_t> rt(65536);
    std::memcpy(rt.data(), back.data_ptr(), 65536 * 2);
    for (uint32_t i = 0; i < 65536; ++i) {
      if (!std::isnan(got[i])) {
        ASSERT_EQ(rt[i], i) << dtype_name(dt) << " round trip " << i;
      }
    }
  }
}

TEST(Cast, Bf16RoundsToNearestEven) {
  std::vector<float> v = {
      from_bits(0x3F808000),  // 1 + 2^-8: tie between 0x3F80 and 0x3F81 -> even 0x3F80
      from_bits(0x3F818000),  // tie between 0x3F81 and 0x3F82 -> even 0x3F82
      from_bits(0x3F808001),  // just above the tie -> 0x3F81
      from_bits(0x3F807FFF),  // just below -> 0x3F80
      from_bits(0x7F7FFFFF),  // FLT_MAX rounds up to inf
      INFINITY,
      -INFINITY,
      -0.0f,
      from_bits(0x00000001),  // smallest f32 subnormal -> +0
      from_bits(0x00018000),  // subnormal tie -> even 0x0002
  };
  std::vector<uint16_t> want = {0x3F80, 0x3F82, 0x3F81, 0x3F80, 0x7F80,
                                0x7F80, 0xFF80, 0x8000, 0x0000, 0x0002};
  EXPECT_EQ(narrow_bits(v, DType::kBF16), want);
  std::vector<uint16_t> nan = narrow_bits({NAN, -NAN, from_bits(0x7F800001)}, DType::kBF16);
  for (uint16_t b : nan) EXPECT_TRUE(std::isnan(from_bits(static_cast<uint32_t>(b) << 16))) << b;
}

TEST(Cast, F16RoundsToNearestEvenWithSubnormalsAndOverflow) {
  const float k2m24 = std::ldexp(1.0f, -24), k2m25 = std::ldexp(1.0f, -25);
  std::vector<float> v = {
      1.0f + std::ldexp(1.0f, -11),      // tie between 0x3C00 and 0x3C01 -> 0x3C00
      1.0f + 3 * std::ldexp(1.0f, -11),  // tie between 0x3C01 and 0x3C02 -> 0x3C02
      k2m24,                             // smallest subnormal
      k2m25,                             // half of it: tie -> +0
      3 * k2m25,                         // 1.5 ulp: tie -> even 0x0002
      1.25f * k2m24,                     // -> 0x0001
      std::ldexp(1.0f, -14),             // smallest normal
      std::ldexp(1023.0f, -24),          // largest subnormal
      65504.0f,                          // largest finite
      65519.0f,                          // rounds down to 65504
      65520.0f,                          // tie at the top -> inf
      1e6f,
      -1e6f,
      INFINITY,
      -INFINITY,
      -0.0f,
      -k2m24,
  };
  std::vector<uint16_t> want = {0x3C00, 0x3C02, 0x0001, 0x0000, 0x0002, 0x0001,
                                0x0400, 0x03FF, 0x7BFF, 0x7BFF, 0x7C00, 0x7C00,
                                0xFC00, 0x7C00, 0xFC00, 0x8000, 0x8001};
  EXPECT_EQ(narrow_bits(v, DType::kF16), want);
  for (uint16_t b : narrow_bits({NAN, -NAN}, DType::kF16)) EXPECT_TRUE(std::isnan(f16::to_f32(b)));
}

TEST(Cast, VectorBodyAndTailMatchScalarConversions) {
  // 4096 + 13 values over a wide range: the SIMD body and the scalar tail must agree with
  // bf16::from_f32 / f16::from_f32 bit for bit (NaN aside).
  const int64_t n = 4096 + 13;
  std::vector<float> v(n);
  uint32_t state = 12345;
  for (int64_t i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    v[i] = from_bits((state & 0x807FFFFFu) | ((100u + (state >> 23) % 50u) << 23));  // 2^-27..2^22
  }
  std::vector<uint16_t> b = narrow_bits(v, DType::kBF16), h = narrow_bits(v, DType::kF16);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(b[i], bf16::from_f32(v[i])) << "bf16 at " << i << " value " << v[i];
    ASSERT_EQ(h[i], f16::from_f32(v[i])) << "f16 at " << i << " value " << v[i];
  }
}

TEST(Cast, BetweenSixteenBitTypesAndSameDtype) {
  Tensor x = test::random_tensor({7, 127}, DType::kF16, 5, -70000.0f, 70000.0f);
  Tensor y = Tensor::empty({7, 127}, DType::kBF16);
  ops::cast(x, y);
  std::vector<double> xs = test::to_doubles(x), ys = test::to_doubles(y);
  for (size_t i = 0; i < xs.size(); ++i)
    ASSERT_EQ(ys[i], static_cast<float>(bf16(static_cast<float>(xs[i])))) << i;
  Tensor ints = Tensor::from_vector(std::vector<int32_t>{1, -2, 3});
  Tensor copy = Tensor::empty({3}, DType::kI32);
  ops::cast(ints, copy);
  EXPECT_EQ(copy.to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 3}));
}

TEST(Cast, ToDtype) {
  Tensor x = test::random_tensor({3, 5}, DType::kF32, 6);
  Tensor same = ops::to_dtype(x, DType::kF32);
  EXPECT_EQ(same.data_ptr(), x.data_ptr());
  Tensor h = ops::to_dtype(x, DType::kBF16);
  EXPECT_EQ(h.dtype(), DType::kBF16);
  EXPECT_EQ(h.shape(), x.shape());
  test::expect_close(test::to_doubles(h), test::to_doubles(x), 0.0, 1.0 / 256, "to_dtype");
  // A non-contiguous source is made contiguous first.
  Tensor t = ops::to_dtype(x.transpose(0, 1), DType::kF16);
  EXPECT_EQ(t.shape(), (Shape{5, 3}));
  test::expect_close(test::to_doubles(t), test::to_doubles(x.transpose(0, 1)), 0.0, 1.0 / 2048,
                     "to_dtype transposed");
}

TEST(Cast, SameDtypeCopiesRowStridedColumnBlocks) {
  // A fused [n, 5 + 2 + 2] matrix split into its column blocks and gathered back.
  Tensor fused = test::random_tensor({6, 9}, DType::kF32, 3);
  const std::vector<float> f = fused.to_vector<float>();
  Tensor a = Tensor::empty({6, 5}, DType::kF32), b = Tensor::empty({6, 2}, DType::kF32);
  ops::cast(fused.slice(1, 0, 5), a);
  ops::cast(fused.slice(1, 7, 9), b);
  const std::vector<float> va = a.to_vector<float>(), vb = b.to_vector<float>();
  for (size_t r = 0; r < 6; ++r) {
    for (size_t c = 0; c < 5; ++c) EXPECT_EQ(va[r * 5 + c], f[r * 9 + c]);
    for (size_t c = 0; c < 2; ++c) EXPECT_EQ(vb[r * 2 + c], f[r * 9 + 7 + c]);
  }
  Tensor back = Tensor::zeros({6, 9}, DType::kF32);
  Tensor back_a = back.slice(1, 0, 5), back_b = back.slice(1, 7, 9);
  ops::cast(a, back_a);
  ops::cast(b, back_b);
  const std::vector<float> vback = back.to_vector<float>();
  for (size_t i = 0; i < vback.size(); ++i)
    EXPECT_EQ(vback[i], i % 9 == 5 || i % 9 == 6 ? 0.0f : f[i]) << i;
  // Converting casts still need contiguous tensors; transposes are not row-strided.
  Tensor h = Tensor::empty({6, 5}, DType::kBF16);
  EXPECT_THROW(ops::cast(fused.slice(1, 0, 5), h), InvalidArgument);
  Tensor t = Tensor::empty({9, 6}, DType::kF32);
  EXPECT_THROW(ops::cast(fused.transpose(0, 1), t), InvalidArgument);
}

TEST(Cast, InvalidArguments) {
  Tensor ints = Tensor::from_vector(std::vector<int32_t>{1, 2, 3});
  Tensor f = Tensor::empty({3}, DType::kF32);
  EXPECT_THROW(ops::cast(ints, f), InvalidArgument);
  EXPECT_THROW(ops::cast(f, ints), InvalidArgument);
  Tensor g = Tensor::empty({4}, DType::kBF16);
  EXPECT_THROW(ops::cast(f, g), InvalidArgument);
  Tensor x = test::random_tensor({4, 3}, DType::kF32, 1);
  Tensor out = Tensor::empty({3, 4}, DType::kBF16);
  EXPECT_THROW(ops::cast(x.transpose(0, 1), out), InvalidArgument);
  EXPECT_THROW(ops::to_dtype(Tensor(), DType::kF32), InvalidArgument);
}

}  // namespace
}  // namespace vela
