// RoPE: the host-side frequency math of Hugging Face transformers' ROPE_INIT_FUNCTIONS (default,
// linear, dynamic NTK, yarn, llama3) in double precision, the cos/sin table, and the validating
// dispatcher of rotary(). Yarn follows transformers 5: `factor` is used as configured.
#include "ops/rotary.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numbers>

#include "core/parallel.h"
#include "ops/checks.h"
#include "ops/dispatch.h"

namespace vela::ops {

namespace {

constexpr double kPi = std::numbers::pi;

// inv_freq_i = 1 / base^(2i / dim), i < dim / 2.
std::vector<double> default_inv_freq(double base, int64_t dim) {
  std::vector<double> inv(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i)
    inv[i] = 1.0 / std::pow(base, static_cast<double>(2 * i) / static_cast<double>(dim));
  return inv;
}

// yarn's attention temperature: 0.1 * mscale * ln(scale) + 1 (1 when scale <= 1).
double yarn_get_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// The (fractional) dimension index whose wavelength makes `n_rotations` turns over `max_pos`.
double yarn_correction_dim(double n_rotations, int64_t dim, double base, double max_pos) {
  return static_cast<double>(dim) * std::log(max_pos / (n_rotations * 2.0 * kPi)) /
         (2.0 * std::log(base));
}

RopeFrequencies yarn_frequencies(const RopeConfig& cfg, int64_t orig_max) {
  const RopeScaling& sc = cfg.scaling;
  const int64_t dim = cfg.rotary_dim;
  const double factor = sc.factor;
  VELA_CHECK(factor > 0.0, "rope: yarn factor ", factor, " must be > 0");
  RopeFrequencies out;
  if (sc.attention_factor > 0.0) {
    out.attention_scaling = sc.attention_factor;
  } else if (sc.mscale != 0.0 && sc.mscale_all_dim != 0.0) {
    out.attention_scaling =
        yarn_get_mscale(factor, sc.mscale) / yarn_get_mscale(factor, sc.mscale_all_dim);
  } else {
    out.attention_scaling = yarn_get_mscale(factor, 1.0);
  }
  double beta_fast = sc.beta_fast != 0.0 ? sc.beta_fast : 32.0;
  double beta_slow = sc.beta_slow != 0.0 ? sc.beta_slow : 1.0;
  double low = yarn_correction_dim(beta_fast, dim, cfg.theta, static_cast<double>(orig_max));
  double high = yarn_correction_dim(beta_slow, dim, cfg.theta, static_cast<double>(orig_max));
  if (sc.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // HF: prevent a singular ramp
  std::vector<double> extrapolation = default_inv_freq(cfg.theta, dim);
  out.inv_freq.resize(extrapolation.size());
  for (size_t i = 0; i < extrapolation.size(); ++i) {
    double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    double extrapolation_factor = 1.0 - ramp;
    double interpolation = extrapolation[i] / factor;
    out.inv_freq[i] =
        interpolation * (1.0 - extrapolation_factor) + extrapolation[i] * extrapolation_factor;
  }
  return out;
}

RopeFrequencies llama3_frequencies(const RopeConfig& cfg, int64_t orig_max) {
  const RopeScaling& sc = cfg.scaling;
  VELA_CHECK(sc.factor > 0.0, "rope: llama3 factor ", sc.factor, " must be > 0");
  VELA_CHECK(sc.high_freq_factor > sc.low_freq_factor && sc.low_freq_factor > 0.0,
             "rope: llama3 needs 0 < low_freq_factor < high_freq_factor, got ", sc.low_freq_factor,
             " and ", sc.high_freq_factor);
  RopeFrequencies out;
  out.inv_freq = default_inv_freq(cfg.theta, cfg.rotary_dim);
  const double old_context = static_cast<double>(orig_max);
  const double low_freq_wavelen = old_context / sc.low_freq_factor;
  const double high_freq_wavelen = old_context / sc.high_freq_factor;
  for (double& f : out.inv_freq) {
    double wavelen = 2.0 * kPi / f;
    if (wavelen > low_freq_wavelen) {
      f /= sc.factor;
    } else if (wavelen >= high_freq_wavelen) {  // medium band: smooth interpolation
      double smooth =
          (old_context / wavelen - sc.low_freq_factor) / (sc.high_freq_factor - sc.low_freq_factor);
      f = (1.0 - smooth) * f / sc.factor + smooth * f;
    }
  }
  return out;
}

}  // namespace

RopeScaling::Type RopeScaling::parse_type(const std::string& s) {
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
  if (l.empty() || l == "default" || l == "none") return Type::kNone;
  if (l == "linear") return Type::kLinear;
  if (l == "dynamic") return Type::kDynamic;
  if (l == "yarn") return Type::kYarn;
  if (l == "llama3") return Type::kLlama3;
  if (l == "longrope" || l == "su" || l == "mrope") {
    VELA_THROW(Unsupported, "rope scaling type '", s, "' is not supported");
  }
  VELA_THROW(InvalidArgument, "unknown rope scaling type '", s,
             "' (expected default, linear, dynamic, yarn or llama3)");
}

RopeFrequencies rope_frequencies(const RopeConfig& cfg, int64_t seq_len) {
  const int64_t dim = cfg.rotary_dim;
  VELA_CHECK(dim >= 2 && dim % 2 == 0, "rope: rotary_dim ", dim, " must be even and >= 2");
  VELA_CHECK(cfg.theta > 1.0, "rope: theta ", cfg.theta, " must be > 1");
  VELA_CHECK(cfg.max_positions > 0, "rope: max_positions ", cfg.max_positions, " must be > 0");
  const RopeScaling& sc = cfg.scaling;
  const int64_t orig_max =
      sc.original_max_positions > 0 ? sc.original_max_positions : cfg.max_positions;
  RopeFrequencies out;
  switch (sc.type) {
    case RopeScaling::Type::kNone:
      out.inv_freq = default_inv_freq(cfg.theta, dim);
      break;
    case RopeScaling::Type::kLinear:
      VELA_CHECK(sc.factor > 0.0, "rope: linear factor ", sc.factor, " must be > 0");
      out.inv_freq = default_inv_freq(cfg.theta, dim);
      for (double& f : out.inv_freq) f /= sc.factor;
      break;
    case RopeScaling::Type::kDynamic: {
      VELA_CHECK(sc.factor > 0.0, "rope: dynamic factor ", sc.factor, " must be > 0");
      double base = cfg.theta;
      if (seq_len > orig_max) {  // HF recomputes the base only beyond the original context
        VELA_CHECK(dim > 2, "rope: dynamic scaling needs rotary_dim > 2");
        double ratio = sc.factor * static_cast<double>(seq_len) / static_cast<double>(orig_max) -
                       (sc.factor - 1.0);
        base = cfg.theta * std::pow(ratio, static_cast<double>(dim) / static_cast<double>(dim - 2));
      }
      out.inv_freq = default_inv_freq(base, dim);
      break;
    }
    case RopeScaling::Type::kYarn:
      out = yarn_frequencies(cfg, orig_max);
      break;
    case RopeScaling::Type::kLlama3:
      out = llama3_frequencies(cfg, orig_max);
      break;
  }
  return out;
}

Tensor make_rope_table(const RopeConfig& cfg, int64_t n_positions, Device device, int64_t seq_len) {
  VELA_CHECK(n_positions >= 0, "make_rope_table: n_positions ", n_positions, " must be >= 0");
  RopeFrequencies freqs = rope_frequencies(cfg, seq_len);
  const int64_t half = cfg.rotary_dim / 2;
  const double s = freqs.attention_scaling;
  Tensor table = Tensor::empty({n_positions, cfg.rotary_dim}, DType::kF32);
  float* t = table.data<float>();
  parallel_for(n_positions, 64, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      float* row = t + p * cfg.rotary_dim;
      for (int64_t i = 0; i < half; ++i) {
        double angle = static_cast<double>(p) * freqs.inv_freq[i];
        row[i] = static_cast<float>(std::cos(angle) * s);
        row[half + i] = static_cast<float>(std::sin(angle) * s);
      }
    }
  });
  return device.is_cpu() ? table : table.to(device);
}

void rotary(Tensor& x, const Tensor& positions, const Tensor& table) {
  const char* op = "rotary";
  check_defined(op, "x", x);
  check_defined(op, "positions", positions);
  check_defined(op, "table", table);
  check_rank(op, "x", x, 3);
  check_floating(op, "x", x);
  check_rank(op, "positions", positions, 1);
  check_dtype(op, "positions", positions, DType::kI32);
  VELA_CHECK(positions.size(0) == x.size(0), "rotary: positions ", positions.str(),
             " must have one entry per token of x ", x.str());
  check_contiguous(op, "positions", positions);
  check_rank(op, "table", table, 2);
  check_dtype(op, "table", table, DType::kF32);
  check_contiguous(op, "table", table);
  const int64_t rotary_dim = table.size(1), head_dim = x.size(2);
  VELA_CHECK(rotary_dim >= 2 && rotary_dim % 2 == 0 && rotary_dim <= head_dim, "rotary: table ",
             table.str(), " must have an even rotary_dim in [2, head_dim] for x ", x.str());
  VELA_CHECK((head_dim <= 1 || x.stride(2) == 1) && (x.size(1) <= 1 || x.stride(1) == head_dim) &&
                 (x.size(0) <= 1 || x.stride(0) >= x.size(1) * head_dim),
             "rotary: x ", x.str(),
             " must have contiguous heads (strides [>= n_heads*head_dim, head_dim, 1])");
  check_same_device(op, "positions", positions, "x", x);
  check_same_device(op, "table", table, "x", x);
  check_positions_in_table(op, positions, table);
  VELA_DISPATCH(x.device(), rotary, x, positions, table);
}

}  // namespace vela::ops
