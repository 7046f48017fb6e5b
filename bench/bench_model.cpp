// `vela bench model`: prefill and batch-1 / batch-B decode throughput of a random model through
// the packed inference path (ContiguousKVCache), against the decode floor = weight bytes / measured
// memory read bandwidth (every decode step streams all weights once, whatever the batch; the KV
// read of a 128-token context is < 1% of it and left out), or the step's multiply-adds at the
// CPU's measured peak where that is longer (batched decode on few cores). The bandwidth is measured
// right before and after each timed decode run, and each run is compared with its own floor: a
// shared VM's read bandwidth drifts (22-52 GB/s on the 2-vCPU development machine within minutes),
// so a floor measured once, before all runs, made the ratio swing by +-20%.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
#include <fstream>

#include "bench/bench_util.h"
#include "cli/args.h"
#include "model/model_presets.h"
#include "core/mmap_file.h"
#include "core/parallel.h"
#include "model/contiguous_kv_cache.h"
#include "model/transformer.h"

namespace vela::cli {

int bench_model_main(int argc, char** argv) {
  Args args(argc, argv, {"help"});
  if (args.has("help")) {
    std::printf(
        "usage: vela bench model [--device cpu] [--preset 100m|bench-1b | --config FILE]\n"
        "                        [--dtype bf16|f32] [--prompt N] [--decode N] [--batch B]\n"
        "                        [--json FILE]\n"
        "  decode B=1 and B=--batch (default 8) sequences per step, each after a --prompt prefill\n");
    return 0;
  }
  Device device = Device::parse(args.get("device", "cpu"));
  std::string config_path = args.get("config", "");
  std::string preset_name = args.get("preset", "100m");
  DType dtype = parse_dtype(args.get("dtype", "bf16"));
  int64_t n_prompt = args.get_int("prompt", 128), n_decode = args.get_int("decode", 32);
  const int64_t batch = args.get_int("batch", 8);
  std::string json_path = args.get("json", "");
  args.check_all_used();
  VELA_CHECK_T(Unsupported, device.is_cpu(),
               "bench model on CUDA arrives with the CUDA engine (use --device cpu)");
  VELA_CHECK(n_prompt > 0 && n_decode > 0, "--prompt and --decode must be positive");
  VELA_CHECK(batch >= 1 && batch <= 256, "--batch must be in [1, 256], got ", batch);

  ModelConfig cfg = config_path.empty() ? ModelConfig::from_json(model_preset(preset_name), preset_name)
                                        : ModelConfig::from_file(config_path);
  std::printf("model %s: %.1fM params, %s, %d threads\n",
              config_path.empty() ? preset_name.c_str() : config_path.c_str(),
              cfg.n_params() / 1e6, dtype_name(dtype), num_threads());
  Transformer m = Transformer::random(cfg, dtype, device, /*seed=*/1);
  double weight_bytes = static_cast<double>(cfg.n_params()) * dtype_size(dtype);
  // Read bandwidth over a buffer the size of the weights: the same working set against the same
  // caches as a decode step (a larger buffer under-states the floor where caches hold part of it).
  const size_t probe_bytes = std::max<size_t>(static_cast<size_t>(weight_bytes), 64ull << 20);

  std::vector<int32_t> prompt(static_cast<size_t>(n_prompt));
  for (int64_t i = 0; i < n_prompt; ++i) prompt[i] = static_cast<int32_t>((i * 7919) % cfg.vocab_size);
  // Prefill of `b` sequences (one packed step), then (timed apart) n_decode steps of one token
  // each; returns this run's seconds per decode step. With `gbps`, the read bandwidth is probed
  // right before and after the timed decode steps and their mean stored there.
  auto run = [&](int64_t b, bool decode, double* gbps = nullptr) {
    ContiguousKVCache cache(cfg, b, n_prompt + n_decode + 1, dtype, device);
    std::vector<int32_t> seqs(static_cast<size_t>(b)), ones(static_cast<size_t>(b), 1);
    std::vector<int32_t> packed;
    for (int64_t i = 0; i < b; ++i) {
      seqs[i] = static_cast<int32_t>(i);
      packed.insert(packed.end(), prompt.begin(), prompt.end());
    }
    PackedStep st = cache.step(seqs, std::vector<int32_t>(b, static_cast<int32_t>(n_prompt)));
    m.forward_packed(Tensor::from_vector(packed), st.positions, st.kv, st.last_indices);
    if (!decode) return 0.0;
    Tensor ids = Tensor::from_vector(ones);
    const double before = gbps != nullptr ? measure_read_gbps(probe_bytes, 3) : 0.0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < n_decode; ++s) {
      PackedStep d = cache.step(seqs, ones);
      m.forward_packed(ids, d.positions, d.kv, d.last_indices);
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (gbps != nullptr) *gbps = 0.5 * (before + measure_read_gbps(probe_bytes, 3));
    return seconds / static_cast<double>(n_decode);
  };
  // Three timed decode runs after a warm-up, each between two bandwidth probes (their mean is the
  // run's bandwidth); the run whose step time is the median share of its floor is reported.
  // A step's floor is the larger of the weights' read and its multiply-adds at the CPU's measured
  // peak (the matmul weights once a token; attention's few left out). On the 2-core avx512_bf16
  // development VM both B = 1 and B = 8 of the 100m model are read-bound (B = 8: 3.4 ms of
  // multiply-adds at 235 GMAC/s against 3.3-6.5 ms of read); fewer cores or a larger batch are not.
  const double macs_per_token = static_cast<double>(
      cfg.n_params() - (cfg.tie_word_embeddings ? 0 : cfg.vocab_size * cfg.hidden_size));
  const double dot_gmacs = measure_dot_gmacs(dtype);
  struct Decode {
    double ms = 0.0, read_gbps = 0.0, floor_ms = 0.0;
    bool compute_bound = false;  // the floor is the multiply-adds, not the read
    std::vector<double> ratios;  // floor / step of each run, in run order
  };
  auto decode_runs = [&](int64_t b) {
    run(b, true);  // warm-up
    std::vector<Decode> runs;
    const double compute_ms = dot_gmacs > 0.0 ? b * macs_per_token / (dot_gmacs * 1e9) * 1e3 : 0.0;
    for (int rep = 0; rep < 3; ++rep) {
      double gbps = 0.0;
      const double ms = run(b, true, &gbps) * 1e3;
      const double read_ms = weight_bytes / (gbps * 1e9) * 1e3;
      runs.push_back({ms, gbps, std::max(read_ms, compute_ms), compute_ms > read_ms, {}});
    }
    Decode out;
    for (const Decode& r : runs) out.ratios.push_back(r.floor_ms / r.ms);
    std::vector<Decode> by_ratio = runs;
    std::sort(by_ratio.begin(), by_ratio.end(), [](const Decode& x, const Decode& y) {
      return x.floor_ms / x.ms < y.floor_ms / y.ms;
    });
    const Decode& med = by_ratio[by_ratio.size() / 2];
    out.ms = med.ms;
    out.read_gbps = med.read_gbps;
    out.floor_ms = med.floor_ms;
    out.compute_bound = med.compute_bound;
    return out;
  };
  const double t_prefill = time_median([&] { run(1, false); }, 1, 3);
  const Decode one = decode_runs(1);
  const double ms_per_token = one.ms, floor_ms = one.floor_ms, read_gbps = one.read_gbps;
  const Decode many = batch > 1 ? decode_runs(batch) : Decode{};
  const double ms_per_step_b = many.ms;

  // What bounds a decode row: the weights' read at the measured bandwidth, or B tokens' multiply-
  // adds at the measured peak.
  auto floor_name = [&](const Decode& d, int64_t b) {
    if (d.compute_bound)
      return std::to_string(b) + " x " + std::to_string(static_cast<int>(macs_per_token / 1e6)) +
             "M MACs / " + std::to_string(static_cast<int>(dot_gmacs)) + " GMAC/s";
    return "weights " + std::to_string(static_cast<int>(weight_bytes / 1e6)) + " MB / " +
           std::to_string(static_cast<int>(d.read_gbps)) + " GB/s read";
  };
  std::vector<Row> rows;
  rows.push_back({"prefill " + std::to_string(n_prompt) + " tokens", "tok/s", n_prompt / t_prefill,
                  n_prompt / t_prefill, "itself"});
  rows.push_back({"decode B=1 (context " + std::to_string(n_prompt) + ")", "tok/s",
                  1e3 / ms_per_token, 1e3 / floor_ms, floor_name(one, 1)});
  if (batch > 1)
    rows.push_back(
        {"decode B=" + std::to_string(batch) + " (context " + std::to_string(n_prompt) + ")",
         "tok/s", batch * 1e3 / ms_per_step_b, batch * 1e3 / many.floor_ms,
         floor_name(many, batch)});
  print_rows(rows);
  auto percents = [](const std::vector<double>& r) {
    std::string s;
    for (double v : r) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%s%.1f%%", s.empty() ? "" : " / ", 100.0 * v);
      s += buf;
    }
    return s;
  };
  if (dot_gmacs > 0.0)
    std::printf("multiply-add peak %.0f GMAC/s (%s), %.0fM MACs a token\n", dot_gmacs,
                dtype == DType::kBF16 ? "vdpbf16ps" : "fp32 FMA", macs_per_token / 1e6);
  std::printf("decode %.2f ms/token, floor %.2f ms/token (runs at %s of their floors)\n",
              ms_per_token, floor_ms, percents(one.ratios).c_str());
  if (batch > 1)
    std::printf("decode B=%lld %.2f ms/step, floor %.2f ms/step (runs at %s of their floors)\n",
                static_cast<long long>(batch), ms_per_step_b, many.floor_ms,
                percents(many.ratios).c_str());
  if (!json_path.empty()) {
    json j = {{"benchmark", "model"},
              {"params", cfg.n_params()},
              {"dtype", dtype_name(dtype)},
              {"results", rows_json(rows)},
              {"decode_ms_per_token", ms_per_token},
              {"floor_ms_per_token", floor_ms},
              {"read_gbps", read_gbps},
              {"dot_gmacs", dot_gmacs},
              {"macs_per_token", macs_per_token},
              {"floor_ratios", one.ratios},
              {"batch", batch},
              {"decode_ms_per_step_batch", ms_per_step_b},
              {"floor_ms_per_step_batch", many.floor_ms},
              {"read_gbps_batch", many.read_gbps},
              {"floor_ratios_batch", many.ratios}};
    std::string s = j.dump(2) + "\n";
    write_file_atomic(json_path, s.data(), s.size());
  }
  return 0;
}

}  // namespace vela::cli
