// Philox-4x32-10 against the Random123 known-answer vectors, and the Rng generator built on it
// (reproducibility, offsets, distributions).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "core/rng.h"

namespace vela {
namespace {

// Random123's philox4x32_10 KAT: counter (c0, c1, c2, c3), key (k0, k1). vela packs the counter as
// (lo(block), hi(block), lo(stream), hi(stream)) and the key as (lo(seed), hi(seed)).
void expect_kat(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1,
                std::array<uint32_t, 4> want) {
  uint64_t block = (static_cast<uint64_t>(c1) << 32) | c0;
  uint64_t stream = (static_cast<uint64_t>(c3) << 32) | c2;
  uint64_t seed = (static_cast<uint64_t>(k1) << 32) | k0;
  PhiloxOut out = philox4x32(seed, block, stream);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(out.x[i], want[i]) << "word " << i << std::hex << ": got " << out.x[i] << " want "
                                 << want[i];
}

TEST(Philox, KnownAnswers) {
  expect_kat(0, 0, 0, 0, 0, 0, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  expect_kat(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu,
             {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
  expect_kat(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u,
             {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
}

TEST(Philox, WordsAndUniforms) {
  PhiloxOut blk = philox4x32(7, 3, 11);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(philox_u32(7, 11, 12 + i), blk.x[i]);
  EXPECT_EQ(philox_uniform(7, 11, 13), static_cast<float>(blk.x[1] >> 8) / 16777216.0f);
  EXPECT_NE(philox_u32(7, 11, 0), philox_u32(7, 12, 0));  // streams differ
  EXPECT_NE(philox_u32(7, 11, 0), philox_u32(8, 11, 0));  // seeds differ
}

TEST(Rng, ReproducibleAndOffsettable) {
  Rng a(42, 3), b(42, 3), other_stream(42, 4);
  std::vector<uint32_t> seq;
  for (int i = 0; i < 100; ++i) seq.push_back(a.next_u32());
  int n_same = 0;
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(b.next_u32(), seq[i]);
    n_same += other_stream.next_u32() == seq[i];
  }
  EXPECT_LT(n_same, 3);
  EXPECT_EQ(a.offset(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(seq[i], philox_u32(42, 3, i));

  Rng c(42, 3);
  c.set_offset(37);
  EXPECT_EQ(c.next_u32(), seq[37]);
  EXPECT_EQ(c.offset(), 38u);
  uint64_t first = c.reserve(10);
  EXPECT_EQ(first, 38u);
  EXPECT_EQ(c.offset(), 48u);
  EXPECT_EQ(c.next_u32(), seq[48]);
  c.set_offset(50);
  EXPECT_EQ(c.next_u64(), (static_cast<uint64_t>(seq[50]) << 32) | seq[51]);
  EXPECT_EQ(c.seed(), 42u);
  EXPECT_EQ(c.stream(), 3u);
}

TEST(Rng, UniformInUnitInterval) {
  Rng r(123);
  double sum = 0;
  float lo = 1, hi = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    float u = r.uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    lo = std::min(lo, u);
    hi = std::max(hi, u);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.01);
  EXPECT_LT(lo, 0.001f);
  EXPECT_GT(hi, 0.999f);
  // The largest possible draw is still below 1.
  EXPECT_LT(static_cast<float>(0xffffffffu >> 8) * (1.0f / 16777216.0f), 1.0f);
}

TEST(Rng, NormalMoments) {
  Rng r(2024, 1);
  const int n = 100000;
  double sum = 0, sum_sq = 0;
  int n_beyond_3 = 0;
  for (int i = 0; i < n; ++i) {
    float z = r.normal();
    ASSERT_TRUE(std::isfinite(z));
    sum += z;
    sum_sq += static_cast<double>(z) * z;
    n_beyond_3 += std::fabs(z) > 3.0f;
  }
  double mean = sum / n, var = sum_sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(var, 1.0, 0.03);
  EXPECT_NEAR(n_beyond_3 / static_cast<double>(n), 0.0027, 0.0015);
  EXPECT_EQ(r.offset(), 2u * n);  // two uniforms per draw
}

}  // namespace
}  // namespace vela
