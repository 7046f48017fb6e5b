// `vela generate`: load a model directory and continue a prompt (greedy, or sampled with a seed),
// optionally printing the top log-probabilities of every step. A plain prefill + decode loop over
// a ContiguousKVCache; the engine issue routes it through the Engine with the same interface.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/json.h"
#include "core/rng.h"
#include "model/contiguous_kv_cache.h"
#include "model/transformer.h"
#include "ops/softmax.h"
#include "ops/topk.h"
#include "tokenizer/tokenizer.h"

namespace vela::cli {
namespace {

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t pos = 0;
    long v = 0;
    try {
      v = std::stol(item, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    VELA_CHECK(pos == item.size() && !item.empty(), "--prompt-ids: '", item, "' is not an integer");
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

// Samples from softmax(logits / temperature) with one uniform draw (inverse CDF).
int32_t sample(const float* logits, int64_t vocab, float temperature, float u) {
  float m = logits[0];
  for (int64_t i = 1; i < vocab; ++i) m = std::max(m, logits[i]);
  double total = 0;
  std::vector<double> p(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) total += p[i] = std::exp((logits[i] - m) / temperature);
  double target = u * total, acc = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    acc += p[i];
    if (acc > target) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(vocab - 1);
}

}  // namespace

int cmd_generate(int argc, char** argv) {
  Args args(argc, argv, {"json", "help", "ignore-eos"});
  if (args.has("help")) {
    std::printf(
        "usage: vela generate --model DIR (--prompt TEXT | --prompt-ids 1,2,3) [--max-tokens N]\n"
        "                     [--temperature T] [--seed S] [--top-logprobs K] [--device cpu|cuda]\n"
        "                     [--dtype f32|bf16] [--ignore-eos] [--json]\n");
    return 0;
  }
  std::string model_dir = args.require("model");
  std::string prompt = args.get("prompt", "");
  std::string prompt_ids = args.get("prompt-ids", "");
  int64_t max_tokens = args.get_int("max-tokens", 16);
  double temperature = args.get_double("temperature", 0.0);
  uint64_t seed = static_cast<uint64_t>(args.get_int("seed", 0));
  int64_t top_k = args.get_int("top-logprobs", 0);
  Device device = Device::parse(args.get("device", "cpu"));
  DType dtype = parse_dtype(args.get("dtype", "f32"));
  bool as_json = args.has("json"), ignore_eos = args.has("ignore-eos");
  args.check_all_used();
  VELA_CHECK(prompt.empty() != prompt_ids.empty(), "give exactly one of --prompt or --prompt-ids");
  VELA_CHECK(max_tokens >= 0, "--max-tokens must be >= 0");
  VELA_CHECK(temperature >= 0, "--temperature must be >= 0");
  VELA_CHECK(top_k >= 0 && top_k <= 20, "--top-logprobs must be in [0, 20]");

  Transformer model = Transformer::load(model_dir, dtype, device);
  const ModelConfig& cfg = model.config;
  std::unique_ptr<Tokenizer> tok;
  namespace fs = std::filesystem;
  if (fs::exists(fs::path(model_dir) / "tokenizer.json"))
    tok = std::make_unique<Tokenizer>(Tokenizer::from_file(model_dir));
  std::vector<int32_t> ids;
  if (!prompt_ids.empty()) {
    ids = parse_ids(prompt_ids);
  } else {
    VELA_CHECK(tok != nullptr, "--prompt needs a tokenizer.json in ", model_dir,
               " (or pass --prompt-ids)");
    ids = tok->encode(prompt, /*add_special_tokens=*/true);
  }
  VELA_CHECK(!ids.empty(), "the prompt is empty");
  for (int32_t id : ids)
    VELA_CHECK(id >= 0 && id < cfg.vocab_size, "prompt token id ", id, " outside the vocabulary [0, ",
               cfg.vocab_size, ")");
  int64_t ctx = static_cast<int64_t>(ids.size()) + max_tokens;
  VELA_CHECK(ctx <= cfg.max_position_embeddings ||
                 cfg.rope.scaling.type == ops::RopeScaling::Type::kDynamic,
             "prompt + max tokens (", ctx, ") exceeds max_position_embeddings (",
             cfg.max_position_embeddings, ")");

  ContiguousKVCache cache(cfg, 1, ctx, dtype, device);
  Rng rng(seed);
  std::vector<int32_t> out;
  json top = json::array();
  Tensor step_ids = Tensor::from_vector(ids).to(device);
  int32_t n_new = static_cast<int32_t>(ids.size());
  for (int64_t t = 0; t < max_tokens; ++t) {
    PackedStep st = cache.step({0}, {n_new});
    Tensor logits = model.forward_packed(step_ids, st.positions, st.kv, st.last_indices).to(Device::cpu());
    const float* l = logits.data<float>();
    int32_t next;
    if (temperature == 0) {
      Tensor am = Tensor::empty({1}, DType::kI32);
      ops::argmax(logits, am);
      next = am.data<int32_t>()[0];
    } else {
      next = sample(l, cfg.vocab_size, static_cast<float>(temperature), rng.uniform());
    }
    if (top_k > 0) {
      Tensor lp = Tensor::empty(logits.shape(), DType::kF32);
      ops::log_softmax(logits, lp);
      Tensor vals = Tensor::empty({1, top_k}, DType::kF32), idx = Tensor::empty({1, top_k}, DType::kI32);
      ops::topk(lp, top_k, vals, idx);
      json step = json::array();
      for (int64_t k = 0; k < top_k; ++k)
        step.push_back({{"id", idx.data<int32_t>()[k]}, {"logprob", vals.data<float>()[k]}});
      top.push_back(step);
    }
    out.push_back(next);
    bool is_eos = std::find(cfg.eos_token_ids.begin(), cfg.eos_token_ids.end(), next) !=
                  cfg.eos_token_ids.end();
    if (is_eos && !ignore_eos) break;
    step_ids = Tensor::from_vector(std::vector<int32_t>{next}).to(device);
    n_new = 1;
  }

  if (as_json) {
    json j;
    j["tokens"] = out;
    if (tok) j["text"] = tok->decode(out, /*skip_special_tokens=*/false);
    if (top_k > 0) j["top_logprobs"] = top;
    std::printf("%s\n", j.dump().c_str());
  } else if (tok) {
    std::printf("%s\n", tok->decode(out, false).c_str());
  } else {
    std::printf("%s\n", json(out).dump().c_str());
  }
  return 0;
}

}  // namespace vela::cli
