// Optimizer ops on the CPU against the loops train/optim ran before the ops existed (copied here
// verbatim as the reference): adamw_update with f32 / bf16 / f16 / aliased / no compute weights,
// muon_momentum (nesterov on and off), decayed_step, the block-partitioned sum of squares (also
// independent of the thread count) and scale_by_norm's thresholds. Every comparison is bit for bit:
// CPU training must not move when the optimizer moves onto these ops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "op_test_util.h"
#include "ops/cast.h"
#include "ops/optim.h"

namespace vela {
namespace {

using test::random_tensor;

using test::same_bits;

// The former AdamW::step_with_count inner loop, serial.
void former_adamw(float* w, const float* g, float* m, float* v, int64_t n,
                  const ops::AdamWHyper& h) {
  const float b1 = h.b1, b2 = h.b2, step_size = h.step_size, inv_sqrt_bc2 = h.inv_sqrt_bc2;
  const float eps = h.eps, decay = h.decay;
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    m[i] = b1 * m[i] + (1.0f - b1) * gi;
    v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
    const float denom = std::sqrt(v[i]) * inv_sqrt_bc2 + eps;
    w[i] = w[i] * decay - step_size * (m[i] / denom);
  }
}

TEST(OptimOps, AdamWUpdateReproducesFormerLoop) {
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{4099}, int64_t{(1 << 16) + 5}}) {
    for (int variant = 0; variant < 5; ++variant) {  // f32, bf16, f16 weights; aliased; none
      Tensor master = random_tensor({n}, DType::kF32, 1 + n);
      Tensor m = Tensor::zeros({n}, DType::kF32), v = Tensor::zeros({n}, DType::kF32);
      Tensor rm = master.clone(), rmm = m.clone(), rv = v.clone();
      const DType wdt = variant == 1 ? DType::kBF16 : variant == 2 ? DType::kF16 : DType::kF32;
      Tensor weight = variant <= 2 ? Tensor::empty({n}, wdt) : Tensor();
      if (variant == 3) weight = master;
      for (int t = 1; t <= 3; ++t) {
        Tensor g = random_tensor({n}, DType::kF32, 100 * t + n, -2.0f, 2.0f);
        const ops::AdamWHyper h = test::adamw_hyper(t, 1e-2 * t, t != 2);
        ops::adamw_update(master, g, m, v, weight, h);
        former_adamw(rm.data<float>(), g.data<float>(), rmm.data<float>(), rv.data<float>(), n, h);
      }
      EXPECT_TRUE(same_bits(master, rm)) << "master n=" << n << " variant " << variant;
      EXPECT_TRUE(same_bits(m, rmm)) << "exp_avg n=" << n << " variant " << variant;
      EXPECT_TRUE(same_bits(v, rv)) << "exp_avg_sq n=" << n << " variant " << variant;
      if (variant <= 2) {  // the former write_back: ops::to_dtype of the master
        EXPECT_TRUE(same_bits(weight, ops::to_dtype(rm, wdt)))
            << "weight n=" << n << " " << variant;
      }
    }
  }
}

TEST(OptimOps, MuonMomentumAndDecayedStepReproduceFormerLoops) {
  for (bool nesterov : {true, false}) {
    const int64_t n = (1 << 15) + 3;
    Tensor buf = Tensor::zeros({n}, DType::kF32), u = Tensor::empty({n}, DType::kF32);
    std::vector<float> rbuf(n, 0.0f), ru(n);
    const float mu = 0.95f;
    for (int t = 0; t < 3; ++t) {
      Tensor g = random_tensor({n}, DType::kF32, 7 + t);
      ops::muon_momentum(buf, g, u, mu, nesterov);
      const float* gp = g.data<float>();
      for (int64_t i = 0; i < n; ++i) {
        rbuf[i] = mu * rbuf[i] + (1.0f - mu) * gp[i];
        ru[i] = nesterov ? (1.0f - mu) * gp[i] + mu * rbuf[i] : rbuf[i];
      }
    }
    EXPECT_TRUE(same_bits(buf, Tensor::from_vector(rbuf))) << "nesterov " << nesterov;
    EXPECT_TRUE(same_bits(u, Tensor::from_vector(ru))) << "nesterov " << nesterov;
  }
  Tensor w = random_tensor({5, 1001}, DType::kF32, 3), o = random_tensor({5, 1001}, DType::kF32, 4);
  std::vector<float> ref = w.to_vector<float>();
  const float decay = 0.999f, step = 0.0123f;
  const float* op = o.data<float>();
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = ref[i] * decay - step * op[i];
  ops::decayed_step(w, o, decay, step);
  EXPECT_TRUE(same_bits(w, Tensor::from_vector(ref, {5, 1001})));
}

// The former grad_global_norm: per tensor, 64Ki-element blocks in double added in order.
double former_sum_squares(const std::vector<Tensor>& xs) {
  double total = 0;
  for (const Tensor& x : xs) {
    const float* g = x.data<float>();
    const int64_t n = x.numel();
    std::vector<double> partial;
    for (int64_t b = 0; b * 65536 < n; ++b) {
      double s = 0;
      for (int64_t i = b * 65536; i < std::min(n, (b + 1) * 65536); ++i)
        s += static_cast<double>(g[i]) * g[i];
      partial.push_back(s);
    }
    double t = 0;
    for (double s : partial) t += s;
    total += t;
  }
  return total;
}

TEST(OptimOps, SumSquaresIsTheFormerBlockSumForAnyThreadCount) {
  std::vector<Tensor> xs;
  for (int64_t n : {int64_t{3}, int64_t{0}, int64_t{65536}, int64_t{200000}, int64_t{1000}})
    xs.push_back(random_tensor({n}, DType::kF32, 10 + n, -3.0f, 3.0f));
  const double want = former_sum_squares(xs);
  const int threads = num_threads();
  for (int nt : {1, 2, 3, threads}) {
    set_num_threads(nt);
    Tensor out = ops::make_f64_scalar(Device::cpu());
    ops::sum_squares(xs, out);
    const double got = ops::read_f64_scalar(out);
    EXPECT_EQ(std::memcmp(&got, &want, sizeof got), 0)
        << nt << " threads: " << got << " vs " << want;
  }
  set_num_threads(threads);
  Tensor out = ops::make_f64_scalar(Device::cpu());
  ops::sum_squares({}, out);
  EXPECT_EQ(ops::read_f64_scalar(out), 0.0);
}

TEST(OptimOps, ScaleByNormThresholdsAndScale) {
  std::vector<Tensor> xs = {random_tensor({100}, DType::kF32, 1),
                            random_tensor({70000}, DType::kF32, 2)};
  std::vector<Tensor> before = {xs[0].clone(), xs[1].clone()};
  Tensor sq = ops::make_f64_scalar(Device::cpu());
  ops::sum_squares(xs, sq);
  const double norm = std::sqrt(ops::read_f64_scalar(sq));
  ops::scale_by_norm(xs, sq, norm, 1e-6, norm);  // not above the threshold: untouched
  EXPECT_TRUE(same_bits(xs[0], before[0]) && same_bits(xs[1], before[1]));
  ops::scale_by_norm(xs, sq, 1.0, 1e-6, 1.0);  // the former clip to max_norm 1
  const float scale = static_cast<float>(1.0 / (norm + 1e-6));
  for (size_t k = 0; k < xs.size(); ++k) {
    std::vector<float> ref = before[k].to_vector<float>();
    for (float& x : ref) x *= scale;
    EXPECT_TRUE(same_bits(xs[k], Tensor::from_vector(ref))) << k;
  }
  const double nan = std::nan("");
  std::memcpy(sq.data_ptr(), &nan, sizeof nan);
  Tensor keep = xs[0].clone();
  ops::scale_by_norm(xs, sq, 1.0, 1e-7, -1.0);  // a non-finite norm scales nothing
  EXPECT_TRUE(same_bits(xs[0], keep));
}

TEST(OptimOps, InvalidArguments) {
  Tensor a = Tensor::zeros({4}, DType::kF32), b = Tensor::zeros({5}, DType::kF32);
  Tensor h16 = Tensor::zeros({4}, DType::kBF16), none;
  ops::AdamWHyper h;
  EXPECT_THROW(ops::adamw_update(a, b, a, a, none, h), InvalidArgument);    // shape
  EXPECT_THROW(ops::adamw_update(a, h16, a, a, none, h), InvalidArgument);  // grad dtype
  Tensor w5 = Tensor::zeros({5}, DType::kBF16);
  EXPECT_THROW(ops::adamw_update(a, a, a, a, w5, h), InvalidArgument);  // weight shape
  EXPECT_THROW(ops::muon_momentum(a, b, a, 0.9f, true), InvalidArgument);
  EXPECT_THROW(ops::decayed_step(a, h16, 1.0f, 1.0f), InvalidArgument);
  Tensor f32_scalar = Tensor::zeros({1}, DType::kF32);
  EXPECT_THROW(ops::sum_squares({a}, f32_scalar), InvalidArgument);
  Tensor sq = ops::make_f64_scalar(Device::cpu());
  EXPECT_THROW(ops::sum_squares({h16}, sq), InvalidArgument);
  Tensor strided = Tensor::zeros({4, 4}, DType::kF32).transpose(0, 1);
  std::vector<Tensor> xs = {strided};
  EXPECT_THROW(ops::scale_by_norm(xs, sq, 1.0, 1e-6, 1.0), InvalidArgument);
}

}  // namespace
}  // namespace vela
