// Optimizers against double-precision references: AdamW over several steps with decay groups and
// bias correction (f32 and bf16 compute weights), Newton-Schulz orthogonality (singular values
// near 1), a Muon step (with fused row blocks), gradient clipping, and bit-exact state round trips.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "ops/cast.h"
#include "train/optim/adamw.h"
#include "train/optim/grad_clip.h"
#include "train/optim/muon.h"

namespace vela {
namespace {

std::vector<float> randn(Rng& rng, int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = scale * rng.normal();
  return v;
}

Parameter make_param(const std::string& name, Shape shape, ParamKind kind, Rng& rng,
                     DType dtype = DType::kF32) {
  Parameter p;
  p.name = name;
  p.kind = kind;
  Tensor v = Tensor::from_vector(randn(rng, shape.numel(), 0.5f), shape);
  p.value = dtype == DType::kF32 ? v : ops::to_dtype(v, dtype);
  p.grad = Tensor::zeros(shape, DType::kF32);
  return p;
}

ParameterList make_params(uint64_t seed, DType dtype = DType::kF32) {
  Rng rng(seed);
  ParameterList ps;
  ps.push_back(make_param("embed", {7, 6}, ParamKind::kEmbedding, rng, dtype));
  ps.push_back(make_param("qkv", {10, 6}, ParamKind::kMatrix, rng, dtype));
  ps.push_back(make_param("down", {6, 9}, ParamKind::kMatrix, rng, dtype));
  ps.push_back(make_param("norm", {6}, ParamKind::kNorm, rng, dtype));
  ps.push_back(make_param("bias", {10}, ParamKind::kBias, rng, dtype));
  return ps;
}

void set_grads(ParameterList& ps, uint64_t seed) {
  Rng rng(seed);
  for (Parameter& p : ps) {
    std::vector<float> g = randn(rng, p.grad.numel(), 1.0f);
    std::copy(g.begin(), g.end(), p.grad.data<float>());
  }
}

std::vector<double> to_double(const Tensor& t) {
  Tensor f = t.dtype() == DType::kF32 ? t : ops::to_dtype(t, DType::kF32);
  std::vector<float> v = f.to_vector<float>();
  return {v.begin(), v.end()};
}

// torch.optim.AdamW in double.
struct RefAdamW {
  double b1, b2, eps, wd;
  std::vector<std::vector<double>> w, m, v;
  void step(const ParameterList& ps, const std::vector<bool>& decays, double lr, int t) {
    for (size_t k = 0; k < ps.size(); ++k) {
      std::vector<double> g = to_double(ps[k].grad);
      for (size_t i = 0; i < g.size(); ++i) {
        if (decays[k]) w[k][i] *= 1 - lr * wd;
        m[k][i] = b1 * m[k][i] + (1 - b1) * g[i];
        v[k][i] = b2 * v[k][i] + (1 - b2) * g[i] * g[i];
        double mhat = m[k][i] / (1 - std::pow(b1, t)), vhat = v[k][i] / (1 - std::pow(b2, t));
        w[k][i] -= lr * mhat / (std::sqrt(vhat) + eps);
      }
    }
  }
};

void run_adamw_vs_reference(DType dtype, bool decay_embeddings) {
  ParameterList ps = make_params(1, dtype);
  OptimizerConfig cfg;
  cfg.beta1 = 0.9;
  cfg.beta2 = 0.99;
  cfg.eps = 1e-8;
  cfg.weight_decay = 0.1;
  cfg.decay_embeddings = decay_embeddings;
  AdamW opt(cfg, ps);
  RefAdamW ref{0.9, 0.99, 1e-8, 0.1, {}, {}, {}};
  std::vector<bool> decays;
  for (const Parameter& p : ps) {
    ref.w.push_back(to_double(p.value));
    ref.m.emplace_back(p.value.numel(), 0.0);
    ref.v.emplace_back(p.value.numel(), 0.0);
    decays.push_back(param_decays(p, cfg));
  }
  EXPECT_EQ(decays, (std::vector<bool>{decay_embeddings, true, true, false, false}));
  const double lrs[] = {1e-2, 3e-2, 2e-2, 5e-3, 1e-2, 1e-2};
  for (int t = 1; t <= 6; ++t) {
    set_grads(ps, 100 + t);
    opt.step(lrs[t - 1]);
    ref.step(ps, decays, lrs[t - 1], t);
  }
  EXPECT_EQ(opt.step_count(), 6);
  double max_err = 0;
  for (size_t k = 0; k < ps.size(); ++k) {
    std::vector<double> got = to_double(ps[k].value);
    for (size_t i = 0; i < got.size(); ++i) {
      // bf16 compute weights are the f32 master rounded once: within half a bf16 ulp (2^-9 rel).
      double tol = dtype == DType::kF32 ? 2e-6 : std::abs(ref.w[k][i]) * 4e-3 + 1e-6;
      ASSERT_NEAR(got[i], ref.w[k][i], tol) << ps[k].name << "[" << i << "]";
      max_err = std::max(max_err, std::abs(got[i] - ref.w[k][i]));
    }
  }
  std::printf("AdamW (%s) vs double reference after 6 steps: max abs err %.3g\n", dtype_name(dtype),
              max_err);
}

TEST(AdamW, MatchesDoubleReferenceWithDecayGroups) {
  run_adamw_vs_reference(DType::kF32, false);
  run_adamw_vs_reference(DType::kF32, true);
}

TEST(AdamW, Bf16ComputeWeightsFollowF32Master) {
  run_adamw_vs_reference(DType::kBF16, false);
  // The master copy keeps small updates that bf16 weights alone would round away.
  Rng rng(5);
  ParameterList ps;
  ps.push_back(make_param("w", {64}, ParamKind::kNorm, rng, DType::kBF16));
  std::vector<float> before = ops::to_dtype(ps[0].value, DType::kF32).to_vector<float>();
  OptimizerConfig cfg;
  AdamW opt(cfg, ps);
  for (int t = 0; t < 200; ++t) {
    std::fill_n(ps[0].grad.data<float>(), 64, 1.0f);
    opt.step(1e-5);  // each step moves by ~1e-5, far below a bf16 ulp of ~0.5
  }
  std::vector<float> after = ops::to_dtype(ps[0].value, DType::kF32).to_vector<float>();
  int moved = 0;
  for (size_t i = 0; i < after.size(); ++i) moved += after[i] != before[i];
  EXPECT_GT(moved, 0) << "200 steps of 1e-5 should have moved some bf16 weights via the master";
}

// Symmetric eigenvalues by cyclic Jacobi rotations (double), for singular values of X: sqrt(eig(X
// X^T)).
std::vector<double> singular_values(const Tensor& x) {
  const int64_t r = std::min(x.size(0), x.size(1));
  const bool tall = x.size(0) > x.size(1);
  std::vector<float> v = x.to_vector<float>();
  const int64_t cols = x.size(1);
  std::vector<double> a(static_cast<size_t>(r * r), 0.0);
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < r; ++j) {
      double s = 0;
      int64_t other = tall ? x.size(0) : cols;
      for (int64_t k = 0; k < other; ++k)
        s += tall ? double(v[k * cols + i]) * v[k * cols + j]
                  : double(v[i * cols + k]) * v[j * cols + k];
      a[i * r + j] = s;
    }
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0;
    for (int64_t p = 0; p < r; ++p)
      for (int64_t q = p + 1; q < r; ++q) off += a[p * r + q] * a[p * r + q];
    if (off < 1e-24) break;
    for (int64_t p = 0; p < r; ++p)
      for (int64_t q = p + 1; q < r; ++q) {
        if (std::abs(a[p * r + q]) < 1e-300) continue;
        double theta = (a[q * r + q] - a[p * r + p]) / (2 * a[p * r + q]);
        double t = (theta >= 0 ? 1 : -1) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (int64_t k = 0; k < r; ++k) {
          double akp = a[k * r + p], akq = a[k * r + q];
          a[k * r + p] = c * akp - s * akq;
          a[k * r + q] = s * akp + c * akq;
        }
        for (int64_t k = 0; k < r; ++k) {
          double apk = a[p * r + k], aqk = a[q * r + k];
          a[p * r + k] = c * apk - s * aqk;
          a[q * r + k] = s * apk + c * aqk;
        }
      }
  }
  std::vector<double> sv;
  for (int64_t i = 0; i < r; ++i) sv.push_back(std::sqrt(std::max(0.0, a[i * r + i])));
  return sv;
}

TEST(Muon, NewtonSchulzSingularValuesNearOne) {
  Rng rng(3);
  for (Shape shape : {Shape{16, 40}, Shape{40, 16}, Shape{32, 96}}) {
    // An ill-conditioned input (rows scaled over two orders of magnitude). NS5 is not exact: a
    // singular value below ~1e-3 of the Frobenius norm stays small after 5 steps, by design.
    std::vector<float> g = randn(rng, shape.numel(), 1.0f);
    for (int64_t i = 0; i < shape[0]; ++i)
      for (int64_t j = 0; j < shape[1]; ++j)
        g[i * shape[1] + j] *= std::pow(10.0f, -2.0f * i / shape[0]);
    std::vector<double> before = singular_values(Tensor::from_vector(g, shape));
    Tensor o = newton_schulz5(Tensor::from_vector(g, shape));
    ASSERT_EQ(o.shape(), shape);
    std::vector<double> sv = singular_values(o);
    double lo = *std::min_element(sv.begin(), sv.end()),
           hi = *std::max_element(sv.begin(), sv.end());
    double blo = *std::min_element(before.begin(), before.end());
    double bhi = *std::max_element(before.begin(), before.end());
    std::printf("NS5 %s: singular values [%.3g, %.3g] -> [%.3f, %.3f]\n", shape.str().c_str(), blo,
                bhi, lo, hi);
    EXPECT_GT(lo, 0.55);  // Jordan's coefficients land in ~[0.7, 1.2] after 5 steps
    EXPECT_LT(hi, 1.25);
  }
}

// Muon in double: momentum, NS5 in double, scale, decoupled decay.
std::vector<double> ref_ns5(std::vector<double> x, int64_t rows, int64_t cols) {
  const bool tall = rows > cols;
  if (tall) {
    std::vector<double> t(x.size());
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = x[i * cols + j];
    x = t;
    std::swap(rows, cols);
  }
  double n = 0;
  for (double e : x) n += e * e;
  n = std::sqrt(n) + 1e-7;
  for (double& e : x) e /= n;
  const double a = 3.4445, b = -4.7750, c = 2.0315;
  for (int s = 0; s < 5; ++s) {
    std::vector<double> A(rows * rows, 0), B(rows * rows, 0), X2(x.size(), 0);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < rows; ++j)
        for (int64_t k = 0; k < cols; ++k) A[i * rows + j] += x[i * cols + k] * x[j * cols + k];
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < rows; ++j) {
        double aa = 0;
        for (int64_t k = 0; k < rows; ++k) aa += A[i * rows + k] * A[k * rows + j];
        B[i * rows + j] = b * A[i * rows + j] + c * aa;
      }
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        double bx = 0;
        for (int64_t k = 0; k < rows; ++k) bx += B[i * rows + k] * x[k * cols + j];
        X2[i * cols + j] = a * x[i * cols + j] + bx;
      }
    x = X2;
  }
  if (tall) {
    std::vector<double> t(x.size());
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = x[i * cols + j];
    x = t;
  }
  return x;
}

TEST(Muon, StepMatchesDoubleReference) {
  ParameterList ps = make_params(7);
  OptimizerConfig cfg;
  cfg.kind = "muon";
  cfg.weight_decay = 0.1;
  cfg.muon_momentum = 0.9;
  Muon opt(cfg, ps);
  EXPECT_EQ(opt.n_muon_params(), 2u);
  opt.set_row_blocks("qkv", {6, 2, 2});
  EXPECT_THROW(opt.set_row_blocks("qkv", {6, 2}), InvalidArgument);
  EXPECT_THROW(opt.set_row_blocks("norm", {6}), InvalidArgument);

  std::vector<std::vector<double>> w = {to_double(ps[1].value), to_double(ps[2].value)};
  std::vector<std::vector<double>> buf = {std::vector<double>(60, 0), std::vector<double>(54, 0)};
  std::vector<double> embed0 = to_double(ps[0].value);
  const double lr = 0.02, mu = 0.9;
  for (int t = 1; t <= 3; ++t) {
    set_grads(ps, 50 + t);
    for (int k = 0; k < 2; ++k) {
      const Parameter& p = ps[1 + k];
      const int64_t rows = p.value.size(0), cols = p.value.size(1);
      std::vector<double> g = to_double(p.grad), u(g.size());
      for (size_t i = 0; i < g.size(); ++i) {
        buf[k][i] = mu * buf[k][i] + (1 - mu) * g[i];
        u[i] = (1 - mu) * g[i] + mu * buf[k][i];
      }
      std::vector<int64_t> blocks =
          k == 0 ? std::vector<int64_t>{6, 2, 2} : std::vector<int64_t>{rows};
      int64_t r0 = 0;
      for (int64_t br : blocks) {
        std::vector<double> ub(u.begin() + r0 * cols, u.begin() + (r0 + br) * cols);
        std::vector<double> o = ref_ns5(ub, br, cols);
        double scale = 0.2 * std::sqrt(double(std::max(br, cols)));
        for (int64_t i = 0; i < br * cols; ++i)
          w[k][r0 * cols + i] = w[k][r0 * cols + i] * (1 - lr * 0.1) - lr * scale * o[i];
        r0 += br;
      }
    }
    opt.step(lr);
  }
  double max_err = 0;
  for (int k = 0; k < 2; ++k) {
    std::vector<double> got = to_double(ps[1 + k].value);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], w[k][i], 2e-5) << ps[1 + k].name << "[" << i << "]";
      max_err = std::max(max_err, std::abs(got[i] - w[k][i]));
    }
  }
  std::printf("Muon vs double reference after 3 steps: max abs err %.3g\n", max_err);
  // The embedding went through AdamW: it moved, by at most ~lr per step.
  std::vector<double> embed = to_double(ps[0].value);
  double moved = 0;
  for (size_t i = 0; i < embed.size(); ++i) moved = std::max(moved, std::abs(embed[i] - embed0[i]));
  EXPECT_GT(moved, 0.01);
  EXPECT_LT(moved, 3 * lr * 1.01);
}

TEST(GradClip, GlobalNormAndScaling) {
  ParameterList ps = make_params(9);
  set_grads(ps, 10);
  double want = 0;
  for (const Parameter& p : ps)
    for (double g : to_double(p.grad)) want += g * g;
  want = std::sqrt(want);
  EXPECT_NEAR(grad_global_norm(ps), want, 1e-9 * want);
  EXPECT_NEAR(clip_grad_norm(ps, 1e9), want, 1e-9 * want);  // no clipping
  EXPECT_NEAR(grad_global_norm(ps), want, 1e-9 * want);
  EXPECT_NEAR(clip_grad_norm(ps, 0), want, 1e-9 * want);    // off
  EXPECT_NEAR(clip_grad_norm(ps, 1.0), want, 1e-9 * want);  // returns the pre-clip norm
  EXPECT_NEAR(grad_global_norm(ps), 1.0, 1e-5);
  ps[2].grad.data<float>()[3] = std::nanf("");
  EXPECT_TRUE(std::isnan(clip_grad_norm(ps, 1.0)));
  EXPECT_EQ(ps[0].grad.data<float>()[0], ps[0].grad.data<float>()[0]);  // untouched, finite
}

void expect_bits_equal(const ParameterList& a, const ParameterList& b) {
  for (size_t k = 0; k < a.size(); ++k) {
    ASSERT_EQ(a[k].value.nbytes(), b[k].value.nbytes());
    EXPECT_EQ(std::memcmp(a[k].value.data_ptr(), b[k].value.data_ptr(), a[k].value.nbytes()), 0)
        << a[k].name;
  }
}

void check_round_trip(const std::string& kind, DType dtype) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("vela_optim_state_" + std::to_string(getpid()) + ".safetensors"))
                               .string();
  OptimizerConfig cfg;
  cfg.kind = kind;
  ParameterList a = make_params(11, dtype);
  auto opt_a = make_optimizer(cfg, a);
  for (int t = 0; t < 3; ++t) {
    set_grads(a, 200 + t);
    opt_a->step(0.01);
  }
  opt_a->save_state(path);
  // A fresh run: the same model weights (what a model checkpoint restores), then the state.
  ParameterList b = make_params(99, dtype);
  for (size_t k = 0; k < a.size(); ++k) b[k].value.copy_(a[k].value);
  auto opt_b = make_optimizer(cfg, b);
  opt_b->load_state(path);
  EXPECT_EQ(opt_b->step_count(), 3);
  for (int t = 3; t < 6; ++t) {
    set_grads(a, 200 + t);
    set_grads(b, 200 + t);
    opt_a->step(0.01);
    opt_b->step(0.01);
  }
  expect_bits_equal(a, b);
  OptimizerConfig other = cfg;
  other.kind = kind == "adamw" ? "muon" : "adamw";
  auto wrong = make_optimizer(other, b);
  EXPECT_THROW(wrong->load_state(path), InvalidArgument);
  std::filesystem::remove(path);
}

TEST(OptimizerState, RoundTripIsBitExact) {
  check_round_trip("adamw", DType::kF32);
  check_round_trip("adamw", DType::kBF16);
  check_round_trip("muon", DType::kF32);
  check_round_trip("muon", DType::kBF16);
}

TEST(OptimizerConfig, ParseAndValidate) {
  OptimizerConfig c = OptimizerConfig::from_json(json{{"kind", "muon"}, {"beta2", 0.98}});
  EXPECT_EQ(c.kind, "muon");
  EXPECT_EQ(c.beta2, 0.98);
  EXPECT_THROW(OptimizerConfig::from_json(json{{"betas", 1}}), InvalidArgument);
  c.kind = "sgd";
  ParameterList ps;
  EXPECT_THROW(make_optimizer(c, ps), InvalidArgument);
}

}  // namespace
}  // namespace vela
