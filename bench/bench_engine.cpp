// `vela bench engine`: the inference engine end to end (scheduler + executor + sampler, CUDA
// graphs on CUDA) on a random model — decode at batch 1 for long contexts, decode at a large
// batch, and one long prefill — each next to its floor: decode streams the weights plus the live
// KV once per step (bytes / measured device copy bandwidth), prefill is bound by tensor-core FLOPs.
#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <unistd.h>

#include "bench/bench_util.h"
#include "cli/args.h"
#include "model/model_presets.h"
#include "core/cuda/cuda_api.h"
#include "core/mmap_file.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "engine/constrain/grammar_compiler.h"
#include "engine/engine.h"
#include "model/lora_adapter.h"
#include "tokenizer/tokenizer.h"
#ifdef VELA_HAS_CUDA
#include "ops/cuda/bench_cuda.h"
#endif

namespace vela::cli {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<int32_t> random_prompt(int64_t n, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    p[static_cast<size_t>(i)] = static_cast<int32_t>(philox_u32(seed, 7, static_cast<uint64_t>(i)) % vocab);
  return p;
}

struct Timeline {
  std::vector<std::pair<double, int>> events;  // (seconds since start, tokens)
  double first() const { return events.empty() ? 0 : events.front().first; }
  double last() const { return events.empty() ? 0 : events.back().first; }
};

// Submits `batch` requests and records every token event's time; returns one timeline each.
std::vector<Timeline> run_requests(Engine& engine, const std::vector<Request>& reqs, Clock::time_point t0) {
  std::vector<RequestHandlePtr> handles;
  for (const Request& r : reqs) {
    RequestHandlePtr h = engine.submit(r);
    VELA_CHECK(h != nullptr, "bench: the engine's queue is full");
    handles.push_back(h);
  }
  std::vector<Timeline> out(handles.size());
  std::vector<std::thread> readers;
  for (size_t i = 0; i < handles.size(); ++i) {
    readers.emplace_back([&, i] {
      StreamEvent ev;
      while (handles[i]->next(ev)) {
        double t = std::chrono::duration<double>(Clock::now() - t0).count();
        if (!ev.tokens.empty()) out[i].events.emplace_back(t, static_cast<int>(ev.tokens.size()));
      }
    });
  }
  for (auto& r : readers) r.join();
  return out;
}

struct Case {
  std::string name;
  int batch;
  int64_t context;  // prompt tokens (decode cases) or prefill length
  bool prefill;
  bool constrained = false;  // every request under bench_schema() (batch64_json)
};

// batch64_json's schema: a list of objects with free strings and integers (greedy decoding of a
// random model stays mostly inside strings: the dense-mask steady state of a JSON request).
const char* bench_schema() {
  return R"({"type":"object","properties":{"items":{"type":"array","items":{"type":"object",
    "properties":{"name":{"type":"string"},"qty":{"type":"integer"},"tags":{"type":"array",
    "items":{"type":"string"}}},"required":["name","qty","tags"],"additionalProperties":false}}},
    "required":["items"],"additionalProperties":false})";
}

// The vocabulary batch64_json masks: the tokenizer's (--tokenizer DIR) or a synthetic byte-level
// one of the model's size (256 single bytes, then deterministic pseudo-words of 2-10 printable
// bytes, a third with a leading space; the last id is the end token).
std::shared_ptr<const constrain::TokenVocab> bench_vocab(const std::string& tokenizer_dir,
                                                         int64_t vocab_size) {
  if (!tokenizer_dir.empty()) {
    Tokenizer tok = Tokenizer::from_file(tokenizer_dir);
    std::vector<int32_t> ends;
    for (const char* e : {"<|im_end|>", "<|endoftext|>", "</s>"})
      if (auto id = tok.token_to_id(e); id && *id < vocab_size) ends.push_back(*id);
    return constrain::TokenVocab::from_tokenizer(tok, vocab_size, ends);
  }
  std::vector<std::string> t(static_cast<size_t>(vocab_size));
  for (int64_t i = 0; i < vocab_size - 1; ++i) {
    if (i < 256) {
      t[static_cast<size_t>(i)] = std::string(1, static_cast<char>(i));
      continue;
    }
    const uint32_t r = philox_u32(99, 1, static_cast<uint64_t>(i));
    std::string w = r % 3 == 0 ? " " : "";
    const int len = 2 + static_cast<int>(r / 3 % 9);
    for (int k = 0; k < len; ++k)
      w += static_cast<char>(33 + philox_u32(99, 2 + static_cast<uint64_t>(k), static_cast<uint64_t>(i)) % 94);
    t[static_cast<size_t>(i)] = w;
  }
  return std::make_shared<constrain::TokenVocab>(std::move(t),
                                                 std::vector<int32_t>{static_cast<int32_t>(vocab_size - 1)});
}

// Writes n random PEFT adapters of rank r on every linear module under dir/adapter-<i> (f32
// files; A uniform in +-1/sqrt(in), B in +-0.02, so each adapter moves the logits) and returns
// their (name, dir) pairs for attach_lora_adapters.
std::vector<std::pair<std::string, std::string>> write_random_adapters(const ModelConfig& mc,
                                                                       int64_t n, int64_t r,
                                                                       const std::string& dir) {
  struct Module {
    const char* path;
    int64_t in, out;
  };
  const int64_t h = mc.hidden_size, q = mc.n_heads * mc.head_dim, kv = mc.n_kv_heads * mc.head_dim;
  const int64_t inter = mc.intermediate_size;
  const Module modules[] = {{"self_attn.q_proj", h, q},       {"self_attn.k_proj", h, kv},
                            {"self_attn.v_proj", h, kv},      {"self_attn.o_proj", q, h},
                            {"mlp.gate_proj", h, inter},      {"mlp.up_proj", h, inter},
                            {"mlp.down_proj", inter, h}};
  auto random = [](int64_t rows, int64_t cols, float bound, uint64_t seed) {
    Tensor t = Tensor::empty({rows, cols}, DType::kF32);
    float* p = t.data<float>();
    for (int64_t i = 0; i < rows * cols; ++i)
      p[i] = (2.0f * philox_uniform(seed, 11, static_cast<uint64_t>(i)) - 1.0f) * bound;
    return t;
  };
  LoraConfig cfg;
  cfg.r = r;
  cfg.alpha = static_cast<double>(2 * r);
  cfg.target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  std::vector<std::pair<std::string, std::string>> out;
  for (int64_t a = 0; a < n; ++a) {
    const std::string name = "adapter-" + std::to_string(a), d = dir + "/" + name;
    std::filesystem::create_directories(d);
    std::vector<std::pair<std::string, Tensor>> tensors;
    uint64_t seed = 1000 * static_cast<uint64_t>(a + 1);
    for (int64_t l = 0; l < mc.n_layers; ++l)
      for (const Module& m : modules) {
        const std::string base = "base_model.model.model.layers." + std::to_string(l) + "." + m.path;
        tensors.emplace_back(base + ".lora_A.weight",
                             random(r, m.in, 1.0f / std::sqrt(static_cast<float>(m.in)), ++seed));
        tensors.emplace_back(base + ".lora_B.weight", random(m.out, r, 0.02f, ++seed));
      }
    save_safetensors(d + "/adapter_model.safetensors", tensors);
    std::ofstream(d + "/adapter_config.json") << cfg.to_peft_json("vela-bench").dump(2) << "\n";
    out.emplace_back(name, d);
  }
  return out;
}

}  // namespace

int bench_engine_main(int argc, char** argv) {
  Args args(argc, argv, {"help", "no-graphs"});
  if (args.has("help")) {
    std::printf(
        "usage: vela bench engine [--device cuda|cpu] [--preset bench-1b|100m | --config FILE]\n"
        "                         [--dtype bf16|f32] [--decode N] [--cases LIST] [--no-graphs]\n"
        "                         [--json FILE] [--kv-pages N | --kv-memory-fraction F]\n"
        "                         [--vocab-size N] [--tokenizer DIR] [--lora N] [--lora-rank R]\n"
        "  cases (comma list; default decode1k,decode8k,decode32k,batch64,prefill8k), also:\n"
        "  prefill256, prefill512 (one eager step of that many tokens, a serving mixed step's size),\n"
        "  batch64_json\n"
        "  (batch64 with every request under a JSON schema; masks from --tokenizer's vocabulary or\n"
        "  a synthetic one), batch2 / batch4 / batch8 / batch16 / batch32 (that many rows at 1024\n"
        "  context: the small-batch GEMMs)\n"
        "  --lora N: N random rank-R (default 16) adapters on every linear module, served together\n"
        "  (request i uses adapter i mod N): the multi-LoRA cost next to a run without --lora\n");
    return 0;
  }
  Device device = Device::parse(args.get("device", cuda::available() ? "cuda" : "cpu"));
  std::string config_path = args.get("config", "");
  std::string preset_name = args.get("preset", device.is_cuda() ? "bench-1b" : "100m");
  DType dtype = parse_dtype(args.get("dtype", "bf16"));
  int64_t n_decode = args.get_int("decode", 128);
  std::string cases_arg = args.get("cases", "decode1k,decode8k,decode32k,batch64,prefill8k");
  bool graphs = !args.has("no-graphs");
  std::string json_path = args.get("json", "");
  const int64_t kv_pages = args.get_int("kv-pages", 0);  // engine/cache/kv_sizing.h
  const double kv_fraction = args.get_double("kv-memory-fraction", 0.0);
  const int64_t vocab_override = args.get_int("vocab-size", 0);
  const std::string tokenizer_dir = args.get("tokenizer", "");
  const int64_t n_lora = args.get_int("lora", 0);
  const int64_t lora_rank = args.get_int("lora-rank", 16);
  args.check_all_used();
  VELA_CHECK(n_lora >= 0 && lora_rank >= 1, "--lora N needs N >= 0 and --lora-rank >= 1");
  VELA_CHECK(n_decode >= 8, "--decode must be at least 8");

  ModelConfig mc = config_path.empty() ? ModelConfig::from_json(model_preset(preset_name), preset_name)
                                       : ModelConfig::from_file(config_path);
  if (vocab_override > 0) mc.vocab_size = vocab_override;
  std::vector<Case> all = {{"decode1k", 1, 1024, false},
                           {"decode8k", 1, 8192, false},
                           {"decode32k", 1, 32768, false},
                           {"batch64", 64, 512, false},
                           {"batch2", 2, 1024, false},
                           {"batch4", 4, 1024, false},
                           {"batch8", 8, 1024, false},
                           {"batch16", 16, 1024, false},
                           {"batch32", 32, 1024, false},
                           {"prefill8k", 1, 8192, true},
                           {"prefill256", 1, 256, true},  // one eager step (a serving mixed step's size)
                           {"prefill512", 1, 512, true},
                           {"batch64_json", 64, 512, false, true}};
  std::vector<Case> cases;
  for (const Case& c : all)
    if (("," + cases_arg + ",").find("," + c.name + ",") != std::string::npos) cases.push_back(c);
  VELA_CHECK(!cases.empty(), "--cases selects nothing from '", cases_arg, "'");

  int64_t max_ctx = std::min<int64_t>(mc.max_position_embeddings, 32768);
  EngineConfig ec;
  ec.max_seqs = 64;
  ec.max_tokens_per_step = 8192;
  ec.max_ctx = static_cast<int32_t>(max_ctx);
  ec.n_kv_slots = std::max<int64_t>(max_ctx + 256, 64 * (512 + n_decode + 64));
  if (kv_pages > 0 || kv_fraction > 0) {  // sized by the engine instead (kv_sizing.h)
    ec.n_kv_slots = 0;
    ec.kv_pages = kv_pages;
    ec.kv_memory_fraction = kv_fraction;
  }
  ec.cuda_graphs = graphs;
  ec.capture_graphs_at_start = true;  // timed decode never pays for a capture
  ec.max_waiting = 4096;
  ec.time_device = device.is_cuda();  // stream time per decode forward next to the wall time

  std::printf("model %s: %.2fB params, %s on %s, CUDA graphs %s\n",
              config_path.empty() ? preset_name.c_str() : config_path.c_str(), mc.n_params() / 1e9,
              dtype_name(dtype), device.str().c_str(), device.is_cuda() && graphs ? "on" : "off");
  auto t_build = Clock::now();
  Transformer model = Transformer::random(mc, dtype, device, /*seed=*/1);
  std::vector<std::string> lora_names;
  if (n_lora > 0) {
    const std::string dir = (std::filesystem::temp_directory_path() /
                             ("vela-bench-lora-" + std::to_string(::getpid()))).string();
    const auto adapters = write_random_adapters(mc, n_lora, lora_rank, dir);
    attach_lora_adapters(model, adapters);
    std::filesystem::remove_all(dir);
    for (const auto& a : adapters) lora_names.push_back(a.first);
    std::printf("%lld LoRA adapters of rank %lld on every linear module, request i on adapter i mod %lld\n",
                static_cast<long long>(n_lora), static_cast<long long>(lora_rank),
                static_cast<long long>(n_lora));
  }
  Engine engine(std::move(model), nullptr, ec);
  // Request i (of any case) on adapter i mod N.
  int64_t n_submitted = 0;
  auto with_adapter = [&](Request r) {
    if (!lora_names.empty())
      r.lora = lora_names[static_cast<size_t>(n_submitted++ % static_cast<int64_t>(lora_names.size()))];
    return r;
  };
  double build_s = std::chrono::duration<double>(Clock::now() - t_build).count();
  std::printf("engine start %.2f s (graph capture %.0f ms, %zu graphs)\n", build_s,
              engine.graph_capture_seconds() * 1000, engine.n_cuda_graphs());

  double bw_gbps = 0;
#ifdef VELA_HAS_CUDA
  // D2D copy counted read + write: the rate the memory moves bytes (TARGETS.md's 4.3 TB/s).
  if (device.is_cuda()) bw_gbps = ops::cuda::bench_copy_gbps(1ull << 30);
#endif
  if (bw_gbps == 0) bw_gbps = measure_read_gbps(512ull << 20, 3);
  const double peak_tflops = device.is_cuda() ? 825.0 : 0.0;  // TARGETS.md bf16 GEMM peak
  const double weight_bytes = static_cast<double>(mc.n_params()) * dtype_size(dtype);
  // MoE: a decode step reads only the experts its tokens route to. With balanced routing a step
  // of b tokens touches E * (1 - (1 - k / E)^b) experts per MoE layer (the expectation).
  auto decode_weight_bytes = [&](int batch) {
    if (!mc.is_moe()) return weight_bytes;
    const double e = static_cast<double>(mc.n_experts), k = static_cast<double>(mc.n_experts_per_tok);
    const double touched = e * (1.0 - std::pow(1.0 - k / e, batch));
    const double expert = 3.0 * mc.hidden_size * mc.moe_intermediate_size * dtype_size(dtype);
    int64_t n_moe = 0;
    for (int64_t l = 0; l < mc.n_layers; ++l) n_moe += mc.is_moe_layer(l);
    return weight_bytes - static_cast<double>(n_moe) * (e - touched) * expert;
  };
  const double kv_bytes_per_token = 2.0 * mc.n_layers * mc.n_kv_heads * mc.head_dim * dtype_size(dtype);
  std::printf("floors from %.0f GB/s (device copy) and %.0f TFLOP/s\n\n", bw_gbps, peak_tflops);

  json results = json::array();
  std::printf("%-10s %6s %8s %12s %12s %14s %12s\n", "case", "batch", "context", "ms/step", "tok/s",
              "achieved", "of floor");
  uint64_t seed = 100;
  std::map<std::string, double> ms_per_step;  // decode cases
  for (const Case& c : cases) {
    // Warm-up request with the same shape (captures any graph this case needs).
    SamplingParams p;
    p.temperature = 0;
    p.ignore_eos = true;
    if (c.prefill) {
      p.max_tokens = 1;
      std::vector<double> ttft;
      EngineStats before;
      for (int rep = 0; rep < 3; ++rep) {
        Request r = with_adapter({random_prompt(c.context, mc.vocab_size, ++seed), p});
        auto t0 = Clock::now();
        auto tl = run_requests(engine, {r}, t0);
        ttft.push_back(tl[0].first());
        // time_device counts a forward when the next one starts: from here on, the forwards of the
        // later repetitions (the last one's is still pending at the end).
        if (rep == 0) before = engine.stats();
      }
      std::sort(ttft.begin(), ttft.end());
      double t = ttft[1];
      double tok_s = c.context / t;
      double flops = 2.0 * mc.n_active_params() * c.context +
                     2.0 * mc.n_layers * mc.n_heads * mc.head_dim * static_cast<double>(c.context) * c.context;
      double tflops = flops / t / 1e12;
      double ratio = peak_tflops > 0 ? tflops / peak_tflops : 0;
      // The prompt's forwards on the GPU (time_device): against the wall time, what launching an
      // eager forward costs the host.
      const EngineStats after = engine.stats();
      const int64_t n_timed = after.other_forwards_timed - before.other_forwards_timed;
      const double device_ms =
          n_timed > 0 ? (after.other_device_s - before.other_device_s) / n_timed * 1000 : 0.0;
      const double launch_ms =
          n_timed > 0 ? (after.other_launch_s - before.other_launch_s) / n_timed * 1000 : 0.0;
      std::printf("%-10s %6d %8lld %12.3f %12.0f %9.0f TF/s %11.1f%%", c.name.c_str(), c.batch,
                  static_cast<long long>(c.context), t * 1000, tok_s, tflops, ratio * 100);
      if (n_timed > 0)
        std::printf("   (forward on the GPU %.3f ms, enqueued in %.3f ms; mean of %lld)", device_ms,
                    launch_ms, static_cast<long long>(n_timed));
      std::printf("\n");
      results.push_back({{"case", c.name}, {"batch", c.batch}, {"context", c.context},
                         {"ms", t * 1000}, {"tokens_per_s", tok_s}, {"tflops", tflops},
                         {"floor_ratio", ratio}, {"device_forward_ms", device_ms},
                         {"launch_ms", launch_ms}});
      continue;
    }
    p.max_tokens = static_cast<int32_t>(n_decode);
    int64_t prompt_len = std::min<int64_t>(c.context, max_ctx - n_decode - 1);
    std::shared_ptr<const constrain::CompiledGrammar> grammar;
    if (c.constrained) {
      auto t_vocab = Clock::now();
      constrain::GrammarCompiler compiler(bench_vocab(tokenizer_dir, mc.vocab_size));
      p.constraint = Constraint::json_schema(json::parse(bench_schema()));
      grammar = compiler.compile(p.constraint);
      std::printf("(%s: vocabulary %s and schema compiled in %.0f ms)\n", c.name.c_str(),
                  tokenizer_dir.empty() ? "synthetic" : tokenizer_dir.c_str(),
                  std::chrono::duration<double, std::milli>(Clock::now() - t_vocab).count());
    }
    std::vector<Request> reqs;
    for (int b = 0; b < c.batch; ++b) {
      reqs.push_back(with_adapter({random_prompt(prompt_len, mc.vocab_size, ++seed), p}));
      reqs.back().grammar = grammar;
    }
    {  // warm-up: short decode of the same shape
      std::vector<Request> warm = reqs;
      for (auto& r : warm) {
        r.params.max_tokens = 4;
        r.prompt = random_prompt(prompt_len, mc.vocab_size, ++seed);
      }
      run_requests(engine, warm, Clock::now());
    }
    const EngineStats before = engine.stats();
    auto t0 = Clock::now();
    auto tls = run_requests(engine, reqs, t0);
    const EngineStats after = engine.stats();
    const int64_t n_timed = after.decode_forwards_timed - before.decode_forwards_timed;
    const double device_ms =
        n_timed > 0 ? (after.decode_device_s - before.decode_device_s) / n_timed * 1000 : 0.0;
    double start = 0, end = 1e30;
    for (const auto& tl : tls) {
      start = std::max(start, tl.first());
      end = std::min(end, tl.last());
    }
    int64_t tokens = 0;
    for (const auto& tl : tls)
      for (const auto& [t, n] : tl.events)
        if (t > start && t <= end) tokens += n;
    double window = end - start;
    VELA_CHECK(window > 0 && tokens > 0, "bench: no steady decode window (decode more tokens)");
    double tok_s = tokens / window;
    double steps_s = tok_s / c.batch;
    double ms_step = 1000.0 / steps_s;
    double ctx_mid = prompt_len + n_decode / 2.0;
    double bytes = decode_weight_bytes(c.batch) + kv_bytes_per_token * ctx_mid * c.batch;
    double gbps = bytes * steps_s / 1e9;
    double floor_ms = bytes / (bw_gbps * 1e9) * 1000;
    ms_per_step[c.name] = ms_step;
    std::printf("%-10s %6d %8lld %12.3f %12.0f %9.0f GB/s %11.1f%%", c.name.c_str(), c.batch,
                static_cast<long long>(prompt_len), ms_step, tok_s, gbps, floor_ms / ms_step * 100);
    if (n_timed > 0) std::printf("   (forward on the GPU %.3f ms)", device_ms);
    std::printf("\n");
    // The loop thread's step phases over the timed decode steps (StepPhases): on CUDA the GPU idles
    // from the end of `sample` to the next `launch`.
    json phases = json::object();
    if (const int64_t n_steps = after.decode_phases.steps - before.decode_phases.steps; n_steps > 0) {
      const int64_t n_overlapped = after.overlapped_steps - before.overlapped_steps;
      std::printf("%-10s   overlapped steps %.0f%%; decode step phases (mean ms):", "",
                  100.0 * static_cast<double>(n_overlapped) / static_cast<double>(n_steps));
      for (int k = 0; k < StepPhases::kCount; ++k) {
        const auto i = static_cast<size_t>(k);
        const double ms =
            1e3 * (after.decode_phases.seconds[i] - before.decode_phases.seconds[i]) / n_steps;
        phases[StepPhases::kNames[k]] = ms;
        std::printf(" %s %.3f", StepPhases::kNames[k], ms);
      }
      std::printf("\n");
    }
    results.push_back({{"case", c.name},
                       {"batch", c.batch},
                       {"context", prompt_len},
                       {"ms_per_step", ms_step},
                       {"tokens_per_s", tok_s},
                       {"gbps", gbps},
                       {"floor_ms", floor_ms},
                       {"floor_ratio", floor_ms / ms_step},
                       {"device_forward_ms", device_ms},
                       {"step_phase_ms", phases},
                       {"overlapped_steps", after.overlapped_steps - before.overlapped_steps}});
  }
  json overhead = nullptr;
  if (ms_per_step.count("batch64") && ms_per_step.count("batch64_json")) {
    const double o = ms_per_step["batch64_json"] / ms_per_step["batch64"] - 1.0;
    std::printf("\nconstrained decoding at B = 64: %+.1f%% per decode step (%.3f vs %.3f ms; "
                "floor: <= +5%%)\n", o * 100, ms_per_step["batch64_json"], ms_per_step["batch64"]);
    overhead = o;
  }
  if (!json_path.empty()) {
    json j = {{"benchmark", "engine"},
              {"constrained_overhead_b64", overhead},
              {"model", config_path.empty() ? preset_name : config_path},
              {"dtype", dtype_name(dtype)},
              {"device", device.str()},
              {"cuda_graphs", device.is_cuda() && graphs},
              {"engine_start_s", build_s},
              {"graph_capture_s", engine.graph_capture_seconds()},
              {"bandwidth_gbps", bw_gbps},
              {"lora_adapters", n_lora},
              {"lora_rank", n_lora > 0 ? lora_rank : 0},
              {"results", results}};
    std::string text = j.dump(2) + "\n";
    write_file_atomic(json_path, text.data(), text.size());
    std::printf("\nwrote %s\n", json_path.c_str());
  }
  return 0;
}

}  // namespace vela::cli
