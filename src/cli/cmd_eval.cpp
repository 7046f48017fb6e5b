// `vela eval ppl|choice|generate`: evaluate a model directory on local JSONL / text files (see
// docs/eval.md): a progress bar on stderr, a table on stdout and optionally a JSON results file.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_dtype.h"
#include "core/error.h"
#include "engine/engine.h"
#include "eval/choice_docs.h"
#include "eval/choice_task.h"
#include "eval/generate_task.h"
#include "eval/ppl_task.h"
#include "eval/results.h"
#include "model/transformer.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace vela::cli {
namespace {

namespace fs = std::filesystem;

const char* kUsage =
    "usage: vela eval ppl|choice|generate --model DIR --data FILE [options]\n"
    "\n"
    "  ppl       perplexity and bits per byte of a text file or JSONL documents (sliding window)\n"
    "  choice    multiple choice by log-likelihood: acc, acc_norm (MMLU / ARC / HellaSwag JSONL)\n"
    "  generate  generation scored by exact match, GSM8K '#### N', last number, regex or ROUGE-L\n"
    "\n"
    "common:\n"
    "  --model DIR          model directory (config.json, safetensors, tokenizer.json)\n"
    "  --data FILE          the evaluation data\n"
    "  --device cpu|cuda    (default cpu)      --dtype auto|f32|bf16|f16 (auto)\n"
    "  --limit N            first N records only          --seed S (default 1234)\n"
    "  --output FILE.json   write the results (metrics, config, per-sample details)\n"
    "  --batch-tokens N     tokens per forward (ppl, choice; default: automatic)\n"
    "  --no-progress        no progress bar on stderr\n"
    "ppl:\n"
    "  --format auto|text|jsonl (auto: .jsonl/.json are JSONL)   --field NAME (default text)\n"
    "  --max-length N (default: the model's context)   --stride N (default: max-length)\n"
    "choice:\n"
    "  --format auto|mmlu|arc|hellaswag   --fewshot-file DEV.jsonl --num-fewshot K\n"
    "  --chat-template      wrap the prompt in the model's chat template (tokenizer_config.json)\n"
    "generate:\n"
    "  --scorer auto|exact_match|gsm8k|last_number|regex|rouge_l   --regex PATTERN "
    "[--regex-group N]\n"
    "  --template 'Question: {question}\\nAnswer:'   --target-field NAME\n"
    "  --fewshot-file F --num-fewshot K   --max-tokens N (default min(256, context/2))   "
    "--temperature T (0)\n"
    "  --stop STR | --stop '[\"a\", \"b\"]'  (default \"\\n\\n\" and \"Question:\"; \\n is a "
    "newline)\n"
    "  --chat-template      as for choice (default stops: none, the end-of-turn token ends)\n"
    "  --max-batch N        requests in flight (default 64)\n"
    "  --where FIELD=VALUE  only the records whose string FIELD equals VALUE\n"
    "\n"
    "Malformed data (missing fields, bad JSON, an answer out of range) stops with an error naming\n"
    "the file, line and field. See docs/eval.md for the accepted layouts and metric definitions.\n";

std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      char n = s[i + 1];
      if (n == 'n' || n == 't' || n == '\\') {
        out += n == 'n' ? '\n' : n == 't' ? '\t' : '\\';
        ++i;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

std::vector<std::string> parse_stop(const std::string& s) {
  if (!s.empty() && s[0] == '[') {
    json j;
    try {
      j = json::parse(s);
    } catch (const nlohmann::json::exception& e) {
      VELA_THROW(InvalidArgument, "--stop: not a JSON list of strings (", e.what(), ")");
    }
    VELA_CHECK(j.is_array(), "--stop: expected a JSON list of strings");
    std::vector<std::string> out;
    for (const json& x : j) {
      VELA_CHECK(x.is_string() && !x.get<std::string>().empty(),
                 "--stop: every entry must be a non-empty string");
      out.push_back(x.get<std::string>());
    }
    return out;
  }
  VELA_CHECK(!s.empty(), "--stop: the stop string is empty");
  return {unescape(s)};
}

std::optional<ChatTemplate> load_chat_template(const std::string& dir, bool wanted) {
  if (!wanted) return std::nullopt;
  VELA_CHECK(fs::exists(fs::path(dir) / "tokenizer_config.json") ||
                 fs::exists(fs::path(dir) / "chat_template.jinja"),
             "--chat-template needs a tokenizer_config.json with a chat_template in ", dir);
  return ChatTemplate::from_tokenizer_config(dir);
}

}  // namespace

int cmd_eval(int argc, char** argv) {
  if (argc < 1 || !std::strcmp(argv[0], "--help") || !std::strcmp(argv[0], "-h")) {
    std::printf("%s", kUsage);
    return argc < 1 ? 1 : 0;
  }
  const std::string task = argv[0];
  Args args(argc - 1, argv + 1, {"help", "chat-template", "no-progress"});
  if (args.has("help")) {
    std::printf("%s", kUsage);
    return 0;
  }
  VELA_CHECK(task == "ppl" || task == "choice" || task == "generate", "unknown eval task '", task,
             "' (expected ppl, choice or generate; see `vela eval --help`)");
  const std::string model_dir = args.require("model");
  const std::string data = args.require("data");
  const Device device = Device::parse(args.get("device", "cpu"));
  const DType dtype = resolve_model_dtype(args.get("dtype", "auto"), model_dir, device);
  const int64_t limit = args.get_int("limit", -1);
  const auto seed = static_cast<uint64_t>(args.get_int("seed", 1234));
  const std::string output = args.get("output", "");
  const bool progress = !args.has("no-progress");
  const bool want_chat = args.has("chat-template");
  VELA_CHECK(limit == -1 || limit > 0, "--limit must be positive, got ", limit);
  VELA_CHECK_T(IoError, fs::exists(data), "data file '", data, "' does not exist");
  VELA_CHECK_T(IoError, fs::is_directory(model_dir), "model directory '", model_dir,
               "' does not exist");

  json result;
  if (task == "ppl" || task == "choice") {
    const int64_t batch_tokens = args.get_int("batch-tokens", 0);
    if (task == "ppl") {
      eval::PplOptions o;
      o.data = data;
      o.format = args.get("format", "auto");
      o.field = args.get("field", "text");
      o.max_length = args.get_int("max-length", 0);
      o.stride = args.get_int("stride", 0);
      o.limit = limit;
      o.batch_tokens = batch_tokens;
      o.progress = progress;
      VELA_CHECK(!want_chat, "--chat-template applies to choice and generate, not ppl");
      args.check_all_used();
      VELA_CHECK(o.max_length >= 0 && o.stride >= 0, "--max-length and --stride must be >= 0");
      VELA_CHECK(fs::exists(fs::path(model_dir) / "tokenizer.json"),
                 "vela eval needs a tokenizer.json in ", model_dir);
      Transformer model = Transformer::load(model_dir, dtype, device);
      Tokenizer tok = Tokenizer::from_file(model_dir);
      result = eval::run_ppl(model, tok, o);
    } else {
      eval::ChoiceOptions o;
      o.data = data;
      o.format = args.get("format", "auto");
      o.fewshot_file = args.get("fewshot-file", "");
      o.num_fewshot = args.get_int("num-fewshot", 0);
      o.seed = seed;
      o.limit = limit;
      o.batch_tokens = batch_tokens;
      o.progress = progress;
      args.check_all_used();
      eval::parse_choice_format(o.format);
      VELA_CHECK(fs::exists(fs::path(model_dir) / "tokenizer.json"),
                 "vela eval needs a tokenizer.json in ", model_dir);
      std::optional<ChatTemplate> chat = load_chat_template(model_dir, want_chat);
      Transformer model = Transformer::load(model_dir, dtype, device);
      Tokenizer tok = Tokenizer::from_file(model_dir);
      result = eval::run_choice(model, tok, chat ? &*chat : nullptr, o);
    }
  } else {
    eval::GenerateOptions o;
    o.data = data;
    o.prompt_template = unescape(args.get("template", ""));
    o.target_field = args.get("target-field", "");
    o.fewshot_file = args.get("fewshot-file", "");
    o.num_fewshot = args.get_int("num-fewshot", 0);
    o.seed = seed;
    o.scorer = args.get("scorer", "auto");
    o.regex = args.get("regex", "");
    o.regex_group = static_cast<int32_t>(args.get_int("regex-group", 1));
    o.max_tokens = static_cast<int32_t>(args.get_int("max-tokens", 0));
    o.temperature = static_cast<float>(args.get_double("temperature", 0.0));
    if (args.has("stop")) {
      o.stop_given = true;
      o.stop = parse_stop(args.get("stop", ""));
    }
    o.limit = limit;
    o.where = args.get("where", "");
    o.max_batch = args.get_int("max-batch", 64);
    o.progress = progress;
    args.check_all_used();
    VELA_CHECK(o.max_batch > 0, "--max-batch must be positive, got ", o.max_batch);
    VELA_CHECK(o.temperature >= 0, "--temperature must be >= 0, got ", o.temperature);
    VELA_CHECK(fs::exists(fs::path(model_dir) / "tokenizer.json"),
               "vela eval needs a tokenizer.json in ", model_dir);
    std::optional<ChatTemplate> chat = load_chat_template(model_dir, want_chat);
    std::unique_ptr<Engine> engine = Engine::load(model_dir, {}, dtype, device);
    result = eval::run_generate(*engine, chat ? &*chat : nullptr, o);
  }
  result["model"] = model_dir;
  result["device"] = args.get("device", "cpu");
  result["dtype"] = dtype_name(dtype);
  eval::print_table(stdout, result);
  if (!output.empty()) eval::write_results(output, result);
  return 0;
}

}  // namespace vela::cli
