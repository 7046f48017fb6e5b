// `vela bench model`: prefill and batch-1 decode throughput of a random model through the packed
// inference path (ContiguousKVCache), against the decode floor = weight bytes / measured memory
// read bandwidth (every decode step streams all weights once).
#include <cstdio>
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
        "                        [--dtype bf16|f32] [--prompt N] [--decode N] [--json FILE]\n");
    return 0;
  }
  Device device = Device::parse(args.get("device", "cpu"));
  std::string config_path = args.get("config", "");
  std::string preset_name = args.get("preset", "100m");
  DType dtype = parse_dtype(args.get("dtype", "bf16"));
  int64_t n_prompt = args.get_int("prompt", 128), n_decode = args.get_int("decode", 32);
  std::string json_path = args.get("json", "");
  args.check_all_used();
  VELA_CHECK_T(Unsupported, device.is_cpu(),
               "bench model on CUDA arrives with the CUDA engine (use --device cpu)");
  VELA_CHECK(n_prompt > 0 && n_decode > 0, "--prompt and --decode must be positive");

  ModelConfig cfg = config_path.empty() ? ModelConfig::from_json(model_preset(preset_name), preset_name)
                                        : ModelConfig::from_file(config_path);
  std::printf("model %s: %.1fM params, %s, %d threads\n",
              config_path.empty() ? preset_name.c_str() : config_path.c_str(),
              cfg.n_params() / 1e6, dtype_name(dtype), num_threads());
  Transformer m = Transformer::random(cfg, dtype, device, /*seed=*/1);
  double weight_bytes = static_cast<double>(cfg.n_params()) * dtype_size(dtype);
  double read_gbps = measure_read_gbps(512ull << 20, 5);

  std::vector<int32_t> prompt(static_cast<size_t>(n_prompt));
  for (int64_t i = 0; i < n_prompt; ++i) prompt[i] = static_cast<int32_t>((i * 7919) % cfg.vocab_size);
  auto run = [&](bool decode) {
    ContiguousKVCache cache(cfg, 1, n_prompt + n_decode + 1, dtype, device);
    PackedStep st = cache.step({0}, {static_cast<int32_t>(n_prompt)});
    m.forward_packed(Tensor::from_vector(prompt), st.positions, st.kv, st.last_indices);
    if (!decode) return;
    Tensor ids = Tensor::from_vector(std::vector<int32_t>{1});
    for (int64_t s = 0; s < n_decode; ++s) {
      PackedStep d = cache.step({0}, {1});
      m.forward_packed(ids, d.positions, d.kv, d.last_indices);
    }
  };
  double t_prefill = time_median([&] { run(false); }, 1, 3);
  double t_total = time_median([&] { run(true); }, 1, 3);
  double ms_per_token = (t_total - t_prefill) / n_decode * 1e3;
  double floor_ms = weight_bytes / (read_gbps * 1e9) * 1e3;

  std::vector<Row> rows;
  rows.push_back({"prefill " + std::to_string(n_prompt) + " tokens", "tok/s", n_prompt / t_prefill,
                  n_prompt / t_prefill, "itself"});
  rows.push_back({"decode B=1 (context " + std::to_string(n_prompt) + ")", "tok/s",
                  1e3 / ms_per_token, 1e3 / floor_ms,
                  "weights " + std::to_string(static_cast<int>(weight_bytes / 1e6)) + " MB / " +
                      std::to_string(static_cast<int>(read_gbps)) + " GB/s read"});
  print_rows(rows);
  std::printf("decode %.2f ms/token, floor %.2f ms/token\n", ms_per_token, floor_ms);
  if (!json_path.empty()) {
    json j = {{"benchmark", "model"}, {"params", cfg.n_params()}, {"dtype", dtype_name(dtype)},
              {"results", rows_json(rows)}, {"decode_ms_per_token", ms_per_token},
              {"floor_ms_per_token", floor_ms}};
    std::string s = j.dump(2) + "\n";
    write_file_atomic(json_path, s.data(), s.size());
  }
  return 0;
}

}  // namespace vela::cli
