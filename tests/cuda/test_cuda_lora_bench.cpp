// Opt-in benchmark of the serving LoRA path (BGMV shrink / expand, ops/cuda/lora.cu) against the
// base projection GEMM it rides on, at serving shapes: every projection of bench-1b
// (bench/configs/bench1b_hd128.json: hidden 1536) and of Qwen3-1.7B (hidden 2048), a decode batch
// of 64 rows (and a 2048-token prefill) spread round-robin over 1..8 adapters, ranks 8..64,
// target all-linear (q/k/v segments on the fused qkv, gate/up on gate_up), bf16.
// Each case times Linear::forward without the adapters (the base GEMM) and with them (base +
// one shrink and one expand per segment: what the engine runs), and reports the adapters' added
// time, its ratio to the base GEMM, and the bytes the LoRA kernels must move (the distinct
// adapters' A and B, x per segment, y read + written, xa) as GB/s and % of the device copy
// bandwidth. Temporaries come from a scratch arena as in the engine. Eager launches on one
// stream (the engine replays them in a CUDA graph, so the launch gaps here are an upper bound for
// decode).
//   run: test_cuda --gtest_also_run_disabled_tests --gtest_filter='CudaLoraBench.*'
//   VELA_LORA_BENCH_JSON=FILE also writes the rows as JSON.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/scratch_arena.h"
#include "cuda_test_util.h"
#include "nn/linear.h"
#include "nn/lora.h"
#include "ops/cuda/bench_cuda.h"

namespace vela {
namespace {

class CudaLoraBench : public test::CudaTest {};

struct Proj {
  std::string name;
  int64_t in;
  std::vector<std::pair<std::string, int64_t>> segments;  // HF module, output columns
};

struct ModelShape {
  std::string model;
  int64_t hidden, q_dim, kv_dim, inter;
  std::vector<Proj> projs() const {
    return {{"qkv", hidden, {{"q_proj", q_dim}, {"k_proj", kv_dim}, {"v_proj", kv_dim}}},
            {"o", q_dim, {{"o_proj", hidden}}},
            {"gate_up", hidden, {{"gate_proj", inter}, {"up_proj", inter}}},
            {"down", inter, {{"down_proj", hidden}}}};
  }
};

// Seconds per call of fn, averaged over enough back-to-back calls to fill ~20 ms.
template <typename F>
double time_per_call(F&& fn) {
  for (int i = 0; i < 5; ++i) fn();
  cuda::synchronize(0);
  int reps = 20;
  for (;;) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) fn();
    cuda::synchronize(0);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0.02 || reps >= 20000) return s / reps;
    reps *= 4;
  }
}

TEST_F(CudaLoraBench, DISABLED_BgmvVsBaseGemm) {
  const DType dt = DType::kBF16;
  const double esize = 2;
  const double copy_gbps = ops::cuda::bench_copy_gbps(size_t{1} << 30);
  std::printf("device copy %.0f GB/s\n", copy_gbps);
  const std::vector<ModelShape> shapes = {{"bench-1b", 1536, 1536, 256, 6912},
                                          {"qwen3-1.7b", 2048, 2048, 1024, 6144}};
  // The engine's scratch arena for the LoRA temporaries (xa), so no allocation is timed.
  ScratchArena arena(int64_t{64} << 20, gpu());
  ScratchScope scope(&arena);
  json rows = json::array();
  std::printf("%-10s %-7s %5s %3s %3s %9s %9s %8s %9s %7s\n", "model", "proj", "rows", "r", "ads",
              "base us", "lora us", "lora/gemm", "lora GB/s", "of copy");
  for (const ModelShape& sh : shapes) {
    for (const Proj& p : sh.projs()) {
      int64_t out = 0;
      for (const auto& s : p.segments) out += s.second;
      for (int64_t n : {64, 2048}) {
        Linear lin;
        lin.weight = test::random_cpu({out, p.in}, dt, 1, -0.05, 0.05).to(gpu());
        const Tensor x = test::random_cpu({n, p.in}, dt, 2).to(gpu());
        Tensor y = Tensor::empty({n, out}, dt, gpu());
        const double base_s = time_per_call([&] { lin.forward(x, y); });
        for (int64_t r : {8, 16, 32, 64}) {
          for (int64_t n_ad : {1, 2, 4, 8}) {
            if (n == 2048 && !(n_ad == 4 && (r == 16 || r == 64))) continue;  // a few prefill rows
            auto lora = std::make_shared<LoraLinear>();
            lora->in_features = p.in;
            lora->r = r;
            lora->n_slots = n_ad;
            lora->scales.assign(static_cast<size_t>(n_ad), 2.0f);
            lora->scales_dev = Tensor::from_vector(lora->scales).to(gpu());
            int64_t col = 0;
            for (const auto& [module, cols] : p.segments) {
              LoraSegment seg;
              seg.module = module;
              seg.col_begin = col;
              seg.n_cols = cols;
              seg.a = test::random_cpu({n_ad, r, p.in}, dt, 3, -0.05, 0.05).to(gpu());
              seg.b = test::random_cpu({n_ad, cols, r}, dt, 4, -0.05, 0.05).to(gpu());
              lora->segments.push_back(seg);
              col += cols;
            }
            auto slots = std::make_shared<LoraRowSlots>();
            std::vector<int32_t> sv(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i)
              sv[static_cast<size_t>(i)] = static_cast<int32_t>(i % n_ad);
            slots->host = Tensor::from_vector(sv);
            slots->slots = slots->host.to(gpu());
            lora->rows = slots;
            lin.lora = lora;
            const double with_s = time_per_call([&] { lin.forward(x, y); });
            lin.lora = nullptr;
            const double lora_s = std::max(with_s - base_s, 1e-9);
            const double n_seg = static_cast<double>(p.segments.size());
            const double bytes = n_ad * r * (n_seg * p.in + out) * esize  // A and B
                                 + n_seg * n * p.in * esize               // x per shrink
                                 + 2.0 * n * out * esize                  // y read + written
                                 + 2.0 * n_seg * n * r * 4;               // xa written + read
            const double gbps = bytes / lora_s / 1e9;
            std::printf("%-10s %-7s %5lld %3lld %3lld %9.1f %9.1f %8.2fx %9.0f %6.1f%%\n",
                        sh.model.c_str(), p.name.c_str(), static_cast<long long>(n),
                        static_cast<long long>(r), static_cast<long long>(n_ad), base_s * 1e6,
                        lora_s * 1e6, lora_s / base_s, gbps, 100 * gbps / copy_gbps);
            rows.push_back({{"model", sh.model},
                            {"proj", p.name},
                            {"rows", n},
                            {"r", r},
                            {"adapters", n_ad},
                            {"in", p.in},
                            {"out", out},
                            {"base_us", base_s * 1e6},
                            {"base_plus_lora_us", with_s * 1e6},
                            {"lora_us", lora_s * 1e6},
                            {"lora_over_gemm", lora_s / base_s},
                            {"lora_bytes", bytes},
                            {"lora_gbps", gbps}});
            EXPECT_GT(with_s, 0);
          }
        }
      }
    }
  }
  if (const char* path = std::getenv("VELA_LORA_BENCH_JSON")) {
    std::ofstream f(path);
    f << json{{"benchmark", "lora_bgmv"},
              {"dtype", "bf16"},
              {"copy_gbps", copy_gbps},
              {"results", rows}}
             .dump(2)
      << "\n";
  }
}

}  // namespace
}  // namespace vela
