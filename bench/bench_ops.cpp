// `vela bench ops`: op throughput against this machine's measured peaks.
//
// CPU: OpenBLAS sgemm is the GEMM peak (vela's f32 GEMM should match it), a parallel copy is the
// bandwidth peak (RMSNorm and the bf16 decode GEMV should approach it). CUDA: cuBLASLt bf16 GEMM
// against the H200's measured torch figure, RMSNorm over 4 GB against device-to-device copy.
// Prints a table and optionally writes JSON (--json FILE).
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "core/cuda/cuda_api.h"
#include "core/json.h"
#include "core/mmap_file.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "ops/attention.h"
#include "ops/gemm.h"
#include "ops/rms_norm.h"
#if defined(VELA_HAS_CUDA)
#include "ops/cuda/bench_cuda.h"
#endif

namespace vela::cli {
namespace {

std::vector<Row> bench_cpu(bool quick) {
  std::vector<Row> rows;
  const int reps = quick ? 3 : 7;

  // Bandwidth peak: parallel copy (bytes read + written).
  double copy_gbps = measure_copy_gbps((quick ? 64ull : 256ull) << 20, reps);
  size_t bw_bytes = (quick ? 64ull : 256ull) << 20;
  rows.push_back({"copy (memcpy, read+write)", "GB/s", copy_gbps, copy_gbps, "itself"});

  // GEMM peak: raw OpenBLAS sgemm; then vela's gemm on the same problem.
  const int n = quick ? 512 : 1024;
  Tensor a = random_tensor({n, n}, DType::kF32, 1), b = random_tensor({n, n}, DType::kF32, 2);
  Tensor c = Tensor::zeros({n, n}, DType::kF32);
  double flops = 2.0 * n * n * n;
  double t_blas = time_median(
      [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data<float>(), n,
                    b.data<float>(), n, 0.0f, c.data<float>(), n);
      },
      2, reps);
  double blas_gflops = flops / t_blas / 1e9;
  std::string gemm_case = std::to_string(n) + "^3";
  rows.push_back({"OpenBLAS sgemm " + gemm_case, "GF/s", blas_gflops, blas_gflops, "itself"});
  double t_f32 = time_median([&] { ops::gemm(a, b, c); }, 2, reps);
  rows.push_back({"vela gemm f32 " + gemm_case, "GF/s", flops / t_f32 / 1e9, blas_gflops,
                  "OpenBLAS sgemm"});
  Tensor ab = random_tensor({n, n}, DType::kBF16, 1), bb = random_tensor({n, n}, DType::kBF16, 2);
  double t_bf16 = time_median([&] { ops::gemm(ab, bb, c); }, 2, reps);
  rows.push_back({"vela gemm bf16->f32 " + gemm_case, "GF/s", flops / t_bf16 / 1e9, blas_gflops,
                  "OpenBLAS sgemm"});
  // The inference form: bf16 activations times a bf16 [N, K] weight transposed (prefill's GEMMs).
  double t_wt = time_median([&] { ops::gemm(ab, bb, c, false, true); }, 2, reps);
  rows.push_back({"vela gemm bf16 a @ w^T " + gemm_case, "GF/s", flops / t_wt / 1e9, blas_gflops,
                  "OpenBLAS sgemm"});

  // Decode GEMV: one token through bf16 [m x 4096] weights, bandwidth-bound. The weights rotate
  // over 256 MiB so they stream from memory, not from the caches.
  const int k = 4096, m = quick ? 2048 : 4096;
  const int n_w = static_cast<int>((256ull << 20) / (2ull * m * k));
  double read_gbps = measure_read_gbps((quick ? 128ull : 512ull) << 20, reps);
  rows.push_back({"memory read (parallel sum)", "GB/s", read_gbps, read_gbps, "itself"});
  Tensor x = random_tensor({1, k}, DType::kBF16, 3);
  std::vector<Tensor> ws;
  for (int i = 0; i < n_w; ++i) ws.push_back(random_tensor({m, k}, DType::kBF16, 4 + i));
  Tensor y = Tensor::zeros({1, m}, DType::kF32);
  int w_idx = 0;
  double t_gemv = time_median([&] { ops::gemm(x, ws[w_idx++ % n_w], y, false, true); }, n_w, reps * 3);
  double gemv_bytes = 2.0 * m * k;
  rows.push_back({"gemv bf16 weight [" + std::to_string(m) + "x4096] (read)", "GB/s",
                  gemv_bytes / t_gemv / 1e9, read_gbps, "memory read bandwidth"});
  // Batched decode (8 rows, B = 8) over the same streamed weights, and over the 100m model's
  // gate|up ([4096, 768], 6 MB, from the caches as a small model's layers are): 8 multiply-adds a
  // weight byte, so on a CPU of a few cores the multiply-adds bound it, not the read: GF/s
  // against sgemm.
  Tensor x8 = random_tensor({8, k}, DType::kBF16, 3);
  Tensor y8 = Tensor::zeros({8, m}, DType::kF32);
  double t_b8 =
      time_median([&] { ops::gemm(x8, ws[w_idx++ % n_w], y8, false, true); }, n_w, reps * 3);
  rows.push_back({"gemm bf16 8 rows @ w^T [" + std::to_string(m) + "x4096]", "GF/s",
                  2.0 * 8 * m * k / t_b8 / 1e9, blas_gflops, "OpenBLAS sgemm"});
  {
    const int64_t kh = 768, nf = 4096;
    Tensor xs = random_tensor({8, kh}, DType::kBF16, 11),
           wf = random_tensor({nf, kh}, DType::kBF16, 12);
    Tensor ys = Tensor::zeros({8, nf}, DType::kBF16);
    double t = time_median([&] { ops::gemm(xs, wf, ys, false, true); }, 8, reps * 3);
    rows.push_back({"gemm bf16 8 rows @ w^T [4096x768]", "GF/s", 2.0 * 8 * nf * kh / t / 1e9,
                    blas_gflops, "OpenBLAS sgemm"});
  }

  // RMSNorm over 256 MiB of f32 rows (read x + write out).
  const int64_t hidden = 4096, n_rows = static_cast<int64_t>(bw_bytes / 4 / hidden);
  Tensor xn = random_tensor({n_rows, hidden}, DType::kF32, 5), wn = random_tensor({hidden}, DType::kF32, 6);
  Tensor out = Tensor::empty({n_rows, hidden}, DType::kF32);
  double t_norm = time_median([&] { ops::rms_norm(xn, wn, 1e-5f, out); }, 2, reps);
  rows.push_back({"rms_norm f32 [" + std::to_string(n_rows) + "x4096]", "GB/s",
                  2.0 * xn.nbytes() / t_norm / 1e9, copy_gbps, "copy bandwidth"});

  // Decode attention over the paged bf16 cache: one query per sequence (12 q heads over 4 KV
  // heads, head_dim 64, 100m's shape), 8 sequences of 8192 keys each (a 64 MiB cache, so it
  // streams from memory), their pages of 16 slots in order and shuffled (as a long-running cache
  // holds them); GB/s of K and V read.
  for (const bool shuffled : {false, true}) {
    const int64_t n_seq = 8, ctx = quick ? 2048 : 8192, n_kv = 4, n_heads = 12, d = 64;
    const int64_t n_slots = n_seq * ctx;
    Tensor kc = random_tensor({n_slots, n_kv, d}, DType::kBF16, 7);
    Tensor vc = random_tensor({n_slots, n_kv, d}, DType::kBF16, 8);
    Tensor q = random_tensor({n_seq, n_heads, d}, DType::kBF16, 9);
    std::vector<int32_t> slots(static_cast<size_t>(n_slots));
    for (int64_t i = 0; i < n_slots; ++i) slots[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    Rng shuffle(10);
    for (int64_t p = shuffled ? n_slots / 16 - 1 : 0; p > 0; --p) {
      const int64_t o = static_cast<int64_t>(shuffle.next_u32() % static_cast<uint32_t>(p + 1));
      std::swap_ranges(slots.begin() + p * 16, slots.begin() + p * 16 + 16, slots.begin() + o * 16);
    }
    Tensor table = Tensor::from_vector(slots, {n_seq, ctx});
    std::vector<int32_t> rows_v(static_cast<size_t>(n_seq)),
        lens_v(rows_v.size(), static_cast<int32_t>(ctx)), qo_v(rows_v.size() + 1);
    for (int64_t s = 0; s < n_seq; ++s) rows_v[static_cast<size_t>(s)] = static_cast<int32_t>(s);
    for (int64_t s = 0; s <= n_seq; ++s) qo_v[static_cast<size_t>(s)] = static_cast<int32_t>(s);
    Tensor rows_t = Tensor::from_vector(rows_v), lens = Tensor::from_vector(lens_v),
           qo = Tensor::from_vector(qo_v);
    Tensor o = Tensor::empty({n_seq, n_heads, d}, DType::kBF16);
    const double t_attn = time_median(
        [&] { ops::paged_attention(q, kc, vc, table, rows_t, lens, qo, 0.125f, o); }, 2, reps);
    rows.push_back({std::string("decode attention bf16 8 x ") + std::to_string(ctx) +
                        (shuffled ? " keys, pages shuffled" : " keys, pages in order"),
                    "GB/s", static_cast<double>(kc.nbytes() + vc.nbytes()) / t_attn / 1e9,
                    read_gbps, "memory read bandwidth"});
  }
  // Prefill attention: one sequence's T query tokens (a prompt) against its own keys, causal, the
  // same heads over the paged bf16 cache; GF/s of the causal multiply-adds (QK^T and P @ V), its
  // work being fp32 FMAs, against OpenBLAS's sgemm rate.
  {
    const int64_t t_len = quick ? 512 : 1024, n_kv = 4, n_heads = 12, d = 64;
    Tensor kc = random_tensor({t_len, n_kv, d}, DType::kBF16, 11);
    Tensor vc = random_tensor({t_len, n_kv, d}, DType::kBF16, 12);
    Tensor q = random_tensor({t_len, n_heads, d}, DType::kBF16, 13);
    std::vector<int32_t> slots(static_cast<size_t>(t_len));
    for (int64_t i = 0; i < t_len; ++i) slots[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    Tensor table = Tensor::from_vector(slots, {1, t_len});
    Tensor rows_t = Tensor::from_vector(std::vector<int32_t>{0});
    Tensor lens = Tensor::from_vector(std::vector<int32_t>{static_cast<int32_t>(t_len)});
    Tensor qo = Tensor::from_vector(std::vector<int32_t>{0, static_cast<int32_t>(t_len)});
    Tensor o = Tensor::empty({t_len, n_heads, d}, DType::kBF16);
    const double t_pre = time_median(
        [&] { ops::paged_attention(q, kc, vc, table, rows_t, lens, qo, 0.125f, o); }, 2, reps);
    const double pairs = static_cast<double>(t_len) * static_cast<double>(t_len + 1) / 2.0;
    const double flops = 2.0 * 2.0 * static_cast<double>(n_heads * d) * pairs;
    rows.push_back({"prefill attention bf16 " + std::to_string(t_len) + " tokens, causal", "GF/s",
                    flops / t_pre / 1e9, blas_gflops, "OpenBLAS sgemm"});
  }
  return rows;
}

#if defined(VELA_HAS_CUDA)
std::vector<Row> bench_cuda(bool quick) {
  std::vector<Row> rows;
  size_t copy_bytes = (quick ? 1ull : 4ull) << 30;
  double copy_gbps = ops::cuda::bench_copy_gbps(copy_bytes);
  rows.push_back({"cuda copy D2D (read+write)", "GB/s", copy_gbps, copy_gbps, "itself"});
  const int n = quick ? 4096 : 8192;
  double tflops = ops::cuda::bench_gemm_tflops(n, n, n, DType::kBF16);
  rows.push_back({"cuBLASLt gemm bf16 " + std::to_string(n) + "^3", "TF/s", tflops, 800.0,
                  "torch on this H200 (790-825)"});
  const int64_t hidden = 4096, n_rows = static_cast<int64_t>((quick ? 1ull : 4ull << 30) / 2 / hidden);
  for (DType dt : {DType::kBF16, DType::kF32}) {
    int64_t rows_dt = dt == DType::kF32 ? n_rows / 2 : n_rows;
    double gbps = ops::cuda::bench_rms_norm_gbps(rows_dt, hidden, dt);
    rows.push_back({std::string("cuda rms_norm ") + dtype_name(dt) + " [" + std::to_string(rows_dt) +
                        "x4096]",
                    "GB/s", gbps, copy_gbps, "D2D copy"});
  }
  return rows;
}
#endif

}  // namespace

int cmd_bench(int argc, char** argv) {
  if (argc < 1 || !std::strcmp(argv[0], "--help")) {
    std::printf(
        "usage: vela bench ops [--device cpu|cuda|all] [--quick] [--json FILE]\n"
        "       vela bench model [--device cpu] [--preset 100m|bench-1b | --config FILE] ...\n"
        "       vela bench engine [--device cuda|cpu] [--preset bench-1b|100m] [--cases ...] ...\n"
        "       vela bench serve [--url URL] [--concurrency N | --request-rate R] ... (--help)\n"
        "       vela bench spec --model DIR [--device cuda|cpu] [--settings 'ngram,k=4'] ...\n"
        "       vela bench sampler [--device cpu|cuda] [--vocab N] [--rows 1,16] ...\n"
        "       vela bench constrain [--tokenizer DIR] [--schemas DIR] [--steps N] [--json FILE]\n"
        "       vela bench stream [--mb N] [--filter TEXT] [--chunks N] [--json FILE]   (CUDA)\n"
        "  Times GEMM, a bandwidth-bound op and the decode GEMV against this machine's\n"
        "  measured peaks (OpenBLAS sgemm, memory copy; cuBLASLt and D2D copy on CUDA).\n");
    return argc < 1 ? 1 : 0;
  }
  std::string what = argv[0];
  if (what == "model") return bench_model_main(argc - 1, argv + 1);
  if (what == "engine") return bench_engine_main(argc - 1, argv + 1);
  if (what == "serve") return bench_serve_main(argc - 1, argv + 1);
  if (what == "spec") return bench_spec_main(argc - 1, argv + 1);
  if (what == "sampler") return bench_sampler_main(argc - 1, argv + 1);
  if (what == "constrain") return bench_constrain_main(argc - 1, argv + 1);
  if (what == "stream") return bench_stream_main(argc - 1, argv + 1);
  VELA_CHECK(what == "ops", "unknown benchmark '", what,
             "' (available: ops, model, engine, serve, spec, sampler, constrain, stream)");
  Args args(argc - 1, argv + 1, {"quick"});
  std::string device = args.get("device", cuda::available() ? "all" : "cpu");
  bool quick = args.has("quick");
  std::string json_path = args.get("json", "");
  args.check_all_used();
  VELA_CHECK(device == "cpu" || device == "cuda" || device == "all", "--device must be cpu, cuda or all");

  json j;
  j["benchmark"] = "ops";
  std::vector<Row> rows;
  if (device != "cuda") {
    std::printf("CPU (%d threads)\n", num_threads());
    auto r = bench_cpu(quick);
    print_rows(r);
    rows.insert(rows.end(), r.begin(), r.end());
  }
  if (device != "cpu") {
#if defined(VELA_HAS_CUDA)
    VELA_CHECK_T(Unsupported, cuda::available(), "no usable CUDA device");
    std::printf("\nCUDA (%s)\n", cuda::device_description(0).c_str());
    auto r = bench_cuda(quick);
    print_rows(r);
    rows.insert(rows.end(), r.begin(), r.end());
#else
    VELA_THROW(Unsupported, "this build has no CUDA backend");
#endif
  }
  j["results"] = rows_json(rows);
  if (!json_path.empty()) {
    std::string s = j.dump(2) + "\n";
    write_file_atomic(json_path, s.data(), s.size());
  }
  return 0;
}

}  // namespace vela::cli
