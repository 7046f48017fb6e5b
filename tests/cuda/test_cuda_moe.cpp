// CUDA mixture-of-experts ops against their CPU twins (routing, permutation, grouped GEMM in the
// decode and tiled paths, both weight layouts, the weight gradient, combine and the backward
// passes) over several shapes and dtypes; bit-identical reruns (determinism); a MoE fixture
// through the CUDA engine (graphs on) against the CPU engine; and, disabled by default, a
// Qwen3-30B-A3B-shaped MoE layer benchmark (decode and prefill, bytes / FLOPs vs floor).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/cuda/cuda_api.h"
#include "core/json.h"
#include "core/rng.h"
#include "cuda_test_util.h"
#include "engine/engine.h"
#include "model/contiguous_kv_cache.h"
#include "model/transformer.h"
#include "ops/cast.h"
#include "ops/moe.h"

namespace vela {
namespace {

using test::CudaTest;
using test::expect_close;
using test::random_cpu;

class CudaMoe : public CudaTest {};

Tensor random_ids(int64_t n, int64_t k, int64_t n_exp, uint64_t seed, bool skew) {
  std::vector<int32_t> v(static_cast<size_t>(n * k));
  Rng rng(seed);
  for (int64_t t = 0; t < n; ++t) {
    std::set<int32_t> used;
    for (int64_t j = 0; j < k; ++j) {
      int32_t e;
      do {
        float u = rng.uniform();
        e = static_cast<int32_t>((skew ? u * u * u : u) * static_cast<float>(n_exp)) %
            static_cast<int32_t>(n_exp);
      } while (used.count(e));
      used.insert(e);
      v[static_cast<size_t>(t * k + j)] = e;
    }
  }
  return Tensor::from_vector(v, {n, k});
}

struct Routed {
  Tensor offsets, src, dst;  // CPU
};
Routed permute_cpu(const Tensor& ids, int64_t n_exp) {
  Routed r{Tensor::empty({n_exp + 1}, DType::kI32), Tensor::empty({ids.numel()}, DType::kI32),
           Tensor::empty(ids.shape(), DType::kI32)};
  ops::moe_permute(ids, n_exp, r.offsets, r.src, r.dst);
  return r;
}

TEST_F(CudaMoe, RouteMatchesCpu) {
  for (auto [n, e, k, norm] : std::vector<std::tuple<int64_t, int64_t, int64_t, bool>>{
           {1, 8, 2, true}, {7, 128, 8, true}, {300, 64, 4, false}, {33, 60, 1, false}}) {
    SCOPED_TRACE(std::to_string(n) + "x" + std::to_string(e) + " k" + std::to_string(k));
    Tensor logits = random_cpu({n, e}, DType::kF32, 10 + n, -4, 4);
    Tensor w = Tensor::empty({n, k}, DType::kF32), ids = Tensor::empty({n, k}, DType::kI32);
    ops::moe_route(logits, k, norm, w, ids);
    Tensor gl = logits.to(gpu());
    Tensor gw = Tensor::empty({n, k}, DType::kF32, gpu()),
           gi = Tensor::empty({n, k}, DType::kI32, gpu());
    ops::moe_route(gl, k, norm, gw, gi);
    EXPECT_EQ(gi.to(Device::cpu()).to_vector<int32_t>(), ids.to_vector<int32_t>());
    expect_close(gw, w, {1e-6, 1e-5}, "weights");
    // Backward with both router losses.
    Tensor dw = random_cpu({n, k}, DType::kF32, 3);
    Tensor bias = random_cpu({e}, DType::kF32, 4, 0, 0.1);
    Tensor dl = Tensor::empty({n, e}, DType::kF32), gdl = Tensor::empty({n, e}, DType::kF32, gpu());
    ops::moe_route_backward(logits, ids, dw, norm, bias, 0.01f, dl);
    ops::moe_route_backward(gl, gi, dw.to(gpu()), norm, bias.to(gpu()), 0.01f, gdl);
    expect_close(gdl, dl, {1e-6, 1e-4}, "dlogits");
  }
}

TEST_F(CudaMoe, PermuteIsBitIdenticalToCpu) {
  for (auto [n, k, e, skew] :
       std::vector<std::tuple<int64_t, int64_t, int64_t, bool>>{{1, 1, 4, false},
                                                                {1, 8, 128, false},
                                                                {64, 8, 128, true},
                                                                {4096, 8, 128, false},
                                                                {1000, 2, 7, true}}) {
    Tensor ids = random_ids(n, k, e, n * 31 + e, skew);
    Routed c = permute_cpu(ids, e);
    Tensor off = Tensor::empty({e + 1}, DType::kI32, gpu()),
           src = Tensor::empty({n * k}, DType::kI32, gpu()),
           dst = Tensor::empty({n, k}, DType::kI32, gpu());
    ops::moe_permute(ids.to(gpu()), e, off, src, dst);
    EXPECT_EQ(off.to(Device::cpu()).to_vector<int32_t>(), c.offsets.to_vector<int32_t>()) << n;
    EXPECT_EQ(src.to(Device::cpu()).to_vector<int32_t>(), c.src.to_vector<int32_t>()) << n;
    EXPECT_EQ(dst.to(Device::cpu()).to_vector<int32_t>(), c.dst.to_vector<int32_t>()) << n;
  }
}

TEST_F(CudaMoe, GroupedGemmMatchesCpuInEveryPath) {
  // (tokens, k, experts, K, N): decode rows (GEMV path), many rows (tiled / tensor cores), odd
  // sizes, skewed routing that leaves experts empty, and prefill rows (>= 2048: cuBLAS grouped
  // GEMM for 16-bit inputs).
  for (auto [n, k, e, kd, nd] :
       std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>>{{1, 8, 16, 128, 96},
                                                                            {5, 2, 8, 40, 72},
                                                                            {3, 2, 8, 37, 20},
                                                                            {200, 4, 8, 128, 200},
                                                                            {300, 2, 6, 37, 53},
                                                                            {1100, 2, 8, 64, 40}}) {
    Tensor ids = random_ids(n, k, e, 7 * n + kd, true);
    Routed r = permute_cpu(ids, e);
    for (DType dt : {DType::kF32, DType::kBF16}) {
      for (bool trans : {true, false}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + (trans ? " trans" : " plain") +
                     " n=" + std::to_string(n) + " K=" + std::to_string(kd));
        Tensor a = random_cpu({n * k, kd}, dt, 1 + kd);
        Tensor w = trans ? random_cpu({e, nd, kd}, dt, 2) : random_cpu({e, kd, nd}, dt, 2);
        Tensor want = Tensor::empty({n * k, nd}, DType::kF32);
        Tensor a32 = Tensor::empty(a.shape(), DType::kF32),
               w32 = Tensor::empty(w.shape(), DType::kF32);
        ops::cast(a, a32);
        ops::cast(w, w32);
        ops::grouped_gemm(a32, w32, r.offsets, trans, want);
        Tensor got = Tensor::empty({n * k, nd}, DType::kF32, gpu());
        Tensor go = r.offsets.to(gpu());
        ops::grouped_gemm(a.to(gpu()), w.to(gpu()), go, trans, got);
        const double tol = dt == DType::kF32 ? 1e-4 : 2e-3 * std::sqrt(static_cast<double>(kd));
        expect_close(got, want, {tol, 1e-3}, "grouped_gemm");
        Tensor again = Tensor::empty({n * k, nd}, DType::kF32, gpu());
        ops::grouped_gemm(a.to(gpu()), w.to(gpu()), go, trans, again);
        EXPECT_EQ(test::to_doubles(again), test::to_doubles(got)) << "not deterministic";
        if (dt == DType::kBF16) {  // out in a's dtype: the cuBLAS path at prefill rows
          Tensor got16 = Tensor::empty({n * k, nd}, dt, gpu());
          ops::grouped_gemm(a.to(gpu()), w.to(gpu()), go, trans, got16);
          Tensor got16f = Tensor::empty({n * k, nd}, DType::kF32, gpu());
          ops::cast(got16, got16f);
          expect_close(got16f, want, {tol, 1e-2}, "grouped_gemm bf16 out");
        }
      }
    }
  }
}

TEST_F(CudaMoe, WgradCombineAndBackwardMatchCpu) {
  const int64_t n = 37, k = 3, e = 9, h = 48, nd = 40;
  Tensor ids = random_ids(n, k, e, 5, true);
  Routed r = permute_cpu(ids, e);
  Tensor go = r.offsets.to(gpu());
  Tensor dy = random_cpu({n * k, nd}, DType::kF32, 6), x = random_cpu({n * k, h}, DType::kF32, 7);
  Tensor dw = random_cpu({e, nd, h}, DType::kF32, 8), gdw = dw.to(gpu());
  ops::grouped_gemm_wgrad(dy, x, r.offsets, dw);
  ops::grouped_gemm_wgrad(dy.to(gpu()), x.to(gpu()), go, gdw);
  expect_close(gdw, dw, {1e-4, 1e-4}, "wgrad");
  for (DType dt : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor y = random_cpu({n * k, h}, dt, 9), weights = random_cpu({n, k}, DType::kF32, 10, 0, 1);
    Tensor shared = random_cpu({n, h}, dt, 11), sl = random_cpu({n, 1}, DType::kF32, 12, -2, 2);
    Tensor out = Tensor::empty({n, h}, dt), gout = Tensor::empty({n, h}, dt, gpu());
    Tensor gy = y.to(gpu()), gdst = r.dst.to(gpu()), gwt = weights.to(gpu()),
           gsh = shared.to(gpu()), gsl = sl.to(gpu());
    ops::moe_combine(y, r.dst, weights, shared, sl, out);
    ops::moe_combine(gy, gdst, gwt, gsh, gsl, gout);
    expect_close(gout, out, test::tol_for(dt), "combine");
    ops::moe_combine(y, r.dst, Tensor(), Tensor(), Tensor(), out);
    ops::moe_combine(gy, gdst, Tensor(), Tensor(), Tensor(), gout);
    expect_close(gout, out, test::tol_for(dt), "combine unweighted");
    Tensor dout = random_cpu({n, h}, dt, 13);
    Tensor dyc = Tensor::empty({n * k, h}, dt), dwc = Tensor::empty({n, k}, DType::kF32),
           dsc = Tensor::empty({n, h}, dt), dslc = Tensor::empty({n, 1}, DType::kF32);
    Tensor dyg = Tensor::empty({n * k, h}, dt, gpu()),
           dwg = Tensor::empty({n, k}, DType::kF32, gpu()), dsg = Tensor::empty({n, h}, dt, gpu()),
           dslg = Tensor::empty({n, 1}, DType::kF32, gpu());
    ops::moe_combine_backward(dout, y, r.dst, weights, shared, sl, dyc, dwc, dsc, dslc);
    ops::moe_combine_backward(dout.to(gpu()), gy, gdst, gwt, gsh, gsl, dyg, dwg, dsg, dslg);
    expect_close(dyg, dyc, test::tol_for(dt), "dy");
    expect_close(dwg, dwc, {1e-4, 1e-4}, "dweights");
    expect_close(dsg, dsc, test::tol_for(dt), "dshared");
    expect_close(dslg, dslc, {1e-4, 1e-4}, "dshared_logit");
  }
}

// The MoE fixtures through the CUDA engine (f32, CUDA graphs on: routing never leaves the
// device) give the CPU engine's greedy tokens in busy mixed batches.
TEST_F(CudaMoe, EngineGreedyEqualsCpuEngineWithGraphs) {
  int n_run = 0;
  for (const char* name : {"qwen3_moe", "mixtral", "qwen2_moe_shared", "qwen3_moe_hub"}) {
    const std::string dir = std::string("fixtures/models/") + name;
    if (!std::filesystem::exists(dir + "/reference.json")) continue;
    SCOPED_TRACE(name);
    std::ifstream f(dir + "/reference.json");
    std::vector<int32_t> base = json::parse(f)["prompt_ids"].get<std::vector<int32_t>>();
    std::vector<Request> reqs;
    for (int len : {1, 3, 24, 7, 16, 17, 2, 11}) {
      Request r;
      for (int i = 0; i < len; ++i)
        r.prompt.push_back(base[static_cast<size_t>((i * 5 + len) % base.size())]);
      r.params.temperature = 0;
      r.params.max_tokens = 10;
      r.params.ignore_eos = true;
      reqs.push_back(r);
    }
    EngineConfig c;
    c.max_ctx = 64;
    c.max_seqs = 8;
    c.max_tokens_per_step = 32;
    c.page_size = 4;
    c.capture_graphs_at_start = true;  // counted below (by default the loop captures them later)
    Engine cpu(Transformer::load(dir), nullptr, c);
    Engine dev(Transformer::load(dir, DType::kF32, gpu()), nullptr, c);
    EXPECT_GT(dev.n_cuda_graphs(), 0u);
    auto a = cpu.generate(reqs);
    auto b = dev.generate(reqs);
    for (size_t i = 0; i < reqs.size(); ++i)
      EXPECT_EQ(a[i].completions[0].tokens, b[i].completions[0].tokens) << "request " << i;
    ++n_run;
  }
  if (n_run == 0) GTEST_SKIP() << "no MoE fixtures (tools/make_moe_fixtures.py)";
}

// Device copy bandwidth (read + write counted) over 1 GiB: the rate HBM moves bytes.
double copy_bytes_per_s() {
  Tensor a = Tensor::zeros({1 << 29}, DType::kBF16, Device::cuda(0));
  Tensor b = Tensor::empty({1 << 29}, DType::kBF16, Device::cuda(0));
  b.copy_(a);
  cuda::synchronize(0);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) b.copy_(a);
  cuda::synchronize(0);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 5;
  return 2.0 * (1 << 29) * 2 / s;
}

// Qwen3-30B-A3B MoE layer (hidden 2048, 128 experts, top-8, expert width 768, bf16): decode at
// batch 1..128 and prefill of 2048 / 8192 tokens. Decode bytes = router + the experts the batch
// actually routes to (counted from the routing) + activations; floor = bytes / HBM bandwidth
// measured by a device copy. Prefill floor = 2 * tokens * k * 3 * H * I FLOPs at 825 TFLOP/s.
TEST_F(CudaMoe, DISABLED_Qwen3MoeLayerBench) {
  json j = {{"model_type", "qwen3_moe"}, {"vocab_size", 1024},
            {"hidden_size", 2048},       {"num_hidden_layers", 1},
            {"intermediate_size", 6144}, {"moe_intermediate_size", 768},
            {"num_attention_heads", 32}, {"num_key_value_heads", 4},
            {"head_dim", 128},           {"num_experts", 128},
            {"num_experts_per_tok", 8},  {"norm_topk_prob", true},
            {"rope_theta", 1e6},         {"max_position_embeddings", 4096}};
  ModelConfig c = ModelConfig::from_json(j);
  Transformer m = Transformer::random(c, DType::kBF16, gpu(), 1, 0.02f);
  const Moe& moe = m.blocks[0].moe;
  const double H = 2048, I = 768, E = 128;
  const double expert_bytes = 3 * H * I * 2;
  const double bw = copy_bytes_per_s();
  std::printf("device copy %.0f GB/s\n", bw / 1e9);
  json results = json::array();
  std::printf("%-8s %7s %9s %10s %12s %10s\n", "case", "tokens", "experts", "us/layer", "achieved",
              "of floor");
  for (int64_t n : {1, 8, 32, 64, 128, 2048, 8192}) {
    Tensor x = random_cpu({n, 2048}, DType::kBF16, 5 + n).to(gpu());
    Tensor out = Tensor::empty({n, 2048}, DType::kBF16, gpu());
    for (int i = 0; i < 3; ++i) moe.forward(x, out);
    cuda::synchronize(0);
    const int reps = n >= 2048 ? 10 : 50;
    auto s0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) moe.forward(x, out);
    cuda::synchronize(0);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count() / reps;
    // Experts the batch routes to (the routing is recomputed on the CPU from the same logits).
    Tensor logits = Tensor::empty({n, 128}, DType::kF32, gpu());
    moe.router.forward(x, logits);
    Tensor w = Tensor::empty({n, 8}, DType::kF32, gpu()),
           ids = Tensor::empty({n, 8}, DType::kI32, gpu());
    ops::moe_route(logits, 8, true, w, ids);
    std::vector<int32_t> v = ids.to(Device::cpu()).to_vector<int32_t>();
    const double active = static_cast<double>(std::set<int32_t>(v.begin(), v.end()).size());
    json row = {{"tokens", n}, {"experts_touched", active}, {"us_per_layer", s * 1e6}};
    if (n <= 128) {
      const double bytes =
          active * expert_bytes + E * H * 2 + n * H * 2 * 2 + n * 8 * (H + 3 * I + H) * 2 * 2;
      const double floor_s = bytes / bw;
      std::printf("%-8s %7lld %9.0f %10.1f %7.0f GB/s %9.1f%%\n", "decode",
                  static_cast<long long>(n), active, s * 1e6, bytes / s / 1e9, floor_s / s * 100);
      row.update({{"case", "decode"},
                  {"bytes", bytes},
                  {"gbps", bytes / s / 1e9},
                  {"floor_ratio", floor_s / s}});
    } else {
      const double flops = 2.0 * n * 8 * 3 * H * I + 2.0 * n * H * E;
      const double floor_s = flops / 825e12;
      std::printf("%-8s %7lld %9.0f %10.1f %7.1f TF/s %9.1f%%\n", "prefill",
                  static_cast<long long>(n), active, s * 1e6, flops / s / 1e12, floor_s / s * 100);
      row.update({{"case", "prefill"}, {"tflops", flops / s / 1e12}, {"floor_ratio", floor_s / s}});
    }
    results.push_back(row);
  }
  if (const char* path = std::getenv("VELA_MOE_BENCH_JSON")) {
    std::ofstream f(path);
    f << json{{"benchmark", "moe_layer"},
              {"shape", "Qwen3-30B-A3B (H 2048, E 128, k 8, I 768), bf16"},
              {"copy_gbps", bw / 1e9},
              {"results", results}}
             .dump(2)
      << "\n";
  }
}

// The 4-layer Qwen3-30B-A3B-shaped stack of bench/configs/qwen3_30b_a3b_4layers.json (real
// vocabulary, bf16) through Transformer::forward_packed with a KV cache (eager, no graphs):
// decode steps at batch 1 and 64 after a 512-token prompt each, and a 2048-token prefill. Decode
// bytes = every non-expert weight + the expected experts a step touches (E * (1 - (1 - k/E)^b)
// per layer, balanced routing) + the KV read; prefill FLOPs count the routed experts only.
TEST_F(CudaMoe, DISABLED_Qwen3MoeStackBench) {
  ModelConfig c = ModelConfig::from_file("../bench/configs/qwen3_30b_a3b_4layers.json");
  Transformer m = Transformer::random(c, DType::kBF16, gpu(), 2, 0.02f);
  const double H = c.hidden_size, I = c.moe_intermediate_size, E = c.n_experts,
               k = c.n_experts_per_tok;
  const double expert_bytes = 3 * H * I * 2;
  const double all_expert_bytes = c.n_layers * E * expert_bytes;
  const double dense_bytes = static_cast<double>(c.n_params()) * 2 - all_expert_bytes;
  const double kv_per_token = 2.0 * c.n_layers * c.n_kv_heads * c.head_dim * 2;
  json results = json::array();
  const double bw = copy_bytes_per_s();
  for (int batch : {1, 64}) {
    const int prompt = 512, steps = 32;
    ContiguousKVCache cache(c, batch, prompt + steps + 8, DType::kBF16, gpu());
    std::vector<int32_t> seqs, lens, ids;
    for (int b = 0; b < batch; ++b) {
      seqs.push_back(b);
      lens.push_back(prompt);
      for (int t = 0; t < prompt; ++t) ids.push_back((b * 131 + t * 17) % 151936);
    }
    PackedStep st = cache.step(seqs, lens);
    m.forward_packed(Tensor::from_vector(ids).to(gpu()), st.positions, st.kv, st.last_indices);
    std::vector<int32_t> one(static_cast<size_t>(batch), 1), tok(static_cast<size_t>(batch), 7);
    Tensor tok_dev = Tensor::from_vector(tok).to(gpu());
    for (int w = 0; w < 2; ++w) {
      PackedStep d = cache.step(seqs, one);
      m.forward_packed(tok_dev, d.positions, d.kv, d.last_indices);
    }
    cuda::synchronize(0);
    auto t0 = std::chrono::steady_clock::now();
    for (int s2 = 0; s2 < steps; ++s2) {
      PackedStep d = cache.step(seqs, one);
      m.forward_packed(tok_dev, d.positions, d.kv, d.last_indices);
    }
    cuda::synchronize(0);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / steps;
    const double touched = E * (1 - std::pow(1 - k / E, batch));
    const double bytes = dense_bytes + c.n_layers * touched * expert_bytes +
                         kv_per_token * (prompt + steps / 2.0) * batch;
    std::printf(
        "stack decode batch %3d: %.3f ms/step, %.0f tok/s, %.0f GB/s (floor %.3f ms at %.0f GB/s: "
        "%.1f%%)\n",
        batch, s * 1e3, batch / s, bytes / s / 1e9, bytes / bw * 1e3, bw / 1e9,
        bytes / bw / s * 100);
    results.push_back({{"case", "decode"},
                       {"batch", batch},
                       {"context", prompt},
                       {"ms_per_step", s * 1e3},
                       {"bytes", bytes},
                       {"gbps", bytes / s / 1e9},
                       {"floor_ratio", bytes / bw / s}});
  }
  for (int n : {2048, 8192}) {
    ContiguousKVCache cache(c, 1, n + 8, DType::kBF16, gpu());
    std::vector<int32_t> ids;
    for (int t = 0; t < n; ++t) ids.push_back((t * 37) % 151936);
    Tensor ids_dev = Tensor::from_vector(ids).to(gpu());
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      cache.reset(0);
      PackedStep st = cache.step({0}, {n});
      cuda::synchronize(0);
      auto t0 = std::chrono::steady_clock::now();
      m.forward_packed(ids_dev, st.positions, st.kv, st.last_indices);
      cuda::synchronize(0);
      best = std::min(best,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    const double flops = 2.0 * c.n_active_params() * n +
                         2.0 * c.n_layers * c.n_heads * c.head_dim * static_cast<double>(n) * n;
    std::printf("stack prefill %5d tokens: %.2f ms, %.0f tok/s, %.1f TFLOP/s (%.1f%% of 825)\n", n,
                best * 1e3, n / best, flops / best / 1e12, flops / best / 825e12 * 100);
    results.push_back({{"case", "prefill"},
                       {"tokens", n},
                       {"ms", best * 1e3},
                       {"tflops", flops / best / 1e12},
                       {"floor_ratio", flops / best / 825e12}});
  }
  if (const char* path = std::getenv("VELA_MOE_STACK_JSON")) {
    std::ofstream f(path);
    f << json{{"benchmark", "moe_stack"},
              {"config", "bench/configs/qwen3_30b_a3b_4layers.json"},
              {"results", results}}
             .dump(2)
      << "\n";
  }
}

}  // namespace
}  // namespace vela
