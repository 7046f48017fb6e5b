// `vela tokenize`: encode / decode / train / chat-template / bench on the command line.
//   encode --tokenizer PATH [--add-special]        stdin lines -> one JSON id array per line
//   decode --tokenizer PATH [--skip-special]       JSON id arrays -> one JSON string per line
//   train --vocab-size N [--special a,b] FILES... --out DIR
//   chat-template --tokenizer DIR --messages F.json [--tools F.json] [--add-generation-prompt]
//                 [--var key=value ...]
//   bench --tokenizer PATH FILE                    single-thread encode throughput
#include <time.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/json.h"
#include "core/parallel.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace vela::cli {
namespace {

constexpr const char* kUsage =
    "usage: vela tokenize <encode|decode|train|chat-template|bench> [options]\n"
    "  encode --tokenizer PATH [--add-special]      reads stdin, prints a JSON array of ids per "
    "line\n"
    "  decode --tokenizer PATH [--skip-special]     reads a JSON id array per line, prints a JSON "
    "string\n"
    "  train --vocab-size N [--special \"<|im_start|>,<|im_end|>\"] FILES... --out DIR\n"
    "  chat-template --tokenizer DIR --messages FILE.json [--tools FILE.json]\n"
    "                [--add-generation-prompt] [--var key=value ...]\n"
    "  bench --tokenizer PATH FILE                  single-thread encode MB/s\n";

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) VELA_THROW(IoError, "cannot open '", path, "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

json read_json_file(const std::string& path) {
  try {
    return json::parse(read_all(path));
  } catch (const json::parse_error& e) {
    VELA_THROW(InvalidArgument, "'", path, "' is not valid JSON: ", e.what());
  }
}

int run_encode(Args& a) {
  Tokenizer t = Tokenizer::from_file(a.require("tokenizer"));
  bool add_special = a.has("add-special");
  a.check_all_used();
  std::string line;
  while (std::getline(std::cin, line)) {
    std::string out = json(t.encode(line, add_special)).dump();
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fputc('\n', stdout);
  }
  return 0;
}

int run_decode(Args& a) {
  Tokenizer t = Tokenizer::from_file(a.require("tokenizer"));
  bool skip = a.has("skip-special");
  a.check_all_used();
  std::string line;
  size_t line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    if (line.empty()) continue;
    std::vector<int32_t> ids;
    try {
      ids = json::parse(line).get<std::vector<int32_t>>();
    } catch (const json::exception& e) {
      VELA_THROW(InvalidArgument, "stdin line ", line_no,
                 " is not a JSON array of ids: ", e.what());
    }
    std::string out = json(t.decode(ids, skip)).dump();
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fputc('\n', stdout);
  }
  return 0;
}

int run_train(Args& a) {
  BpeTrainerOptions o;
  o.vocab_size = static_cast<int32_t>(a.get_int("vocab-size", 16384));
  std::string specials = a.get("special", "");
  std::string out_dir = a.require("out");
  o.min_frequency = a.get_int("min-frequency", 2);
  o.progress = true;
  a.check_all_used();
  for (size_t b = 0; b < specials.size();) {
    size_t e = specials.find(',', b);
    if (e == std::string::npos) e = specials.size();
    if (e > b) o.special_tokens.push_back(specials.substr(b, e - b));
    b = e + 1;
  }
  VELA_CHECK(!a.positionals().empty(), "train needs at least one text file");
  auto t0 = std::chrono::steady_clock::now();
  BpeTrainer trainer(o);
  for (const auto& f : a.positionals()) {
    trainer.add_file(f);
    std::fprintf(stderr, "[train] read %s (%lld distinct words so far)\n", f.c_str(),
                 static_cast<long long>(trainer.n_words()));
  }
  TrainedBpe bpe = trainer.train();
  BpeTrainer::save(bpe, out_dir);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "[train] vocab %zu (%zu merges) written to %s/tokenizer.json in %.1f s\n",
               bpe.vocab.size(), bpe.merges.size(), out_dir.c_str(), secs);
  return 0;
}

// --var values: JSON when they parse (false, 3, "x"), a plain string otherwise.
json parse_var_value(const std::string& v) {
  try {
    return json::parse(v);
  } catch (const json::exception&) {
    return json(v);
  }
}

int run_chat_template(int argc, char** argv) {
  // --var may repeat, which Args (last value wins) cannot express: collect them first.
  json extra = json::object();
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    std::string s = argv[i];
    std::string kv;
    if (s == "--var") {
      VELA_CHECK(i + 1 < argc, "option --var needs key=value");
      kv = argv[++i];
    } else if (s.rfind("--var=", 0) == 0) {
      kv = s.substr(6);
    } else {
      rest.push_back(argv[i]);
      continue;
    }
    size_t eq = kv.find('=');
    VELA_CHECK(eq != std::string::npos && eq > 0, "--var expects key=value, got '", kv, "'");
    extra[kv.substr(0, eq)] = parse_var_value(kv.substr(eq + 1));
  }
  Args a(static_cast<int>(rest.size()), rest.data(), {"add-generation-prompt"});
  std::string tok = a.require("tokenizer");
  json messages = read_json_file(a.require("messages"));
  std::string tools_path = a.get("tools", "");
  bool gen = a.has("add-generation-prompt");
  a.check_all_used();
  json tools = tools_path.empty() ? json(nullptr) : read_json_file(tools_path);
  ChatTemplate tpl = ChatTemplate::from_tokenizer_config(tok);
  std::string out = tpl.render(messages, tools, gen, extra);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Text cut at line ends into pieces of about `target` bytes (1 = every line).
std::vector<std::string_view> cut(const std::string& text, size_t target) {
  std::vector<std::string_view> out;
  size_t b = 0;
  while (b < text.size()) {
    size_t e = b;
    do {
      size_t nl = text.find('\n', e);
      e = nl == std::string::npos ? text.size() : nl + 1;
    } while (e < text.size() && e - b < target);
    out.push_back(std::string_view(text).substr(b, e - b));
    b = e;
  }
  return out;
}

int run_bench(Args& a) {
  Tokenizer t = Tokenizer::from_file(a.require("tokenizer"));
  a.check_all_used();
  VELA_CHECK(a.positionals().size() == 1, "bench needs one text file");
  std::string text = read_all(a.positionals()[0]);
  set_num_threads(1);
  // Two ways a server sees text: line by line, and in ~64 KB documents. Wall time and CPU time
  // (the latter is what counts on a shared machine).
  for (size_t target : {size_t{1}, size_t{1} << 16}) {
    std::vector<std::string_view> pieces = cut(text, target);
    size_t n_tokens = 0;
    auto t0 = std::chrono::steady_clock::now();
    double c0 = cpu_seconds();
    for (auto p : pieces) n_tokens += t.encode(p).size();
    double cpu = cpu_seconds() - c0;
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double mb = static_cast<double>(text.size()) / 1e6;
    std::printf(
        "{\"impl\": \"vela\", \"mode\": \"%s\", \"bytes\": %zu, \"tokens\": %zu, \"wall_s\": %.3f, "
        "\"cpu_s\": %.3f, "
        "\"mb_per_s_wall\": %.2f, \"mb_per_s_cpu\": %.2f}\n",
        target == 1 ? "lines" : "64KB", text.size(), n_tokens, wall, cpu, mb / wall, mb / cpu);
  }
  return 0;
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
  if (argc < 1 || std::string(argv[0]) == "--help" || std::string(argv[0]) == "-h") {
    std::fputs(kUsage, argc < 1 ? stderr : stdout);
    return argc < 1 ? 1 : 0;
  }
  std::string sub = argv[0];
  if (sub == "chat-template") return run_chat_template(argc - 1, argv + 1);
  Args a(argc - 1, argv + 1, {"add-special", "skip-special"});
  if (sub == "encode") return run_encode(a);
  if (sub == "decode") return run_decode(a);
  if (sub == "train") return run_train(a);
  if (sub == "bench") return run_bench(a);
  VELA_THROW(InvalidArgument, "unknown tokenize subcommand '", sub, "'\n", kUsage);
}

}  // namespace vela::cli
