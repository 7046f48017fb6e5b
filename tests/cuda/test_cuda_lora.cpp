// CUDA LoRA: the shrink / expand / dropout kernels against their CPU twins (f32, bf16, f16; mixed
// slots with base rows; column-block outputs), and the CUDA engine serving two adapters and the
// base in one batch (decode graphs on): every request gets exactly what it gets alone, and (f32)
// the CPU engine's greedy tokens.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/json.h"
#include "cuda_test_util.h"
#include "engine/engine.h"
#include "lora_test_util.h"
#include "nn/linear.h"
#include "nn/lora.h"
#include "ops/lora.h"

namespace vela {
namespace {
namespace fs = std::filesystem;
using test::CudaTest;

class CudaLora : public CudaTest {};

std::vector<double> host(const Tensor& t) {
  Tensor c = t.to(Device::cpu());
  Tensor cc = c.contiguous();
  std::vector<double> out;
  for (int64_t i = 0; i < cc.numel(); ++i) {
    double v = 0;
    switch (cc.dtype()) {
      case DType::kF32:
        v = static_cast<const float*>(cc.data_ptr())[i];
        break;
      case DType::kBF16:
        v = static_cast<float>(static_cast<const bf16*>(cc.data_ptr())[i]);
        break;
      case DType::kF16:
        v = static_cast<float>(static_cast<const f16*>(cc.data_ptr())[i]);
        break;
      default:
        break;
    }
    out.push_back(v);
  }
  return out;
}

void expect_close(const Tensor& got, const Tensor& want, double atol, double rtol,
                  const std::string& what) {
  std::vector<double> g = host(got), w = host(want);
  ASSERT_EQ(g.size(), w.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double err = std::fabs(g[i] - w[i]);
    worst = std::max(worst, err);
    ASSERT_LE(err, atol + rtol * std::fabs(w[i])) << what << " element " << i;
  }
  std::printf("[lora] %s: max abs err %.3g\n", what.c_str(), worst);
}

TEST_F(CudaLora, ShrinkExpandDropoutMatchTheCpuTwins) {
  const int64_t n = 37, in = 96, r = 8, slots_n = 3, n_cols = 40, y_cols = 72;
  std::vector<int32_t> sl(n);
  for (int64_t i = 0; i < n; ++i) sl[i] = static_cast<int32_t>(i % (slots_n + 1)) - 1;  // -1..2
  const Tensor slots = Tensor::from_vector(sl);
  const Tensor scales = Tensor::from_vector(std::vector<float>{0.5f, 2.0f, 1.25f});
  for (DType dt : test::kFloatDTypes) {
    const std::string name = dtype_name(dt);
    Tensor x = test::random_cpu({n, in}, dt, 1);
    Tensor a = test::random_cpu({slots_n, r, in}, dt, 2);
    Tensor b = test::random_cpu({slots_n, n_cols, r}, dt, 3);
    Tensor xa_c = Tensor::empty({n, r}, DType::kF32);
    ops::lora_shrink(x, a, slots, xa_c);
    Tensor xa_g = Tensor::empty({n, r}, DType::kF32, gpu());
    ops::lora_shrink(x.to(gpu()), a.to(gpu()), slots.to(gpu()), xa_g);
    expect_close(xa_g, xa_c, 1e-4, 1e-4, "shrink " + name);
    // Expand into a column block [16, 56) of a wider output.
    Tensor y_c = test::random_cpu({n, y_cols}, dt, 4);
    Tensor y_g = y_c.to(gpu());
    Tensor yc_view = y_c.slice(1, 16, 16 + n_cols), yg_view = y_g.slice(1, 16, 16 + n_cols);
    ops::lora_expand(xa_c, b, slots, scales, yc_view);
    ops::lora_expand(xa_c.to(gpu()), b.to(gpu()), slots.to(gpu()), scales.to(gpu()), yg_view);
    const test::Tol tol = test::tol_for(dt);
    expect_close(y_g, y_c, tol.atol * 4, tol.rtol, "expand " + name);
    // Dropout: identical masks (the same hash), so identical values up to one rounding.
    Tensor d_c = Tensor::empty({n, in}, dt);
    ops::lora_dropout(x, 77, 5, 0.3f, d_c);
    Tensor d_g = Tensor::empty({n, in}, dt, gpu());
    ops::lora_dropout(x.to(gpu()), 77, 5, 0.3f, d_g);
    expect_close(d_g, d_c, 0, 1e-6, "dropout " + name);
    int64_t zeros = 0;
    for (double v : host(d_c)) zeros += v == 0.0;
    EXPECT_NEAR(static_cast<double>(zeros) / static_cast<double>(n * in), 0.3, 0.05);
  }
}

// The segmented forms (one launch for q|k|v) against the CPU twin, each segment into its own
// column block: the tiled kernels at decode and prefill row counts and every rank they take, and
// the simple expand for a rank outside 8 / 16 / 32 / 64 (r = 4).
TEST_F(CudaLora, SegmentedShrinkExpandMatchTheCpuTwin) {
  struct Shape {
    int64_t n, r, in;
  };
  const int64_t slots_n = 3;
  const int64_t cols[3] = {256, 128, 72};  // v's width is not a multiple of the 128-column tile
  const Tensor scales = Tensor::from_vector(std::vector<float>{0.5f, 2.0f, 1.25f});
  // in = 2304: three shrink parts (lora_shrink_parts), the last one short.
  for (const Shape sh : {Shape{37, 8, 128}, Shape{300, 16, 128}, Shape{20, 32, 2304},
                         Shape{9, 64, 128}, Shape{13, 4, 2304}, Shape{1, 16, 2304}}) {
    const int64_t in = sh.in, parts = ops::lora_shrink_parts(in, gpu());
    std::vector<int32_t> sl(static_cast<size_t>(sh.n));
    for (int64_t i = 0; i < sh.n; ++i)
      sl[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7) % (slots_n + 1)) - 1;
    if (sh.n == 1) sl[0] = 1;
    const Tensor slots = Tensor::from_vector(sl);
    for (DType dt : test::kFloatDTypes) {
      const std::string name = std::string(dtype_name(dt)) + " n=" + std::to_string(sh.n) +
                               " r=" + std::to_string(sh.r) + " parts=" + std::to_string(parts);
      Tensor x = test::random_cpu({sh.n, in}, dt, 1);
      ops::LoraSegments cpu, dev;
      cpu.n = dev.n = 3;
      Tensor wide_c[3], wide_g[3];
      for (int g = 0; g < 3; ++g) {
        cpu.a[g] = test::random_cpu({slots_n, sh.r, in}, dt, 10 + g, -0.1, 0.1);
        cpu.b[g] = test::random_cpu({slots_n, cols[g], sh.r}, dt, 20 + g);
        dev.a[g] = cpu.a[g].to(gpu());
        dev.b[g] = cpu.b[g].to(gpu());
        wide_c[g] = test::random_cpu({sh.n, cols[g] + 16}, dt, 30 + g);
        wide_g[g] = wide_c[g].to(gpu());
        cpu.y[g] = wide_c[g].slice(1, 8, 8 + cols[g]);
        dev.y[g] = wide_g[g].slice(1, 8, 8 + cols[g]);
      }
      const int64_t w = 3 * sh.r;
      Tensor xa_c = Tensor::empty({sh.n, w}, DType::kF32);
      Tensor xa_g = parts > 1 ? Tensor::empty({parts, sh.n, w}, DType::kF32, gpu())
                              : Tensor::empty({sh.n, w}, DType::kF32, gpu());
      ops::lora_shrink(x, cpu, slots, xa_c);
      ops::lora_shrink(x.to(gpu()), dev, slots.to(gpu()), xa_g);
      // The parts add up to the CPU's whole sums.
      std::vector<double> parts_g = host(xa_g), summed(static_cast<size_t>(sh.n * w), 0.0);
      for (int64_t z = 0; z < parts; ++z)
        for (int64_t e = 0; e < sh.n * w; ++e)
          summed[static_cast<size_t>(e)] += parts_g[static_cast<size_t>(z * sh.n * w + e)];
      std::vector<double> want = host(xa_c);
      for (size_t e = 0; e < want.size(); ++e)
        ASSERT_NEAR(summed[e], want[e], 1e-3 + 1e-4 * std::fabs(want[e])) << name << " xa " << e;
      ops::lora_expand(xa_c, cpu, slots, scales);
      ops::lora_expand(xa_g, dev, slots.to(gpu()), scales.to(gpu()));
      const test::Tol tol = test::tol_for(dt);
      for (int g = 0; g < 3; ++g)
        expect_close(wide_g[g], wide_c[g], tol.atol * 4, tol.rtol,
                     "segmented expand " + name + " segment " + std::to_string(g));
    }
  }
}

// The training path on CUDA (a fused Linear with two LoRA segments, dropout on): forward, the
// frozen base's dx and the adapter's dA / dB against the CPU.
TEST_F(CudaLora, TrainingForwardBackwardMatchesTheCpu) {
  const int64_t n = 29, in = 48, out = 40, r = 4;
  auto make = [&](Device dev) {
    Linear lin;
    lin.weight = test::random_cpu({out, in}, DType::kF32, 11).to(dev);
    auto lora = std::make_shared<LoraLinear>();
    lora->in_features = in;
    lora->r = r;
    lora->scales = {1.5f};
    lora->scales_dev = Tensor::from_vector(lora->scales).to(dev);
    lora->dropout = 0.2f;
    lora->id = 3;
    for (int k = 0; k < 2; ++k) {
      LoraSegment seg;
      seg.module = k == 0 ? "q_proj" : "v_proj";
      seg.col_begin = k == 0 ? 0 : 24;
      seg.n_cols = k == 0 ? 16 : 16;
      seg.a = test::random_cpu({1, r, in}, DType::kF32, 20 + k).to(dev);
      seg.b = test::random_cpu({1, seg.n_cols, r}, DType::kF32, 30 + k).to(dev);
      seg.da = Tensor::zeros({r, in}, DType::kF32, dev);
      seg.db = Tensor::zeros({seg.n_cols, r}, DType::kF32, dev);
      lora->segments.push_back(seg);
    }
    lin.lora = lora;
    return lin;
  };
  Linear cpu = make(Device::cpu()), gpu_lin = make(gpu());
  const Tensor x = test::random_cpu({n, in}, DType::kF32, 40);
  const Tensor dy = test::random_cpu({n, out}, DType::kF32, 41);
  Tensor y_c = Tensor::empty({n, out}, DType::kF32),
         y_g = Tensor::empty({n, out}, DType::kF32, gpu());
  Tensor dx_c = Tensor::empty({n, in}, DType::kF32),
         dx_g = Tensor::empty({n, in}, DType::kF32, gpu());
  Tensor none_c, none_g;
  {
    LoraDropoutScope scope(1234);
    cpu.forward(x, y_c);
    gpu_lin.forward(x.to(gpu()), y_g);
    cpu.backward(x, dy, dx_c, none_c, none_c);
    gpu_lin.backward(x.to(gpu()), dy.to(gpu()), dx_g, none_g, none_g);
  }
  expect_close(y_g, y_c, 1e-4, 1e-4, "train forward");
  expect_close(dx_g, dx_c, 1e-4, 1e-4, "train dx");
  for (int k = 0; k < 2; ++k) {
    expect_close(gpu_lin.lora->segments[k].da, cpu.lora->segments[k].da, 1e-3, 1e-4, "dA");
    expect_close(gpu_lin.lora->segments[k].db, cpu.lora->segments[k].db, 1e-3, 1e-4, "dB");
  }
}

const std::string kModel = "fixtures/models/qwen3_qknorm";

using test::greedy_lora_request;

TEST_F(CudaLora, EngineMixedAdapterBatchesEqualAloneAndTheCpuEngine) {
  const fs::path root =
      fs::temp_directory_path() / ("vela_cuda_lora_" + std::to_string(::getpid()));
  fs::remove_all(root);
  const std::string da = (root / "a").string(), db = (root / "b").string();
  test::make_lora_adapter(da, kModel, 4, 8.0, {"all-linear"}, 1);
  test::make_lora_adapter(db, kModel, 2, 3.0, {"q_proj", "v_proj", "down_proj"}, 2);
  const std::vector<std::pair<std::string, std::string>> adapters = {{"a", da}, {"b", db}};
  std::vector<Request> reqs;
  const std::vector<std::string> names = {"a", "b", "", "b", "a", "", "a", "b"};
  int k = 0;
  for (int len : {1, 5, 19, 9, 33, 12, 2, 7}) {
    std::vector<int32_t> p;
    for (int i = 0; i < len; ++i) p.push_back((i * 7 + len * 3 + k) % 120 + 1);
    reqs.push_back(greedy_lora_request(p, 8, names[static_cast<size_t>(k)]));
    ++k;
  }
  EngineConfig cfg;
  cfg.page_size = 4;
  auto cpu = Engine::load(kModel, cfg, DType::kF32, Device::cpu(), adapters);
  const std::vector<RequestResult> want = cpu->generate(reqs);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dt));
    auto gpu_engine = Engine::load(kModel, cfg, dt, gpu(), adapters);
    const std::vector<RequestResult> together = gpu_engine->generate(reqs);
    for (size_t i = 0; i < reqs.size(); ++i) {
      SCOPED_TRACE("request " + std::to_string(i) + " adapter '" + names[i] + "'");
      const RequestResult alone = gpu_engine->generate({reqs[i]})[0];
      EXPECT_EQ(together[i].completions[0].tokens, alone.completions[0].tokens);
      const auto& lt = together[i].completions[0].logprobs;
      const auto& la = alone.completions[0].logprobs;
      ASSERT_EQ(lt.size(), la.size());
      for (size_t t = 0; t < lt.size(); ++t) {
        const double tol = dt == DType::kF32 ? 1e-4 : 0.05;
        EXPECT_NEAR(lt[t].logprob, la[t].logprob, tol);
      }
      if (dt == DType::kF32) {
        EXPECT_EQ(together[i].completions[0].tokens, want[i].completions[0].tokens);
      }
    }
    EXPECT_EQ(gpu_engine->check_integrity(), "");
  }
  fs::remove_all(root);
}

// Writes the PEFT-parity fixture (no GPU needed; it lives in test_cuda because the GPU machine,
// which has peft, builds this binary): VELA_WRITE_LORA_FIXTURE=DIR gets DIR/adapter (random A and
// B, saved by save_lora_adapter as training saves one) and DIR/vela_logits.json. Without the
// variable it is skipped; test_engine's LoraEngine.PeftFixtureLogitsStillMatch checks the
// committed copy on every CPU run.
TEST(LoraFixture, WritePeftFixture) {
  const char* out = std::getenv("VELA_WRITE_LORA_FIXTURE");
  if (out == nullptr) GTEST_SKIP() << "set VELA_WRITE_LORA_FIXTURE=DIR to write the fixture";
  test::write_lora_fixture(out, kModel);
  EXPECT_TRUE(fs::exists(std::string(out) + "/adapter/adapter_config.json"));
}

}  // namespace
}  // namespace vela
