// Optimizers with their state on a CUDA device against the same optimizers on the CPU (the
// reference), on identical random params and grads: AdamW and Muon (fused row blocks), f32 and
// bf16 compute weights, 5 steps each preceded by clip_grad_norm (clipping engaged on some steps).
// Checks: the GPU global norm equals the CPU one to 1e-12 relative; f32 weights agree to a few
// fp32 ulps (AdamW; ops differ only in FMA contraction) or to f32 GEMM summation-order error
// (Muon's Newton-Schulz: cuBLASLt vs OpenBLAS); bf16 weights are the f32 master rounded, so they
// may differ from the CPU by one bf16 ulp where the masters straddle a rounding boundary, and
// only there. State files move between devices: save on GPU -> load on CPU (and back) continues
// like the uninterrupted run; save -> load on the GPU continues bit-identically; both devices
// write the same tensor names. Each comparison prints its max error. Skipped without a GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/cuda/cuda_api.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "ops/cast.h"
#include "train/optim/grad_clip.h"
#include "train/optim/muon.h"

namespace vela {
namespace {

Device gpu() { return Device::cuda(0); }

// The same named params as test_optim.cpp's, a little larger (Newton-Schulz sees real GEMMs).
ParameterList make_params(uint64_t seed, DType dtype, Device device) {
  Rng rng(seed);
  struct Spec {
    const char* name;
    Shape shape;
    ParamKind kind;
  };
  const Spec specs[] = {{"embed", {50, 24}, ParamKind::kEmbedding},
                        {"qkv", {40, 24}, ParamKind::kMatrix},  // row blocks {24, 8, 8}
                        {"down", {24, 70}, ParamKind::kMatrix},
                        {"up", {130, 24}, ParamKind::kMatrix},
                        {"norm", {24}, ParamKind::kNorm},
                        {"bias", {40}, ParamKind::kBias}};
  ParameterList ps;
  for (const Spec& s : specs) {
    std::vector<float> v(static_cast<size_t>(s.shape.numel()));
    for (float& x : v) x = 0.5f * rng.normal();
    Tensor value = Tensor::from_vector(v, s.shape);
    if (dtype != DType::kF32) value = ops::to_dtype(value, dtype);
    Parameter p;
    p.name = s.name;
    p.kind = s.kind;
    p.value = value.to(device);
    p.grad = Tensor::zeros(s.shape, DType::kF32, device);
    ps.push_back(std::move(p));
  }
  return ps;
}

// The same grads into every list (generated on the host, copied to each list's device).
void set_grads(std::vector<ParameterList*> lists, uint64_t seed, float scale) {
  Rng rng(seed);
  for (size_t k = 0; k < lists[0]->size(); ++k) {
    std::vector<float> g(static_cast<size_t>((*lists[0])[k].grad.numel()));
    for (float& x : g) x = scale * rng.normal();
    Tensor host = Tensor::from_vector(g, (*lists[0])[k].grad.shape());
    for (ParameterList* l : lists) (*l)[k].grad.copy_(host);
  }
}

std::vector<double> doubles(const Tensor& t) {
  Tensor h = t.to(Device::cpu());
  if (h.dtype() != DType::kF32) h = ops::to_dtype(h, DType::kF32);
  std::vector<float> v = h.to_vector<float>();
  return {v.begin(), v.end()};
}

// Compares every param's value; returns the worst max|err| over params. For 16-bit weights an
// element may differ by one ulp of its dtype (masters on either side of a rounding boundary):
// `ulp_rel` is that ulp relative to |value|; anything else must be within `tol`.
double compare_values(const ParameterList& got, const ParameterList& want, double tol,
                      const std::string& what) {
  double worst = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    std::vector<double> g = doubles(got[k].value), w = doubles(want[k].value);
    const double ulp_rel = want[k].value.dtype() == DType::kBF16 ? 1.0 / 128 : 0.0;
    double max_err = 0;
    size_t n_ulp = 0, n_bad = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      const double err = std::fabs(g[i] - w[i]);
      max_err = std::max(max_err, err);
      if (err <= tol) continue;
      if (err <= ulp_rel * std::fabs(w[i]) + 1e-30) {
        ++n_ulp;
      } else {
        ++n_bad;
      }
    }
    EXPECT_EQ(n_bad, 0u) << what << " " << want[k].name << ": max|err| " << max_err << " > " << tol;
    std::printf("[cuda optim] %-28s %-6s max|err| %.3e, one-ulp bf16 flips %zu / %zu\n",
                what.c_str(), want[k].name.c_str(), max_err, n_ulp, w.size());
    worst = std::max(worst, max_err);
  }
  return worst;
}

std::unique_ptr<Optimizer> build(const std::string& kind, ParameterList& ps) {
  OptimizerConfig cfg;
  cfg.kind = kind;
  cfg.muon_momentum = 0.9;
  cfg.muon_ns_dtype = "f32";  // the comparison with the CPU needs f32 Newton-Schulz on both
  auto opt = make_optimizer(cfg, ps);
  if (auto* muon = dynamic_cast<Muon*>(opt.get())) muon->set_row_blocks("qkv", {24, 8, 8});
  return opt;
}

// One trainer-like step on each list: clip to max_norm 1, then the update. Returns the norms.
std::pair<double, double> step_both(ParameterList& cpu, Optimizer& oc, ParameterList& dev,
                                    Optimizer& od, int t) {
  set_grads({&cpu, &dev}, 300 + t, t % 2 == 0 ? 0.005f : 0.3f);  // norms ~0.4 and ~25
  const double nc = clip_grad_norm(cpu, 1.0), nd = clip_grad_norm(dev, 1.0);
  oc.step(0.01);
  od.step(0.01);
  return {nc, nd};
}

// f32 tolerances after 5 steps: AdamW moves weights by ~lr per step, so a few fp32 ulps of O(1)
// values; Muon's update is ~lr * 0.2 * sqrt(max dim) * O, and O carries f32 GEMM rounding (f32
// NS5 on the CPU is within 7e-7 of NS5 in double for these shapes), so ~1e-8 per step on top.
double f32_tol(const std::string& kind) { return kind == "adamw" ? 2e-6 : 5e-6; }

void run_against_cpu(const std::string& kind, DType dtype) {
  if (!cuda::available()) GTEST_SKIP() << "no usable CUDA device";
  const std::string what = kind + " " + dtype_name(dtype);
  ParameterList cpu = make_params(5, dtype, Device::cpu()), dev = make_params(5, dtype, gpu());
  auto oc = build(kind, cpu), od = build(kind, dev);
  for (int t = 1; t <= 5; ++t) {
    auto [nc, nd] = step_both(cpu, *oc, dev, *od, t);
    std::printf("[cuda optim] %s step %d: grad norm cpu %.17g cuda %.17g\n", what.c_str(), t, nc,
                nd);
    EXPECT_NEAR(nd, nc, 1e-12 * nc) << what << " step " << t;
  }
  for (const Parameter& p : dev) {
    EXPECT_TRUE(p.value.is_cuda()) << p.name;
    EXPECT_EQ(p.value.dtype(), dtype) << p.name;
  }
  compare_values(dev, cpu, f32_tol(kind), what);
}

TEST(OptimCuda, AdamWMatchesCpuF32) { run_against_cpu("adamw", DType::kF32); }
TEST(OptimCuda, AdamWMatchesCpuBf16) { run_against_cpu("adamw", DType::kBF16); }
TEST(OptimCuda, MuonMatchesCpuF32) { run_against_cpu("muon", DType::kF32); }
TEST(OptimCuda, MuonMatchesCpuBf16) { run_against_cpu("muon", DType::kBF16); }

TEST(OptimCuda, NewtonSchulzMatchesCpu) {
  if (!cuda::available()) GTEST_SKIP() << "no usable CUDA device";
  Rng rng(17);
  for (Shape shape : {Shape{16, 40}, Shape{40, 16}, Shape{128, 384}, Shape{512, 256}}) {
    std::vector<float> g(static_cast<size_t>(shape.numel()));
    for (float& x : g) x = rng.normal();
    Tensor host = Tensor::from_vector(g, shape);
    Tensor want = newton_schulz5(host), got = newton_schulz5(host.to(gpu()));
    ASSERT_TRUE(got.is_cuda());
    std::vector<double> a = doubles(got), b = doubles(want);
    double max_err = 0;
    for (size_t i = 0; i < a.size(); ++i) max_err = std::max(max_err, std::fabs(a[i] - b[i]));
    std::printf("[cuda optim] newton_schulz5 %s: max|err| vs cpu %.3e\n", shape.str().c_str(),
                max_err);
    // f32 NS5 is within 7e-7 of NS5 in double for these shapes (entries up to ~0.4); two f32
    // GEMM libraries should land within a few times that of each other.
    EXPECT_LE(max_err, 2e-5) << shape.str();
  }
}

std::string temp_path(const std::string& tag) {
  return (std::filesystem::temp_directory_path() /
          ("vela_optim_cuda_" + tag + "_" + std::to_string(getpid()) + ".safetensors"))
      .string();
}

// Copies the compute weights of `from` into `to` (any devices): what a model checkpoint restores.
void copy_values(const ParameterList& from, ParameterList& to) {
  for (size_t k = 0; k < from.size(); ++k) to[k].value.copy_(from[k].value.to(Device::cpu()));
}

void check_cross_device_state(const std::string& kind, DType dtype) {
  if (!cuda::available()) GTEST_SKIP() << "no usable CUDA device";
  const std::string what = kind + " " + dtype_name(dtype);
  // Reference runs: 6 uninterrupted steps on each device.
  ParameterList cpu = make_params(21, dtype, Device::cpu()), dev = make_params(21, dtype, gpu());
  auto oc = build(kind, cpu), od = build(kind, dev);
  for (int t = 1; t <= 3; ++t) step_both(cpu, *oc, dev, *od, t);
  const std::string from_gpu = temp_path("gpu"), from_cpu = temp_path("cpu");
  od->save_state(from_gpu);
  oc->save_state(from_cpu);
  EXPECT_EQ(SafetensorsReader::open(from_gpu).names(), SafetensorsReader::open(from_cpu).names())
      << what << ": the GPU and the CPU write different state tensors";

  // GPU state -> a fresh CPU optimizer; CPU state -> a fresh GPU optimizer; GPU -> GPU.
  ParameterList cpu2 = make_params(99, dtype, Device::cpu()), dev2 = make_params(99, dtype, gpu());
  ParameterList dev3 = make_params(98, dtype, gpu());
  copy_values(dev, cpu2);
  copy_values(cpu, dev2);
  copy_values(dev, dev3);
  auto oc2 = build(kind, cpu2), od2 = build(kind, dev2), od3 = build(kind, dev3);
  oc2->load_state(from_gpu);
  od2->load_state(from_cpu);
  od3->load_state(from_gpu);
  EXPECT_EQ(oc2->step_count(), 3);
  EXPECT_EQ(od2->step_count(), 3);
  for (int t = 4; t <= 6; ++t) {
    step_both(cpu, *oc, dev, *od, t);
    step_both(cpu2, *oc2, dev2, *od2, t);
    set_grads({&dev3}, 300 + t, t % 2 == 0 ? 0.005f : 0.3f);
    clip_grad_norm(dev3, 1.0);
    od3->step(0.01);
  }
  // GPU -> CPU continues like the GPU run, CPU -> GPU like the CPU run (to device differences).
  compare_values(cpu2, dev, f32_tol(kind), what + " gpu->cpu");
  compare_values(dev2, cpu, f32_tol(kind), what + " cpu->gpu");
  // GPU -> GPU: the same kernels on the same state: bit for bit.
  EXPECT_EQ(compare_values(dev3, dev, 0.0, what + " gpu->gpu"), 0.0) << what;
  std::filesystem::remove(from_gpu);
  std::filesystem::remove(from_cpu);
}

TEST(OptimCuda, StateMovesBetweenDevicesAdamW) {
  check_cross_device_state("adamw", DType::kF32);
  check_cross_device_state("adamw", DType::kBF16);
}

TEST(OptimCuda, StateMovesBetweenDevicesMuon) {
  check_cross_device_state("muon", DType::kF32);
  check_cross_device_state("muon", DType::kBF16);
}

// bf16 Newton-Schulz (muon_ns_dtype auto for bf16 CUDA weights): close to the f32 iteration, and
// still near-orthogonal (O O^T ~ I within the quintic's [0.7, 1.2] band on the diagonal).
TEST(OptimCuda, BF16NewtonSchulzTracksF32) {
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device";
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{64, 256}, {256, 96}, {384, 384}}) {
    std::vector<float> v(static_cast<size_t>(rows * cols));
    Rng rng(7 + static_cast<uint64_t>(rows));
    for (float& x : v) x = rng.normal();
    Tensor g = Tensor::from_vector(v, {rows, cols}).to(Device::cuda(0));
    Tensor o32 = newton_schulz5(g, 5, DType::kF32).to(Device::cpu());
    Tensor o16 = newton_schulz5(g, 5, DType::kBF16).to(Device::cpu());
    const float* a = o32.data<float>();
    const float* b = o16.data<float>();
    double max_ref = 0, max_err = 0;
    for (int64_t i = 0; i < o32.numel(); ++i) {
      max_ref = std::max(max_ref, static_cast<double>(std::fabs(a[i])));
      max_err = std::max(max_err, static_cast<double>(std::fabs(a[i] - b[i])));
    }
    std::printf("[cuda optim] NS5 bf16 vs f32 %lldx%lld: max|err| %.3e (max|ref| %.3e)\n",
                static_cast<long long>(rows), static_cast<long long>(cols), max_err, max_ref);
    EXPECT_LT(max_err, 0.08 * max_ref) << rows << "x" << cols;
    // Gram matrix of the short side: diagonal in the quintic's band.
    const bool tall = rows > cols;
    const int64_t r = tall ? cols : rows, c = tall ? rows : cols;
    for (int64_t i = 0; i < r; ++i) {
      double d = 0;
      for (int64_t k = 0; k < c; ++k) {
        const float x = tall ? b[k * cols + i] : b[i * cols + k];
        d += static_cast<double>(x) * x;
      }
      EXPECT_GT(d, 0.4) << "row " << i;
      EXPECT_LT(d, 1.6) << "row " << i;
    }
  }
}

}  // namespace
}  // namespace vela
