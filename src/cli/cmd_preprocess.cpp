// `vela preprocess --config prep.json INPUT.jsonl... -o DIR`: JSONL -> memory-mapped token shards
// + index.json (train/data/preprocess.h). Every top-level config key is also a flag (--seq-len
// 1024, --packing false, ...); flags override the file, and the result is validated as strictly
// as the file itself. Prints a summary (records kept / bad by reason with the first examples,
// sequences, tokens); --json prints it as one JSON object instead.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/json.h"
#include "train/data/preprocess.h"
#include "train/data/preprocess_config.h"

namespace vela::cli {
namespace {

constexpr const char* kUsage =
    "usage: vela preprocess [--config prep.json] INPUT.jsonl... -o DIR [options]\n"
    "  turns JSONL records into token shards for `vela train` (see docs/data.md)\n"
    "  --config FILE        the preprocess config (JSON); every key below overrides it\n"
    "  -o, --out DIR        output directory (shard_*.bin + index.json)\n"
    "  --tokenizer DIR      tokenizer directory (tokenizer.json [+ tokenizer_config.json])\n"
    "  --format text|chat|preference|prompt   (preference: DPO pairs; prompt: GRPO prompts +\n"
    "                       answers.jsonl; see docs/rl.md)\n"
    "  --seq-len N   --max-length N   --shard-tokens N   --threads N\n"
    "  --truncation drop|truncate_left|truncate_right|split\n"
    "  --packing true|false --packing-window N   --add-bos true|false --add-eos true|false\n"
    "  --bos-token TOK      --eos-token TOK\n"
    "  --quiet              no progress bar      --json   print the summary as JSON\n";

// Flag -> config key and value type ('s' string, 'i' integer, 'b' boolean).
struct Override {
  const char* flag;
  const char* key;
  char type;
};
constexpr Override kOverrides[] = {
    {"tokenizer", "tokenizer", 's'},
    {"format", "format", 's'},
    {"seq-len", "seq_len", 'i'},
    {"max-length", "max_length", 'i'},
    {"truncation", "truncation", 's'},
    {"packing", "packing", 'b'},
    {"packing-window", "packing_window", 'i'},
    {"shard-tokens", "shard_tokens", 'i'},
    {"threads", "threads", 'i'},
    {"add-bos", "add_bos", 'b'},
    {"add-eos", "add_eos", 'b'},
    {"bos-token", "bos_token", 's'},
    {"eos-token", "eos_token", 's'},
};

json read_config(const std::string& path) {
  PreprocessConfig::from_file(path);  // validates (clear errors before overrides mix in)
  std::FILE* f = std::fopen(path.c_str(), "rb");
  VELA_CHECK_T(IoError, f != nullptr, "cannot open '", path, "'");
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  std::fclose(f);
  return json::parse(text);
}

}  // namespace

int cmd_preprocess(int argc, char** argv) {
  std::vector<std::string> storage;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    storage.push_back(a == "-o" ? "--out" : a);
  }
  for (auto& s : storage) args.push_back(s.data());
  Args a(static_cast<int>(args.size()), args.data(), {"quiet", "json"});

  std::string config_path = a.get("config", "");
  json cfg = config_path.empty() ? json::object() : read_config(config_path);
  for (const Override& o : kOverrides) {
    std::string v = a.get(o.flag, "");
    if (v.empty()) continue;
    if (o.type == 's') {
      cfg[o.key] = v;
    } else if (o.type == 'i') {
      cfg[o.key] = a.get_int(o.flag, 0);
    } else {
      VELA_CHECK(v == "true" || v == "false", "option --", o.flag, " expects true or false, got '",
                 v, "'");
      cfg[o.key] = v == "true";
    }
  }
  std::string out = a.get("out", "");
  bool quiet = a.has("quiet"), as_json = a.has("json");
  a.check_all_used();
  VELA_CHECK(!out.empty(), "missing output directory: -o DIR\n", kUsage);
  VELA_CHECK(!a.positionals().empty(), "no input files: give one or more INPUT.jsonl\n", kUsage);
  VELA_CHECK(cfg.contains("tokenizer"), "no tokenizer: give --config with \"tokenizer\" or ",
             "--tokenizer DIR");
  PreprocessConfig config = PreprocessConfig::from_json(cfg);

  PreprocessOptions opts;
  opts.progress = !quiet;
  PreprocessStats st = preprocess(config, a.positionals(), out, opts);

  if (as_json) {
    json j = st.to_json();
    j["out"] = out;
    j["bad_examples"] = st.bad_examples;
    j["seconds"] = st.seconds;
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("records: %lld kept, %lld bad (of %lld)\n", static_cast<long long>(st.n_ok),
              static_cast<long long>(st.n_bad), static_cast<long long>(st.n_records));
  for (const auto& [reason, count] : st.bad_by_reason)
    std::printf("  bad %-28s %lld\n", reason.c_str(), static_cast<long long>(count));
  for (const auto& e : st.bad_examples) std::printf("  e.g. %s\n", e.c_str());
  if (st.n_truncated)
    std::printf("truncated/split: %lld documents\n", static_cast<long long>(st.n_truncated));
  std::printf("wrote %lld sequences (%lld documents, %lld tokens, %lld trained) to %s in %.1f s\n",
              static_cast<long long>(st.n_sequences), static_cast<long long>(st.n_docs),
              static_cast<long long>(st.n_tokens), static_cast<long long>(st.n_trained_tokens),
              out.c_str(), st.seconds);
  return 0;
}

}  // namespace vela::cli
