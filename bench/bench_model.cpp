// `vela bench model`: prefill and batch-1 / batch-B decode throughput of a random model through
// the packed inference path (ContiguousKVCache), against the decode floor = weight bytes / measured
// memory read bandwidth (every decode step streams all weights once, whatever the batch; the KV
// read of a 128-token context is < 1% of it and left out).
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
  double read_gbps =
      measure_read_gbps(std::max<size_t>(static_cast<size_t>(weight_bytes), 64ull << 20), 5);

  std::vector<int32_t> prompt(static_cast<size_t>(n_prompt));
  for (int64_t i = 0; i < n_prompt; ++i) prompt[i] = static_cast<int32_t>((i * 7919) % cfg.vocab_size);
  // Prefill of `b` sequences (one packed step), then (timed apart) n_decode steps of one token
  // each; returns the decode's seconds per step, the median of 3 runs after a warm-up run.
  auto run = [&](int64_t b, bool decode) {
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
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < n_decode; ++s) {
      PackedStep d = cache.step(seqs, ones);
      m.forward_packed(ids, d.positions, d.kv, d.last_indices);
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
           static_cast<double>(n_decode);
  };
  auto decode_step_s = [&](int64_t b) {
    std::vector<double> t;
    for (int rep = 0; rep < 4; ++rep) t.push_back(run(b, true));
    t.erase(t.begin());  // warm-up
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  const double t_prefill = time_median([&] { run(1, false); }, 1, 3);
  const double ms_per_token = decode_step_s(1) * 1e3;
  const double floor_ms = weight_bytes / (read_gbps * 1e9) * 1e3;
  const double ms_per_step_b = batch > 1 ? decode_step_s(batch) * 1e3 : 0.0;

  std::vector<Row> rows;
  rows.push_back({"prefill " + std::to_string(n_prompt) + " tokens", "tok/s", n_prompt / t_prefill,
                  n_prompt / t_prefill, "itself"});
  rows.push_back({"decode B=1 (context " + std::to_string(n_prompt) + ")", "tok/s",
                  1e3 / ms_per_token, 1e3 / floor_ms,
                  "weights " + std::to_string(static_cast<int>(weight_bytes / 1e6)) + " MB / " +
                      std::to_string(static_cast<int>(read_gbps)) + " GB/s read"});
  if (batch > 1)
    rows.push_back({"decode B=" + std::to_string(batch) + " (context " + std::to_string(n_prompt) +
                        ")",
                    "tok/s", batch * 1e3 / ms_per_step_b, batch * 1e3 / floor_ms,
                    "weights once per step"});
  print_rows(rows);
  std::printf("decode %.2f ms/token, floor %.2f ms/token\n", ms_per_token, floor_ms);
  if (batch > 1)
    std::printf("decode B=%lld %.2f ms/step, floor %.2f ms/step\n", static_cast<long long>(batch),
                ms_per_step_b, floor_ms);
  if (!json_path.empty()) {
    json j = {{"benchmark", "model"}, {"params", cfg.n_params()}, {"dtype", dtype_name(dtype)},
              {"results", rows_json(rows)}, {"decode_ms_per_token", ms_per_token},
              {"floor_ms_per_token", floor_ms}, {"batch", batch},
              {"decode_ms_per_step_batch", ms_per_step_b}};
    std::string s = j.dump(2) + "\n";
    write_file_atomic(json_path, s.data(), s.size());
  }
  return 0;
}

}  // namespace vela::cli
