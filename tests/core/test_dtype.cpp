// bf16 / f16 conversions against references computed here from first principles (exact long double
// values of every code, round-to-nearest-even by comparison with the exact midpoint), and dtype
// names and sizes.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <random>

#include "core/dtype.h"
#include "core/error.h"
#include "test_util.h"

namespace vela {
namespace {

// Exact value of a non-negative f16 code in [0, 0x7c00]; 0x7c00 yields 65536, the step past the
// largest finite value, which is where IEEE rounding to infinity is decided.
long double f16_value(uint32_t code) {
  uint32_t e = code >> 10, m = code & 0x3ff;
  return e == 0 ? std::ldexp(static_cast<long double>(m), -24)
                : std::ldexp(static_cast<long double>(1024 + m), static_cast<int>(e) - 25);
}

// Same for bf16 codes in [0, 0x7f80] (0x7f80 yields 2^128).
long double bf16_value(uint32_t code) {
  uint32_t e = code >> 7, m = code & 0x7f;
  return e == 0 ? std::ldexp(static_cast<long double>(m), -133)
                : std::ldexp(static_cast<long double>(128 + m), static_cast<int>(e) - 134);
}

// The code nearest to `a` >= 0 among the increasing values val(0..top), ties to the even code.
template <typename Val>
uint32_t ref_round(long double a, uint32_t top, Val val) {
  if (a >= val(top)) return top;
  uint32_t lo = 0, hi = top;  // val(lo) <= a < val(hi)
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    (val(mid) <= a ? lo : hi) = mid;
  }
  long double m = (val(lo) + val(hi)) / 2;  // exact: both are short dyadic fractions
  if (a < m) return lo;
  if (a > m) return hi;
  return (lo & 1u) == 0 ? lo : hi;
}

uint16_t ref_f32_to_f16(float x) {
  uint32_t sign = std::signbit(x) ? 0x8000u : 0u;
  return static_cast<uint16_t>(
      sign | ref_round(std::fabs(static_cast<long double>(x)), 0x7c00u, f16_value));
}

uint16_t ref_f32_to_bf16(float x) {
  uint32_t sign = std::signbit(x) ? 0x8000u : 0u;
  return static_cast<uint16_t>(
      sign | ref_round(std::fabs(static_cast<long double>(x)), 0x7f80u, bf16_value));
}

bool f16_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool bf16_is_nan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

// Checks one float against both references (NaN must stay NaN).
void check_both(float x, int* n_bad) {
  uint16_t h = f16::from_f32(x), b = bf16::from_f32(x);
  bool bad;
  if (std::isnan(x)) {
    bad = !f16_is_nan(h) || !bf16_is_nan(b);
  } else {
    bad = h != ref_f32_to_f16(x) || b != ref_f32_to_bf16(x);
  }
  if (bad && ++*n_bad <= 10)
    ADD_FAILURE() << "x=" << x << " (bits " << std::hex << f32_bits(x) << "): f16 " << h << " want "
                  << ref_f32_to_f16(x) << ", bf16 " << b << " want " << ref_f32_to_bf16(x);
}

TEST(DType, F16ExhaustiveDecodeAndRoundTrip) {
  int n_bad = 0;
  for (uint32_t code = 0; code < 65536; ++code) {
    uint16_t h = static_cast<uint16_t>(code);
    float f = f16::to_f32(h);
    EXPECT_EQ(f32_bits(static_cast<float>(f16::from_bits(h))), f32_bits(f)) << std::hex << code;
    uint32_t mag = code & 0x7fffu;
    bool neg = (code & 0x8000u) != 0;
    if (mag > 0x7c00u) {
      if (!std::isnan(f) || !f16_is_nan(f16::from_f32(f))) ++n_bad;
      continue;
    }
    EXPECT_EQ(std::signbit(f), neg);
    if (mag == 0x7c00u) {
      EXPECT_TRUE(std::isinf(f));
    } else if (static_cast<long double>(std::fabs(f)) != f16_value(mag)) {
      if (++n_bad <= 10) ADD_FAILURE() << "decode of " << std::hex << code << " gave " << f;
    }
    if (f16::from_f32(f) != h && ++n_bad <= 10)
      ADD_FAILURE() << "round trip of " << std::hex << code << " gave " << f16::from_f32(f);
  }
  EXPECT_EQ(n_bad, 0);
}

TEST(DType, Bf16ExhaustiveDecodeAndRoundTrip) {
  int n_bad = 0;
  for (uint32_t code = 0; code < 65536; ++code) {
    uint16_t b = static_cast<uint16_t>(code);
    float f = static_cast<float>(bf16::from_bits(b));
    EXPECT_EQ(f32_bits(f), code << 16);
    if ((code & 0x7fffu) > 0x7f80u) {
      if (!std::isnan(f) || !bf16_is_nan(bf16::from_f32(f))) ++n_bad;
      continue;
    }
    if (bf16::from_f32(f) != b && ++n_bad <= 10)
      ADD_FAILURE() << "round trip of " << std::hex << code << " gave " << bf16::from_f32(f);
  }
  EXPECT_EQ(n_bad, 0);
}

// Every f16 and bf16 value, every midpoint between neighbours, and the floats just either side.
TEST(DType, RoundingAtEveryMidpoint) {
  int n_bad = 0;
  auto probe = [&](long double v) {
    float f = static_cast<float>(v);
    ASSERT_EQ(static_cast<long double>(f), v);  // midpoints are exact floats
    for (float x : {f, std::nextafter(f, 0.0f), std::nextafter(f, INFINITY)}) {
      check_both(x, &n_bad);
      check_both(-x, &n_bad);
    }
  };
  for (uint32_t c = 0; c < 0x7c00u; ++c) {
    probe(f16_value(c));
    probe((f16_value(c) + f16_value(c + 1)) / 2);
  }
  for (uint32_t c = 0; c < 0x7f80u; ++c) {
    probe(bf16_value(c));
    long double mid = (bf16_value(c) + bf16_value(c + 1)) / 2;
    if (mid <= FLT_MAX) probe(mid);
  }
  EXPECT_EQ(n_bad, 0);
}

TEST(DType, RoundingOfRandomFloats) {
  std::mt19937 gen(1234);
  int n_bad = 0;
  for (int i = 0; i < 400000; ++i) {
    uint32_t u = gen();
    check_both(bits_f32(u), &n_bad);  // the whole float range, NaN and inf included
    // Exponents where f16 has its normals, subnormals, underflow and overflow.
    uint32_t e = 98 + gen() % 50;
    check_both(bits_f32((u & 0x807fffffu) | (e << 23)), &n_bad);
  }
  EXPECT_EQ(n_bad, 0);
}

TEST(DType, F16SpecialCases) {
  auto h = [](float x) { return f16::from_f32(x); };
  // Overflow: 65520 is the midpoint between 65504 (odd code 0x7bff) and "65536", so it rounds up.
  EXPECT_EQ(h(65504.0f), 0x7bff);
  EXPECT_EQ(h(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(h(65520.0f), 0x7c00);
  EXPECT_EQ(h(1e6f), 0x7c00);
  EXPECT_EQ(h(-1e6f), 0xfc00);
  EXPECT_EQ(h(FLT_MAX), 0x7c00);
  EXPECT_EQ(h(INFINITY), 0x7c00);
  EXPECT_EQ(h(-INFINITY), 0xfc00);
  // Subnormals and underflow (u = 2^-24, the smallest subnormal).
  const float u = std::ldexp(1.0f, -24);
  EXPECT_EQ(h(u), 0x0001);
  EXPECT_EQ(h(u / 2), 0x0000);  // tie with 0: even
  EXPECT_EQ(h(std::nextafter(u / 2, 1.0f)), 0x0001);
  EXPECT_EQ(h(1.5f * u), 0x0002);  // tie between 1 and 2: even
  EXPECT_EQ(h(2.5f * u), 0x0002);  // tie between 2 and 3: even
  EXPECT_EQ(h(u / 4), 0x0000);
  EXPECT_EQ(h(-u / 4), 0x8000);  // underflow keeps the sign
  EXPECT_EQ(h(FLT_TRUE_MIN), 0x0000);
  EXPECT_EQ(h(1023.0f * u), 0x03ff);  // largest subnormal
  EXPECT_EQ(h(1023.5f * u), 0x0400);  // tie rounds up into the smallest normal
  EXPECT_EQ(h(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(f16::to_f32(0x0001), u);
  EXPECT_EQ(f16::to_f32(0x03ff), 1023.0f * u);
  // Normal ties.
  EXPECT_EQ(h(1.0f), 0x3c00);
  EXPECT_EQ(h(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie: stays on even 1.0
  EXPECT_EQ(h(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie: up to even
  EXPECT_EQ(h(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -23)), 0x3c01);
  EXPECT_EQ(h(2047.0f), 0x67ff);
  EXPECT_EQ(h(2049.0f), 0x6800);  // tie between 2048 and 2050: even
  EXPECT_EQ(h(2051.0f), 0x6802);
  EXPECT_EQ(h(-0.0f), 0x8000);
  EXPECT_EQ(h(0.0f), 0x0000);
  EXPECT_TRUE(f16_is_nan(h(NAN)));
  EXPECT_TRUE(std::isnan(f16::to_f32(0x7e00)));
  EXPECT_TRUE(std::isnan(static_cast<float>(f16(NAN))));
}

TEST(DType, Bf16SpecialCases) {
  auto b = [](float x) { return bf16::from_f32(x); };
  EXPECT_EQ(b(1.0f), 0x3f80);
  EXPECT_EQ(b(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie: stays on even
  EXPECT_EQ(b(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie: up to even
  EXPECT_EQ(b(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)), 0x3f81);
  EXPECT_EQ(b(FLT_MAX), 0x7f80);                // above the last midpoint: inf
  EXPECT_EQ(b(bits_f32(0x7f7f7fffu)), 0x7f7f);  // just below it
  EXPECT_EQ(b(bits_f32(0x7f7f8000u)), 0x7f80);  // the tie, from an odd code: inf
  EXPECT_EQ(b(-INFINITY), 0xff80);
  EXPECT_EQ(b(-0.0f), 0x8000);
  EXPECT_EQ(b(FLT_TRUE_MIN), 0x0000);  // tie with zero: even
  EXPECT_EQ(b(bits_f32(0x00008001u)), 0x0001);
  // NaNs whose payload lives only in the low 16 bits must not truncate to infinity.
  EXPECT_TRUE(bf16_is_nan(b(bits_f32(0x7f800001u))));
  EXPECT_TRUE(bf16_is_nan(b(bits_f32(0xff800001u))));
  EXPECT_TRUE(bf16_is_nan(b(NAN)));
  EXPECT_EQ(static_cast<float>(bf16(3.0f)), 3.0f);
}

TEST(DType, NamesAndSizes) {
  struct Case {
    DType dt;
    size_t size;
    const char* name;
    bool floating;
  };
  for (Case c : {Case{DType::kF32, 4, "f32", true}, Case{DType::kBF16, 2, "bf16", true},
                 Case{DType::kF16, 2, "f16", true}, Case{DType::kI32, 4, "i32", false},
                 Case{DType::kI64, 8, "i64", false}, Case{DType::kU8, 1, "u8", false}}) {
    EXPECT_EQ(dtype_size(c.dt), c.size);
    EXPECT_STREQ(dtype_name(c.dt), c.name);
    EXPECT_EQ(is_floating(c.dt), c.floating);
    EXPECT_EQ(parse_dtype(c.name), c.dt);
  }
  EXPECT_EQ(parse_dtype("BF16"), DType::kBF16);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::kBF16);
  EXPECT_EQ(parse_dtype("float32"), DType::kF32);
  EXPECT_EQ(parse_dtype("F32"), DType::kF32);
  EXPECT_EQ(parse_dtype("float"), DType::kF32);
  EXPECT_EQ(parse_dtype("F16"), DType::kF16);
  EXPECT_EQ(parse_dtype("float16"), DType::kF16);
  EXPECT_EQ(parse_dtype("half"), DType::kF16);
  EXPECT_EQ(parse_dtype("I32"), DType::kI32);
  EXPECT_EQ(parse_dtype("int64"), DType::kI64);
  EXPECT_EQ(parse_dtype("U8"), DType::kU8);
  EXPECT_EQ(parse_dtype("uint8"), DType::kU8);
  EXPECT_THROW_WITH((void)parse_dtype("f64"), InvalidArgument, "'f64'", "expected");
  EXPECT_THROW_WITH((void)parse_dtype(""), InvalidArgument, "unknown dtype");
  EXPECT_EQ(DTypeOf<bf16>::value, DType::kBF16);
  EXPECT_EQ(sizeof(bf16), 2u);
  EXPECT_EQ(sizeof(f16), 2u);
}

}  // namespace
}  // namespace vela
