// `vela bench constrain`: the cost of constrained decoding's host side on a real vocabulary —
// per schema of tests/fixtures/constrain/schemas (typical tool schemas, nesting, enums, arrays,
// anyOf, refs) plus the lazy tool-call grammar of tool_choice auto over all of them: compile time,
// the first (uncached) mask, and a seeded walk of up to --steps tokens (random allowed tokens,
// biased toward punctuation so strings and objects close): every uncached mask on the way (what a
// new schema's first request pays), and the same walk again (cached: later requests).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "bench/bench_util.h"
#include "cli/args.h"
#include "core/mmap_file.h"
#include "engine/constrain/automaton.h"
#include "engine/constrain/grammar_compiler.h"
#include "tokenizer/tokenizer.h"

namespace vela::cli {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

struct Walk {
  double total_ms = 0, max_ms = 0;
  int steps = 0;
};

// A seeded walk; the picks depend on the masks only, so a replay visits the same states.
Walk walk(const std::shared_ptr<const constrain::CompiledGrammar>& cg, int max_steps,
          uint32_t seed, const std::vector<uint8_t>& punct) {
  const constrain::TokenVocab& v = cg->vocab();
  constrain::GrammarMatcher m(cg);
  std::vector<uint32_t> bits(static_cast<size_t>(v.n_words()));
  std::mt19937 rng(seed);
  Walk w;
  std::vector<int32_t> allowed, allowed_punct;
  for (int step = 0; step < max_steps && !m.is_terminated(); ++step) {
    auto t = Clock::now();
    m.fill_next_token_bitmask(bits.data());
    const double ms = ms_since(t);
    w.total_ms += ms;
    w.max_ms = std::max(w.max_ms, ms);
    ++w.steps;
    allowed.clear();
    allowed_punct.clear();
    for (int32_t id = 0; id < v.size(); ++id)
      if ((bits[static_cast<size_t>(id >> 5)] >> (id & 31)) & 1u) {
        if (v.is_end(id)) continue;
        allowed.push_back(id);
        if (punct[static_cast<size_t>(id)]) allowed_punct.push_back(id);
      }
    if (allowed.empty()) break;
    const auto& from = !allowed_punct.empty() && rng() % 100 < 40 ? allowed_punct : allowed;
    VELA_CHECK(m.accept_token(from[rng() % from.size()]), "bench constrain: mask admitted a token the matcher rejects");
  }
  return w;
}

}  // namespace

int bench_constrain_main(int argc, char** argv) {
  Args args(argc, argv, {"help"});
  if (args.has("help")) {
    std::printf(
        "usage: vela bench constrain --tokenizer DIR [--schemas DIR] [--steps N] [--json FILE]\n"
        "  compile time, first mask and first-request / cached mask walks per schema\n");
    return 0;
  }
  const std::string tok_dir = args.get("tokenizer", ".cache/assets/tokenizers/qwen3");
  const std::string schema_dir = args.get("schemas", "tests/fixtures/constrain/schemas");
  const int steps = static_cast<int>(args.get_int("steps", 64));
  const std::string json_path = args.get("json", "");
  args.check_all_used();

  Tokenizer tok = Tokenizer::from_file(tok_dir);
  std::vector<int32_t> ends;
  for (const char* e : {"<|im_end|>", "<|endoftext|>", "</s>"})
    if (auto id = tok.token_to_id(e)) ends.push_back(*id);
  auto t0 = Clock::now();
  auto vocab = constrain::TokenVocab::from_tokenizer(tok, tok.vocab_size(), ends);
  const double vocab_ms = ms_since(t0);
  std::vector<uint8_t> punct(static_cast<size_t>(vocab->size()), 0);
  for (int32_t id = 0; id < vocab->size(); ++id) {
    const std::string& b = vocab->bytes(id);
    bool p = !b.empty() && b.size() <= 3;
    for (char c : b) p = p && !std::isalnum(static_cast<unsigned char>(c)) && static_cast<unsigned char>(c) < 0x80;
    punct[static_cast<size_t>(id)] = p;
  }
  std::printf("vocabulary %s: %lld tokens, byte strings + sorted trie %.1f ms (once per engine)\n\n",
              tok_dir.c_str(), static_cast<long long>(vocab->size()), vocab_ms);

  std::vector<std::pair<std::string, Constraint>> cases;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(schema_dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  json tools = json::array();
  for (const auto& f : files) {
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    json schema = json::parse(ss.str());
    if (schema.contains("schema")) schema = schema["schema"];
    cases.push_back({f.stem().string(), Constraint::json_schema(schema)});
    if (schema.contains("type") && schema["type"] == "object")
      tools.push_back({{"name", f.stem().string()}, {"parameters", schema}});
  }
  cases.push_back({"lazy_tool_calls_all", Constraint::tool_calls({{"tools", tools}, {"lazy", true}, {"parallel", true}})});

  std::printf("%-28s %10s %10s %8s %12s %12s %12s\n", "schema", "compile", "1st mask", "steps",
              "walk uncached", "max mask", "walk cached");
  json rows = json::array();
  double worst_compile = 0, sum_compile = 0, union_compile = 0, worst_first = 0, worst_mask = 0;
  for (const auto& [name, c] : cases) {
    constrain::GrammarCompiler compiler(vocab);
    auto tc = Clock::now();
    auto cg = compiler.compile(c);
    const double compile_ms = ms_since(tc);
    // The first mask alone on a fresh copy (no cache).
    constrain::GrammarCompiler compiler2(vocab);
    auto cg2 = compiler2.compile(c);
    std::vector<uint32_t> bits(static_cast<size_t>(vocab->n_words()));
    constrain::GrammarMatcher m(cg2);
    auto tf = Clock::now();
    m.fill_next_token_bitmask(bits.data());
    const double first_ms = ms_since(tf);
    Walk cold = walk(cg, steps, 1234, punct);
    Walk warm = walk(cg, steps, 1234, punct);
    std::printf("%-28s %7.2f ms %7.2f ms %8d %9.1f ms %9.2f ms %9.2f ms\n", name.c_str(), compile_ms,
                first_ms, cold.steps, cold.total_ms, cold.max_ms, warm.total_ms);
    // The floor is for a typical schema; the all-tools union (the last case) is reported apart.
    if (&c == &cases.back().second) {
      union_compile = compile_ms;
    } else {
      worst_compile = std::max(worst_compile, compile_ms);
      sum_compile += compile_ms;
    }
    worst_first = std::max(worst_first, first_ms);
    worst_mask = std::max(worst_mask, cold.max_ms);
    rows.push_back({{"schema", name}, {"compile_ms", compile_ms}, {"first_mask_ms", first_ms},
                    {"steps", cold.steps}, {"walk_uncached_ms", cold.total_ms},
                    {"max_uncached_mask_ms", cold.max_ms}, {"walk_cached_ms", warm.total_ms}});
  }
  const size_t n_schemas = cases.size() - 1;
  std::printf("\ncompile of the %zu schemas: mean %.2f ms, worst %.2f ms (floor: <= 50 ms); all %zu "
              "tools at once %.2f ms; first mask worst %.2f ms; worst uncached mask on a walk "
              "%.2f ms\n",
              n_schemas, sum_compile / static_cast<double>(n_schemas), worst_compile,
              static_cast<size_t>(tools.size()), union_compile, worst_first, worst_mask);
  if (!json_path.empty()) {
    json j = {{"benchmark", "constrain"}, {"tokenizer", tok_dir}, {"vocab", vocab->size()},
              {"vocab_build_ms", vocab_ms}, {"results", rows}};
    std::string text = j.dump(2) + "\n";
    write_file_atomic(json_path, text.data(), text.size());
  }
  return 0;
}

}  // namespace vela::cli
