// CUDA optimizer ops against their CPU twins (ops/optim.h): adamw_update with f32 / bf16 / f16 /
// no compute weights over 3 steps, muon_momentum and decayed_step, the multi-tensor sum of squares
// (more tensors than one launch takes, empty and misaligned ones; deterministic across runs) and
// scale_by_norm. Sizes cover the vector and the scalar paths (odd lengths, views offset by one
// element). The same fp32 expressions may be contracted into different FMAs by nvcc and gcc, so
// state is compared to a few fp32 ulps and each line prints its max error and how many elements
// came out bit-identical; the rounded compute weights must equal ops::to_dtype of the GPU's own
// master exactly. A throughput line reports GB/s of the fused AdamW and of the clip pair.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/cuda/cuda_api.h"
#include "cuda/cuda_test_util.h"
#include "ops/cast.h"
#include "ops/optim.h"

namespace vela {
namespace {

using test::CudaTest;

class CudaOptimOpsTest : public CudaTest {};

// A contiguous device copy of `host` starting `offset` elements into a bigger buffer (offset 1:
// not 16-byte aligned, so the kernels take their scalar path).
Tensor on_gpu(const Tensor& host, int64_t offset) {
  if (offset == 0) return host.to(Device::cuda(0));
  Tensor big = Tensor::zeros({host.numel() + offset}, host.dtype(), Device::cuda(0));
  Tensor view = big.slice(0, offset, offset + host.numel()).view(host.shape());
  view.copy_(host);
  return view;
}

// max |got - want| over all elements (both any device), printed with the bit-identical count.
double compare(const Tensor& got, const Tensor& want, const std::string& what) {
  std::vector<double> g = test::to_doubles(got), w = test::to_doubles(want);
  EXPECT_EQ(g.size(), w.size()) << what;
  double max_err = 0, max_ref = 0;
  size_t identical = 0;
  for (size_t i = 0; i < g.size() && i < w.size(); ++i) {
    max_err = std::max(max_err, std::fabs(g[i] - w[i]));
    max_ref = std::max(max_ref, std::fabs(w[i]));
    identical += g[i] == w[i];
  }
  std::printf("[cuda optim] %-40s max|err| %.3e (max|ref| %.3g), bit-identical %zu / %zu\n",
              what.c_str(), max_err, max_ref, identical, g.size());
  return max_err;
}

using test::same_bits;

TEST_F(CudaOptimOpsTest, AdamWUpdateMatchesCpu) {
  // State values are O(1): 1e-6 is ~10 fp32 ulps after 3 steps of differently fused arithmetic.
  const double kTol = 1e-6;
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{4099}, int64_t{(1 << 20) + 3}}) {
    for (int64_t offset : {int64_t{0}, int64_t{1}}) {
      for (int variant = 0; variant < 4; ++variant) {  // f32, bf16, f16 weights; none
        const DType wdt = variant == 1 ? DType::kBF16 : variant == 2 ? DType::kF16 : DType::kF32;
        const std::string tag = "adamw n=" + std::to_string(n) + " off=" + std::to_string(offset) +
                                " " + (variant == 3 ? "no weight" : dtype_name(wdt));
        SCOPED_TRACE(tag);
        Tensor master = test::random_cpu({n}, DType::kF32, 1 + n);
        Tensor m = Tensor::zeros({n}, DType::kF32), v = Tensor::zeros({n}, DType::kF32);
        Tensor d_master = on_gpu(master, offset), d_m = on_gpu(m, offset), d_v = on_gpu(v, offset);
        Tensor weight = variant < 3 ? Tensor::empty({n}, wdt) : Tensor();
        Tensor d_weight = variant < 3 ? on_gpu(Tensor::zeros({n}, wdt), offset) : Tensor();
        for (int t = 1; t <= 3; ++t) {
          Tensor g = test::random_cpu({n}, DType::kF32, 100 * t + n, -2.0, 2.0);
          Tensor d_g = on_gpu(g, offset);
          const ops::AdamWHyper h = test::adamw_hyper(t, 1e-2 * t, t != 2);
          ops::adamw_update(master, g, m, v, weight, h);
          ops::adamw_update(d_master, d_g, d_m, d_v, d_weight, h);
        }
        EXPECT_LE(compare(d_master, master, tag + " master"), kTol);
        EXPECT_LE(compare(d_m, m, tag + " exp_avg"), kTol);
        EXPECT_LE(compare(d_v, v, tag + " exp_avg_sq"), kTol);
        if (variant < 3) {
          // The kernel's rounding is ops::to_dtype's (nearest even), bit for bit.
          EXPECT_TRUE(same_bits(d_weight, ops::to_dtype(d_master.to(Device::cpu()), wdt)))
              << tag << ": compute weights are not the GPU master rounded to nearest even";
          compare(d_weight, weight, tag + " weight vs cpu");
        }
      }
    }
  }
}

TEST_F(CudaOptimOpsTest, MuonMomentumAndDecayedStepMatchCpu) {
  const double kTol = 1e-6;
  for (int64_t n : {int64_t{5}, int64_t{(1 << 18) + 1}}) {
    for (int64_t offset : {int64_t{0}, int64_t{1}}) {
      for (bool nesterov : {true, false}) {
        const std::string tag = "muon n=" + std::to_string(n) + " off=" + std::to_string(offset) +
                                (nesterov ? " nesterov" : " plain");
        SCOPED_TRACE(tag);
        Tensor buf = Tensor::zeros({n}, DType::kF32), u = Tensor::empty({n}, DType::kF32);
        Tensor d_buf = on_gpu(buf, offset), d_u = on_gpu(u, offset);
        for (int t = 0; t < 3; ++t) {
          Tensor g = test::random_cpu({n}, DType::kF32, 7 + t);
          Tensor d_g = on_gpu(g, offset);
          ops::muon_momentum(buf, g, u, 0.95f, nesterov);
          ops::muon_momentum(d_buf, d_g, d_u, 0.95f, nesterov);
        }
        EXPECT_LE(compare(d_buf, buf, tag + " momentum"), kTol);
        EXPECT_LE(compare(d_u, u, tag + " u"), kTol);
        Tensor w = test::random_cpu({n}, DType::kF32, 9);
        Tensor d_w = on_gpu(w, offset);
        ops::decayed_step(w, u, 0.999f, 0.0123f);
        ops::decayed_step(d_w, d_u, 0.999f, 0.0123f);
        EXPECT_LE(compare(d_w, w, tag + " decayed_step"), kTol);
      }
    }
  }
}

TEST_F(CudaOptimOpsTest, SumSquaresAndScaleByNormMatchCpu) {
  // 60 tensors (two launches of at most 48), sizes around the 64Ki partition, an empty one, and
  // one that starts one float past a 16-byte boundary.
  std::vector<Tensor> host, dev;
  for (int i = 0; i < 60; ++i) {
    const int64_t sizes[] = {0, 1, 3, 1000, 65535, 65536, 65537, 300001};
    const int64_t n = sizes[i % 8] + (i / 8);
    host.push_back(test::random_cpu({n}, DType::kF32, 50 + i, -3.0, 3.0));
    dev.push_back(on_gpu(host.back(), i == 13 ? 1 : 0));
  }
  Tensor sq = ops::make_f64_scalar(Device::cpu());
  Tensor d_sq = ops::make_f64_scalar(gpu()), d_sq2 = ops::make_f64_scalar(gpu());
  ops::sum_squares(host, sq);
  ops::sum_squares(dev, d_sq);
  ops::sum_squares(dev, d_sq2);
  const double want = ops::read_f64_scalar(sq), got = ops::read_f64_scalar(d_sq);
  const double again = ops::read_f64_scalar(d_sq2);
  std::printf("[cuda optim] sum_squares of 60 tensors: cpu %.17g cuda %.17g rel err %.3e\n", want,
              got, std::fabs(got - want) / want);
  EXPECT_NEAR(got, want, 1e-12 * want);  // double partials: summation order only
  EXPECT_EQ(std::memcmp(&got, &again, sizeof got), 0) << "sum_squares is not deterministic";

  // Clip to half the norm on both sides. The scale is f32(numer / (norm + eps)) from each side's
  // own sum: equal bits unless the sums differ in the last double bits.
  const double max_norm = 0.5 * std::sqrt(want);
  ops::scale_by_norm(host, sq, max_norm, 1e-6, max_norm);
  ops::scale_by_norm(dev, d_sq, max_norm, 1e-6, max_norm);
  double worst = 0;
  for (size_t i = 0; i < host.size(); ++i)
    if (host[i].numel() > 0)
      worst = std::max(worst, compare(dev[i], host[i], "clip tensor " + std::to_string(i)));
  EXPECT_LE(worst, 3.0 * 1e-6);  // |x| <= 3 scaled by ~1/2: a one-ulp scale difference at most
  Tensor d_after = ops::make_f64_scalar(gpu());
  ops::sum_squares(dev, d_after);
  EXPECT_NEAR(std::sqrt(ops::read_f64_scalar(d_after)), max_norm, 1e-5 * max_norm);

  // Below the threshold or non-finite: nothing changes.
  Tensor before = dev[7].to(Device::cpu());
  ops::scale_by_norm(dev, d_after, 1.0, 1e-6, 1e30);
  EXPECT_TRUE(same_bits(dev[7], before));
  const double nan = std::nan("");
  Tensor nan_host = ops::make_f64_scalar(Device::cpu());
  std::memcpy(nan_host.data_ptr(), &nan, sizeof nan);
  ops::scale_by_norm(dev, nan_host.to(gpu()), 1.0, 1e-7, -1.0);
  EXPECT_TRUE(same_bits(dev[7], before));
}

// Not a correctness check: how close the fused update and the clip pair come to HBM bandwidth.
TEST_F(CudaOptimOpsTest, Throughput) {
  const int64_t n_params = 200, per = (1 << 20) + 4096;  // ~210M elements in 200 tensors
  std::vector<Tensor> master, grad, m, v, weight;
  for (int64_t i = 0; i < n_params; ++i) {
    master.push_back(Tensor::zeros({per}, DType::kF32, gpu()));
    grad.push_back(Tensor::zeros({per}, DType::kF32, gpu()));
    m.push_back(Tensor::zeros({per}, DType::kF32, gpu()));
    v.push_back(Tensor::zeros({per}, DType::kF32, gpu()));
    weight.push_back(Tensor::zeros({per}, DType::kBF16, gpu()));
  }
  auto time_it = [&](auto&& fn) {
    fn();  // warm-up
    cuda::synchronize(0);
    const auto t0 = std::chrono::steady_clock::now();
    const int reps = 5;
    for (int r = 0; r < reps; ++r) fn();
    cuda::synchronize(0);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
  };
  const ops::AdamWHyper h = test::adamw_hyper(1, 1e-3, true);
  const double t_adamw = time_it([&] {
    for (int64_t i = 0; i < n_params; ++i)
      ops::adamw_update(master[i], grad[i], m[i], v[i], weight[i], h);
  });
  Tensor sq = ops::make_f64_scalar(gpu());
  const double t_clip = time_it([&] {
    ops::sum_squares(grad, sq);
    ops::scale_by_norm(grad, sq, 1.0, 1e-6, -1.0);  // always scales: the worst case
    (void)ops::read_f64_scalar(sq);
  });
  const double n = static_cast<double>(n_params * per);
  const double adamw_bytes = n * (4 * 4 + 3 * 4 + 2), clip_bytes = n * (4 + 8);
  std::printf("[cuda optim] adamw_update bf16, %.0fM params in %lld tensors: %.2f ms, %.0f GB/s\n",
              n / 1e6, static_cast<long long>(n_params), t_adamw * 1e3,
              adamw_bytes / t_adamw / 1e9);
  std::printf("[cuda optim] sum_squares + scale_by_norm + read-back: %.2f ms, %.0f GB/s\n",
              t_clip * 1e3, clip_bytes / t_clip / 1e9);
}

}  // namespace
}  // namespace vela
