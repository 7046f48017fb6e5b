// `vela generate`: continue prompts with a model directory through the Engine (paged KV cache,
// continuous batching). One prompt from flags, or many from --batch FILE.jsonl (one request per
// line; one JSON result per line, in input order).
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_dtype.h"
#include "core/json.h"
#include "engine/engine.h"
#include "model/lora_adapter.h"

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

std::vector<int32_t> encode_prompt(const Engine& engine, const std::string& text) {
  VELA_CHECK(engine.tokenizer() != nullptr,
             "a text prompt needs a tokenizer.json in the model directory (or pass token ids)");
  return engine.tokenizer()->encode(text, /*add_special_tokens=*/true);
}

json top_logprobs_json(const Completion& c) {
  json steps = json::array();
  for (const TokenLogprob& lp : c.logprobs) {
    json step = json::array();
    for (const auto& [id, v] : lp.top) step.push_back({{"id", id}, {"logprob", v}});
    steps.push_back(step);
  }
  return steps;
}

json completion_json(const Engine& engine, const Completion& c, bool with_logprobs) {
  json j;
  j["tokens"] = c.tokens;
  if (engine.tokenizer()) j["text"] = c.text;
  j["finish_reason"] = finish_reason_name(c.finish_reason);
  j["cached_tokens"] = c.cached_tokens;
  if (with_logprobs) {
    json lps = json::array();
    for (const TokenLogprob& lp : c.logprobs) lps.push_back(lp.logprob);
    j["logprobs"] = lps;
    j["top_logprobs"] = top_logprobs_json(c);
  }
  if (!c.error.empty()) j["error"] = c.error;
  return j;
}

// `lora`: the adapter every request uses unless its line names one ("lora": NAME).
int run_batch_file(Engine& engine, const std::string& path, const std::string& lora) {
  std::ifstream f(path);
  VELA_CHECK_T(IoError, f.good(), "cannot open batch file '", path, "'");
  std::vector<Request> reqs;
  std::string line;
  int line_no = 0;
  while (std::getline(f, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j;
    try {
      j = json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      VELA_THROW(InvalidArgument, path, ":", line_no, ": invalid JSON: ", e.what());
    }
    VELA_CHECK(j.is_object(), path, ":", line_no, ": each line must be a JSON object");
    Request r;
    try {
      if (j.contains("prompt_ids")) r.prompt = j["prompt_ids"].get<std::vector<int32_t>>();
      else if (j.contains("prompt")) r.prompt = encode_prompt(engine, j["prompt"].get<std::string>());
      else VELA_THROW(InvalidArgument, "needs 'prompt' or 'prompt_ids'");
      json params = j;
      params.erase("prompt");
      params.erase("prompt_ids");
      r.lora = j.contains("lora") ? j["lora"].get<std::string>() : lora;
      params.erase("lora");
      r.params = SamplingParams::from_json(params);
    } catch (const Error& e) {
      VELA_THROW(InvalidArgument, path, ":", line_no, ": ", e.what());
    } catch (const nlohmann::json::exception& e) {
      VELA_THROW(InvalidArgument, path, ":", line_no, ": ", e.what());
    }
    reqs.push_back(std::move(r));
  }
  std::vector<RequestHandlePtr> handles;
  for (size_t i = 0; i < reqs.size(); ++i) {
    try {
      handles.push_back(engine.submit(reqs[i]));
    } catch (const Error& e) {
      VELA_THROW(InvalidArgument, path, ": request ", i + 1, ": ", e.what());
    }
    VELA_CHECK_T(OutOfMemory, handles.back() != nullptr, "the engine queue is full");
  }
  for (size_t i = 0; i < handles.size(); ++i) {
    RequestResult res = handles[i]->wait();
    bool lp = reqs[i].params.logprobs;
    json j = completion_json(engine, res.completions[0], lp);
    j["prompt_tokens"] = res.prompt_tokens;
    if (res.completions.size() > 1) {
      json choices = json::array();
      for (const Completion& c : res.completions) choices.push_back(completion_json(engine, c, lp));
      j["choices"] = choices;
    }
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int cmd_generate(int argc, char** argv) {
  Args args(argc, argv, {"json", "help", "ignore-eos", "json-object"});
  if (args.has("help")) {
    std::printf(
        "usage: vela generate --model DIR (--prompt TEXT | --prompt-ids 1,2,3 | --batch F.jsonl)\n"
        "         [--max-tokens N] [--temperature T] [--top-p P] [--top-k K] [--seed S]\n"
        "         [--top-logprobs K] [--ignore-eos] [--device cpu|cuda] [--dtype auto|f32|bf16|f16]\n"
        "         [--kv paged|contiguous] [--page-size N] [--json] [--lora DIR ...]\n"
        "         [--kv-pages N | --kv-memory-fraction F]\n"
        "         [--json-schema FILE | --json-object | --regex RE | --grammar FILE.gbnf |\n"
        "          --choice a,b,c]\n"
        "         [--speculative ngram,k=4 | draft=DIR,k=4]\n"
        "  --lora: a PEFT LoRA adapter on top of the model (NAME=DIR or DIR); with several,\n"
        "  requests use the first unless a --batch line names another (\"lora\": NAME).\n"
        "  --json-schema etc.: constrained decoding, the output matches the schema / pattern /\n"
        "  grammar (docs/structured_output.md).\n"
        "  --batch: one JSON request per line (prompt or prompt_ids, max_tokens, temperature,\n"
        "  top_p, top_k, seed, n, stop, logprobs, ...); prints one JSON result per line.\n");
    return 0;
  }
  std::string model_dir = args.require("model");
  std::string prompt = args.get("prompt", ""), prompt_ids = args.get("prompt-ids", "");
  std::string batch = args.get("batch", "");
  SamplingParams p;
  p.max_tokens = static_cast<int32_t>(args.get_int("max-tokens", 16));
  p.temperature = static_cast<float>(args.get_double("temperature", 0.0));
  p.top_p = static_cast<float>(args.get_double("top-p", 1.0));
  p.top_k = static_cast<int32_t>(args.get_int("top-k", 0));
  if (args.has("seed")) p.seed = static_cast<uint64_t>(args.get_int("seed", 0));
  p.top_logprobs = static_cast<int32_t>(args.get_int("top-logprobs", 0));
  p.logprobs = p.top_logprobs > 0;
  p.ignore_eos = args.has("ignore-eos");
  int n_constraints = 0;
  auto read_file = [](const std::string& path) {
    std::ifstream f(path);
    VELA_CHECK_T(IoError, f.good(), "cannot open '", path, "'");
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  if (args.has("json-schema")) {
    const std::string path = args.get("json-schema", "");
    json schema;
    try {
      schema = json::parse(read_file(path));
    } catch (const nlohmann::json::exception& e) {
      VELA_THROW(InvalidArgument, "--json-schema ", path, ": invalid JSON: ", e.what());
    }
    p.constraint = Constraint::json_schema(schema);
    ++n_constraints;
  }
  if (args.has("json-object")) {
    p.constraint = Constraint::json_object();
    ++n_constraints;
  }
  if (args.has("regex")) {
    p.constraint = Constraint::regex(args.get("regex", ""));
    ++n_constraints;
  }
  if (args.has("grammar")) {
    p.constraint = Constraint::grammar(read_file(args.get("grammar", "")));
    ++n_constraints;
  }
  if (args.has("choice")) {
    json list = json::array();
    std::stringstream ss(args.get("choice", ""));
    std::string item;
    while (std::getline(ss, item, ',')) list.push_back(item);
    p.constraint = Constraint::choice(list);
    ++n_constraints;
  }
  VELA_CHECK(n_constraints <= 1,
             "give at most one of --json-schema, --json-object, --regex, --grammar, --choice");
  Device device = Device::parse(args.get("device", "cpu"));
  DType dtype = resolve_model_dtype(args.get("dtype", "auto"), model_dir, device);
  EngineConfig cfg;
  cfg.kv_strategy = args.get("kv", "paged");
  cfg.page_size = static_cast<int32_t>(args.get_int("page-size", 16));
  cfg.speculative = SpeculativeConfig::parse(args.get("speculative", "off"));
  cfg.kv_pages = args.get_int("kv-pages", 0);  // KV pool size: engine/cache/kv_sizing.h
  cfg.kv_memory_fraction = args.get_double("kv-memory-fraction", 0.0);
  bool as_json = args.has("json");
  std::vector<std::pair<std::string, std::string>> adapters;
  for (const std::string& a : args.get_all("lora")) adapters.push_back(parse_lora_arg(a));
  const std::string lora = adapters.empty() ? "" : adapters[0].first;
  args.check_all_used();
  int n_sources = !prompt.empty() + !prompt_ids.empty() + !batch.empty();
  VELA_CHECK(n_sources == 1, "give exactly one of --prompt, --prompt-ids or --batch");
  p.validate();

  std::unique_ptr<Engine> engine = Engine::load(model_dir, cfg, dtype, device, adapters);
  if (!batch.empty()) return run_batch_file(*engine, batch, lora);

  Request r;
  r.prompt = prompt_ids.empty() ? encode_prompt(*engine, prompt) : parse_ids(prompt_ids);
  r.params = p;
  r.lora = lora;
  RequestResult res = engine->generate({r})[0];
  const Completion& c = res.completions[0];
  if (!c.error.empty()) VELA_THROW(InternalError, "generation failed: ", c.error);
  if (as_json) {
    json j;
    j["tokens"] = c.tokens;
    if (engine->tokenizer()) j["text"] = c.text;
    if (p.top_logprobs > 0) j["top_logprobs"] = top_logprobs_json(c);
    std::printf("%s\n", j.dump().c_str());
  } else if (engine->tokenizer()) {
    std::printf("%s\n", c.text.c_str());
  } else {
    std::printf("%s\n", json(c.tokens).dump().c_str());
  }
  return 0;
}

}  // namespace vela::cli
