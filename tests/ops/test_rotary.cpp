// RoPE: inverse frequencies and attention scaling of every scaling type against values computed
// by hand from Hugging Face's formulas, the cos/sin table, rotary() against a double reference
// (rotary_dim < head_dim, strided tokens, f32 / bf16 / f16), and the InvalidArgument paths.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "ops/op_test_util.h"
#include "ops/rotary.h"

namespace vela {
namespace {

using ops::RopeConfig;
using ops::RopeScaling;
using test::random_tensor;
using test::to_doubles;

constexpr double kPi = std::numbers::pi;

RopeConfig config(RopeScaling::Type type, int64_t dim = 128, double theta = 10000.0) {
  RopeConfig cfg;
  cfg.rotary_dim = dim;
  cfg.theta = theta;
  cfg.max_positions = 2048;
  cfg.scaling.type = type;
  return cfg;
}

double default_inv(double theta, int64_t i, int64_t dim) {
  return 1.0 / std::pow(theta, 2.0 * i / dim);
}

void expect_rel(double got, double want, const char* what, double rtol = 1e-12) {
  EXPECT_NEAR(got, want, rtol * std::fabs(want)) << what;
}

TEST(Rope, ParseType) {
  EXPECT_EQ(RopeScaling::parse_type("default"), RopeScaling::Type::kNone);
  EXPECT_EQ(RopeScaling::parse_type(""), RopeScaling::Type::kNone);
  EXPECT_EQ(RopeScaling::parse_type("linear"), RopeScaling::Type::kLinear);
  EXPECT_EQ(RopeScaling::parse_type("dynamic"), RopeScaling::Type::kDynamic);
  EXPECT_EQ(RopeScaling::parse_type("YaRN"), RopeScaling::Type::kYarn);
  EXPECT_EQ(RopeScaling::parse_type("llama3"), RopeScaling::Type::kLlama3);
  EXPECT_THROW(RopeScaling::parse_type("longrope"), Unsupported);
  EXPECT_THROW(RopeScaling::parse_type("bogus"), InvalidArgument);
}

TEST(Rope, DefaultFrequencies) {
  ops::RopeFrequencies f = ops::rope_frequencies(config(RopeScaling::Type::kNone));
  ASSERT_EQ(f.inv_freq.size(), 64u);
  EXPECT_EQ(f.inv_freq[0], 1.0);
  expect_rel(f.inv_freq[1], 0.8659643233600653, "default inv_freq[1]");
  for (int64_t i = 0; i < 64; ++i) expect_rel(f.inv_freq[i], default_inv(10000.0, i, 128), "inv");
  EXPECT_EQ(f.attention_scaling, 1.0);
}

TEST(Rope, LinearFrequencies) {
  RopeConfig cfg = config(RopeScaling::Type::kLinear);
  cfg.scaling.factor = 4.0;
  ops::RopeFrequencies f = ops::rope_frequencies(cfg);
  for (int64_t i = 0; i < 64; ++i) expect_rel(f.inv_freq[i], default_inv(1e4, i, 128) / 4.0, "lin");
  EXPECT_EQ(f.attention_scaling, 1.0);
}

TEST(Rope, DynamicNtkFrequencies) {
  RopeConfig cfg = config(RopeScaling::Type::kDynamic);
  cfg.scaling.factor = 2.0;
  // Within the original context the base is unchanged.
  ops::RopeFrequencies short_f = ops::rope_frequencies(cfg, 2048);
  for (int64_t i = 0; i < 64; ++i) expect_rel(short_f.inv_freq[i], default_inv(1e4, i, 128), "dyn");
  // Beyond it: base = theta * (factor * seq / max - (factor - 1)) ^ (dim / (dim - 2)).
  ops::RopeFrequencies f = ops::rope_frequencies(cfg, 4096);
  const double base = 30527.7367488067;
  expect_rel(f.inv_freq[1], 0.8509942913412162, "dynamic inv_freq[1]", 1e-10);
  for (int64_t i = 0; i < 64; ++i)
    expect_rel(f.inv_freq[i], default_inv(base, i, 128), "dyn", 1e-10);
  // original_max_positions overrides max_positions.
  cfg.scaling.original_max_positions = 1024;
  ops::RopeFrequencies g = ops::rope_frequencies(cfg, 2048);
  double base2 = 1e4 * std::pow(2.0 * 2048 / 1024 - 1.0, 128.0 / 126.0);
  expect_rel(g.inv_freq[5], default_inv(base2, 5, 128), "dynamic with original max");
}

TEST(Rope, YarnFrequencies) {
  RopeConfig cfg = config(RopeScaling::Type::kYarn);
  cfg.scaling.factor = 4.0;
  cfg.scaling.original_max_positions = 4096;
  ops::RopeFrequencies f = ops::rope_frequencies(cfg);
  // attention_factor = 0.1 * ln(4) + 1
  expect_rel(f.attention_scaling, 1.138629436111989, "yarn attention factor");
  // Correction range: floor(20.94) = 20, ceil(45.03) = 46; ramp = (i - 20) / 26.
  expect_rel(f.inv_freq[0], 1.0, "yarn inv_freq[0]");
  expect_rel(f.inv_freq[33], 0.005412277021000409, "yarn inv_freq[33]", 1e-10);
  expect_rel(f.inv_freq[63], 2.8869549617236455e-05, "yarn inv_freq[63]", 1e-10);
  for (int64_t i = 0; i < 64; ++i) {
    double ext = default_inv(1e4, i, 128);
    double ramp = std::clamp((i - 20.0) / 26.0, 0.0, 1.0);
    expect_rel(f.inv_freq[i], ext / 4.0 * ramp + ext * (1.0 - ramp), "yarn");
  }
  // Without truncation the range stays fractional.
  cfg.scaling.truncate = false;
  ops::RopeFrequencies g = ops::rope_frequencies(cfg);
  const double low = 20.94448162063605, high = 45.02688127375455;
  for (int64_t i = 0; i < 64; ++i) {
    double ext = default_inv(1e4, i, 128);
    double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    expect_rel(g.inv_freq[i], ext / 4.0 * ramp + ext * (1.0 - ramp), "yarn no truncate", 1e-9);
  }
  // mscale / mscale_all_dim (DeepSeek): ratio of the two temperatures.
  cfg.scaling.factor = 40.0;
  cfg.scaling.mscale = 1.0;
  cfg.scaling.mscale_all_dim = 0.5;
  expect_rel(ops::rope_frequencies(cfg).attention_scaling, 1.1557219901962608, "mscale ratio");
  cfg.scaling.mscale_all_dim = 1.0;
  expect_rel(ops::rope_frequencies(cfg).attention_scaling, 1.0, "equal mscales");
  cfg.scaling.attention_factor = 0.5;  // explicit value wins
  expect_rel(ops::rope_frequencies(cfg).attention_scaling, 0.5, "explicit attention factor");
}

TEST(Rope, Llama3Frequencies) {
  RopeConfig cfg = config(RopeScaling::Type::kLlama3, 128, 500000.0);
  cfg.max_positions = 131072;
  cfg.scaling.factor = 8.0;
  cfg.scaling.low_freq_factor = 1.0;
  cfg.scaling.high_freq_factor = 4.0;
  cfg.scaling.original_max_positions = 8192;
  ops::RopeFrequencies f = ops::rope_frequencies(cfg);
  EXPECT_EQ(f.attention_scaling, 1.0);
  expect_rel(f.inv_freq[0], 1.0, "llama3 high frequency kept");
  // i = 29: wavelength 2401.7 lies between 2048 and 8192 -> smoothed.
  expect_rel(f.inv_freq[29], 0.002166570763503359, "llama3 medium band", 1e-10);
  expect_rel(f.inv_freq[63], 3.068925988914511e-07, "llama3 low frequency / factor", 1e-10);
  for (int64_t i = 0; i < 64; ++i) {
    double inv = default_inv(500000.0, i, 128), wl = 2 * kPi / inv, want;
    if (wl < 2048.0) {
      want = inv;
    } else if (wl > 8192.0) {
      want = inv / 8.0;
    } else {
      double s = (8192.0 / wl - 1.0) / 3.0;
      want = (1.0 - s) * inv / 8.0 + s * inv;
    }
    expect_rel(f.inv_freq[i], want, "llama3");
  }
}

TEST(Rope, TableRows) {
  RopeConfig cfg = config(RopeScaling::Type::kYarn, 64);
  cfg.scaling.factor = 4.0;
  Tensor table = ops::make_rope_table(cfg, 37);
  ASSERT_EQ(table.shape(), (Shape{37, 64}));
  ASSERT_EQ(table.dtype(), DType::kF32);
  ops::RopeFrequencies f = ops::rope_frequencies(cfg);
  std::vector<float> t = table.to_vector<float>();
  for (int64_t p : {0, 1, 17, 36}) {
    for (int64_t i = 0; i < 32; ++i) {
      double a = p * f.inv_freq[i];
      EXPECT_FLOAT_EQ(t[p * 64 + i], static_cast<float>(std::cos(a) * f.attention_scaling));
      EXPECT_FLOAT_EQ(t[p * 64 + 32 + i], static_cast<float>(std::sin(a) * f.attention_scaling));
    }
  }
  EXPECT_THROW(ops::make_rope_table(config(RopeScaling::Type::kNone, 7), 4), InvalidArgument);
}

// x [n_tokens, n_heads, head_dim] rotated on its first rotary_dim features.
std::vector<double> rotary_ref(const std::vector<double>& x, const std::vector<int32_t>& pos,
                               const std::vector<float>& table, int64_t n_heads, int64_t head_dim,
                               int64_t rotary_dim) {
  std::vector<double> out = x;
  int64_t half = rotary_dim / 2;
  for (size_t t = 0; t < pos.size(); ++t) {
    const float* row = table.data() + pos[t] * rotary_dim;
    for (int64_t h = 0; h < n_heads; ++h) {
      double* v = out.data() + (t * n_heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        double x1 = v[i], x2 = v[half + i], c = row[i], s = row[half + i];
        v[i] = x1 * c - x2 * s;
        v[half + i] = x2 * c + x1 * s;
      }
    }
  }
  return out;
}

TEST(Rotary, MatchesReference) {
  uint64_t seed = 1;
  struct Case {
    int64_t n_tokens, n_heads, head_dim, rotary_dim;
  };
  for (DType dt : test::kFloatDTypes) {
    for (Case c :
         {Case{1, 1, 2, 2}, Case{7, 3, 128, 128}, Case{33, 4, 80, 32}, Case{5, 2, 64, 46}}) {
      Tensor table = ops::make_rope_table(config(RopeScaling::Type::kNone, c.rotary_dim), 300);
      Tensor x = random_tensor({c.n_tokens, c.n_heads, c.head_dim}, dt, seed++);
      std::vector<int32_t> pos(c.n_tokens);
      for (int64_t t = 0; t < c.n_tokens; ++t) pos[t] = static_cast<int32_t>((t * 37 + 5) % 300);
      std::vector<double> want = rotary_ref(to_doubles(x), pos, table.to_vector<float>(), c.n_heads,
                                            c.head_dim, c.rotary_dim);
      ops::rotary(x, Tensor::from_vector(pos), table);
      test::expect_close(to_doubles(x), want, 1e-6, 2.0 * test::dtype_eps(dt) + 1e-6,
                         "rotary " + x.str() + " rotary_dim " + std::to_string(c.rotary_dim));
    }
  }
}

TEST(Rotary, QueryHeadsOfAFusedQkvBuffer) {
  // [n_tokens, n_q + 2 * n_kv, head_dim] sliced to the query heads: token stride is not packed.
  for (DType dt : test::kFloatDTypes) {
    Tensor qkv = random_tensor({9, 8, 64}, dt, 77);
    Tensor before = qkv.clone();
    Tensor q = qkv.slice(1, 0, 4);
    Tensor table = ops::make_rope_table(config(RopeScaling::Type::kNone, 64), 64);
    std::vector<int32_t> pos = {0, 1, 2, 3, 4, 5, 6, 7, 63};
    std::vector<double> want = rotary_ref(to_doubles(q), pos, table.to_vector<float>(), 4, 64, 64);
    ops::rotary(q, Tensor::from_vector(pos), table);
    test::expect_close(to_doubles(q), want, 1e-6, 2.0 * test::dtype_eps(dt) + 1e-6, "rotary q");
    EXPECT_EQ(to_doubles(qkv.slice(1, 4, 8)), to_doubles(before.slice(1, 4, 8)))
        << "rotary touched the k / v heads";
  }
}

TEST(Rotary, InvalidArguments) {
  Tensor table = ops::make_rope_table(config(RopeScaling::Type::kNone, 16), 10);
  Tensor x = random_tensor({3, 2, 16}, DType::kF32, 1);
  EXPECT_THROW(ops::rotary(x, Tensor::from_vector(std::vector<int32_t>{0, 1, 10}), table),
               InvalidArgument);
  EXPECT_THROW(ops::rotary(x, Tensor::from_vector(std::vector<int32_t>{0, -1, 2}), table),
               InvalidArgument);
  EXPECT_THROW(ops::rotary(x, Tensor::from_vector(std::vector<int32_t>{0, 1}), table),
               InvalidArgument);
  EXPECT_THROW(ops::rotary(x, Tensor::from_vector(std::vector<int64_t>{0, 1, 2}), table),
               InvalidArgument);
  Tensor pos = Tensor::from_vector(std::vector<int32_t>{0, 1, 2});
  Tensor x8 = random_tensor({3, 2, 8}, DType::kF32, 2);
  EXPECT_THROW(ops::rotary(x8, pos, table), InvalidArgument);  // rotary_dim > head_dim
  Tensor x2 = random_tensor({3, 16}, DType::kF32, 3);
  EXPECT_THROW(ops::rotary(x2, pos, table), InvalidArgument);
  Tensor odd = Tensor::zeros({10, 15}, DType::kF32);
  EXPECT_THROW(ops::rotary(x, pos, odd), InvalidArgument);
  Tensor t16 = Tensor::zeros({10, 16}, DType::kBF16);
  EXPECT_THROW(ops::rotary(x, pos, t16), InvalidArgument);
}

}  // namespace
}  // namespace vela
