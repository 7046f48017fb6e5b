// `vela bench spec`: speculative decoding at batch 1 on a real model directory (a tokenizer and
// trained weights: random weights never accept a draft). Greedy decode of N tokens from each
// prompt, without speculation and with each --speculative setting; reports the decode rate (first
// to last token), the speed-up, the acceptance rate and tokens per target step, and checks that
// the tokens are identical to the run without speculation. With --constrained (a built-in JSON
// Schema: an array of strings) or --json-schema FILE every request is constrained (structured
// output) and the prompts ask for the passage as JSON: the speed-up of speculation under a grammar
// (drafts cut to it, verify rows masked after the drafts before them). --regex RE constrains the
// usual prompts' continuations instead (e.g. '[A-Za-z ,;:.]+': prose, the grammar's cost alone).
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "bench/bench_util.h"
#include "cli/args.h"
#include "core/cuda/cuda_api.h"
#include "core/json.h"
#include "engine/engine.h"

namespace vela::cli {
namespace {

using Clock = std::chrono::steady_clock;

// CPU seconds of the whole process (every thread): the work a run costs, which a shared, busy
// machine does not inflate the way it inflates wall time.
double process_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Public-domain text (Genesis 1:1-5, KJV): repeated, its continuation is a copy of itself.
const char* kPassage =
    "In the beginning God created the heaven and the earth. And the earth was without form, and "
    "void; and darkness was upon the face of the deep. And the Spirit of God moved upon the face "
    "of the waters. And God said, Let there be light: and there was light. And God saw the light, "
    "that it was good: and God divided the light from the darkness. And God called the light Day, "
    "and the darkness he called Night. And the evening and the morning were the first day. ";

struct Run {
  std::vector<int32_t> tokens;
  double decode_s = 0;  // first token to last token
  double cpu_s = 0;     // process CPU seconds over the same span
  SpeculativeStats spec;
};

// The built-in schema of --constrained: the passage's sentences as a JSON array of strings.
const char* kBuiltinSchema = R"({"type":"array","items":{"type":"string"},"minItems":1})";

Run run_one(Engine& engine, const std::vector<int32_t>& prompt, int32_t n, float temperature,
            const Constraint& constraint) {
  Request r;
  r.prompt = prompt;
  r.params.constraint = constraint;
  r.params.temperature = temperature;
  r.params.seed = 1;
  r.params.max_tokens = n;
  r.params.ignore_eos = true;
  SpeculativeStats before = engine.stats().speculative;
  RequestHandlePtr h = engine.submit(r);
  VELA_CHECK(h != nullptr, "bench spec: the engine's queue is full");
  StreamEvent ev;
  Clock::time_point first{}, last{};
  double cpu_first = 0, cpu_last = 0;
  bool seen = false;
  while (h->next(ev)) {
    if (ev.tokens.empty()) continue;
    last = Clock::now();
    cpu_last = process_cpu_s();
    if (!seen) {
      first = last;
      cpu_first = cpu_last;
    }
    seen = true;
  }
  Run out;
  out.tokens = h->wait().completions[0].tokens;
  out.decode_s = std::chrono::duration<double>(last - first).count();
  out.cpu_s = cpu_last - cpu_first;
  SpeculativeStats after = engine.stats().speculative;
  out.spec.rows = after.rows - before.rows;
  out.spec.drafted = after.drafted - before.drafted;
  out.spec.accepted = after.accepted - before.accepted;
  out.spec.emitted = after.emitted - before.emitted;
  out.spec.draft_forwards = after.draft_forwards - before.draft_forwards;
  out.spec.draft_seconds = after.draft_seconds - before.draft_seconds;
  return out;
}

}  // namespace

int bench_spec_main(int argc, char** argv) {
  Args args(argc, argv, {"help", "no-graphs", "constrained"});
  if (args.has("help")) {
    std::printf(
        "usage: vela bench spec --model DIR [--device cuda|cpu] [--dtype bf16|f32] [--decode N]\n"
        "                       [--settings 'ngram,k=2;ngram,k=4;ngram,k=8'] [--reps R]\n"
        "                       [--no-graphs] [--temperature T] [--json FILE]\n"
        "                       [--constrained | --json-schema FILE | --regex RE]\n"
        "  Batch-1 decode (greedy unless --temperature) with and without speculation on a\n"
        "  repetitive prompt (a passage repeated) and a plain one (its first sentence). Settings\n"
        "  may name a draft model: 'draft=DIR,k=4'. Sampled draft-model output differs from the\n"
        "  run without speculation (same distribution, other draws): 'same' is then '-'.\n"
        "  --constrained: every request is constrained by a built-in JSON Schema (an array of\n"
        "  strings) and the prompts ask for the passage as JSON; --json-schema FILE: that\n"
        "  schema; --regex RE: every request matches RE (the usual prompts).\n");
    return 0;
  }
  std::string dir = args.require("model");
  Device device = Device::parse(args.get("device", cuda::available() ? "cuda" : "cpu"));
  DType dtype = parse_dtype(args.get("dtype", device.is_cuda() ? "bf16" : "f32"));
  int32_t n = static_cast<int32_t>(args.get_int("decode", 256));
  int reps = static_cast<int>(args.get_int("reps", 3));
  std::string settings_arg = args.get("settings", "ngram,k=2;ngram,k=4;ngram,k=8");
  bool graphs = !args.has("no-graphs");
  std::string json_path = args.get("json", "");
  const float temperature = static_cast<float>(args.get_double("temperature", 0.0));
  const std::string schema_path = args.get("json-schema", "");
  const std::string regex = args.get("regex", "");
  const bool json_mode = args.has("constrained") || !schema_path.empty();
  args.check_all_used();
  VELA_CHECK(!(json_mode && !regex.empty()),
             "bench spec: give one of --constrained, --json-schema FILE and --regex RE");
  Constraint constraint;
  if (json_mode) {
    std::string text = kBuiltinSchema;
    if (!schema_path.empty()) {
      std::ifstream f(schema_path);
      VELA_CHECK(f.good(), "bench spec: cannot read --json-schema ", schema_path);
      text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
    json schema;
    try {
      schema = json::parse(text);
    } catch (const std::exception& e) {
      VELA_CHECK(false, "bench spec: the JSON Schema is not valid JSON: ", e.what());
    }
    constraint = Constraint::json_schema(schema);
  } else if (!regex.empty()) {
    constraint = Constraint::regex(regex);
  }

  std::vector<std::string> settings = {"off"};
  for (size_t s = 0, e; s <= settings_arg.size(); s = e + 1) {
    e = settings_arg.find(';', s);
    if (e == std::string::npos) e = settings_arg.size();
    if (e > s) settings.push_back(settings_arg.substr(s, e - s));
  }
  std::string repeated;
  for (int i = 0; i < 3; ++i) repeated += kPassage;
  repeated += "In the beginning God";
  std::vector<std::pair<std::string, std::string>> prompts = {
      {"repetitive", repeated},
      {"plain", "In the beginning God created the heaven and the earth."}};
  if (json_mode) {
    // The passage as JSON (sentences as strings) twice, then the same request again: the
    // constrained output starts fresh at "[" and may copy it (prompt lookup).
    json sentences = json::array();
    std::string p = kPassage;
    for (size_t b = 0, e; b < p.size(); b = e + 2) {
      e = p.find(". ", b);
      if (e == std::string::npos) break;
      sentences.push_back(p.substr(b, e + 1 - b));
    }
    const std::string ask = "The passage as a JSON array of sentences: ";
    prompts = {{"json-repeat", ask + sentences.dump() + "\n" + ask + sentences.dump() + "\n" + ask},
               {"json-plain", ask}};
  }

  json j;
  j["benchmark"] = "spec";
  j["model"] = dir;
  j["device"] = device.str();
  j["dtype"] = dtype_name(dtype);
  j["decode_tokens"] = n;
  j["temperature"] = temperature;
  j["constraint"] = constraint.active() ? constraint_kind_name(constraint.kind) : "none";
  j["constraint_text"] = constraint.text;
  j["cases"] = json::array();
  std::vector<std::vector<int32_t>> reference(prompts.size());
  std::vector<double> base_rate(prompts.size(), 0), base_cpu_rate(prompts.size(), 0);
  std::printf("%-11s %-36s %5s %10s %8s %11s %8s %10s %9s %s\n", "prompt", "speculative", "n",
              "tok/s", "speedup", "tok/cpu-s", "speedup", "accept", "tok/step", "same");
  for (const std::string& s : settings) {
    EngineConfig ec;
    ec.max_seqs = 4;
    ec.max_ctx = 1024;
    ec.cuda_graphs = graphs;
    ec.speculative = SpeculativeConfig::parse(s);
    std::unique_ptr<Engine> engine = Engine::load(dir, ec, dtype, device);
    VELA_CHECK(engine->tokenizer() != nullptr, "bench spec: ", dir, " has no tokenizer.json");
    for (size_t p = 0; p < prompts.size(); ++p) {
      std::vector<int32_t> ids = engine->tokenizer()->encode(prompts[p].second);
      // Warm-up (graphs, plans, the grammar's masks); the prefix cache then holds the prompt.
      run_one(*engine, ids, 16, temperature, constraint);
      Run best;
      for (int r = 0; r < reps; ++r) {
        Run x = run_one(*engine, ids, n, temperature, constraint);
        if (r == 0 || x.decode_s < best.decode_s) best = x;
      }
      double rate = (static_cast<double>(best.tokens.size()) - 1) / best.decode_s;
      double cpu_rate = (static_cast<double>(best.tokens.size()) - 1) / std::max(best.cpu_s, 1e-9);
      if (s == "off") {
        reference[p] = best.tokens;
        base_rate[p] = rate;
        base_cpu_rate[p] = cpu_rate;
      }
      bool same = best.tokens == reference[p];
      const bool comparable = temperature == 0 || !ec.speculative.uses_draft_model();
      std::printf("%-11s %-36s %5zu %10.1f %7.2fx %11.1f %7.2fx %10.3f %9.2f %s\n",
                  prompts[p].first.c_str(), ec.speculative.describe().c_str(), best.tokens.size(),
                  rate, rate / base_rate[p], cpu_rate, cpu_rate / base_cpu_rate[p],
                  best.spec.acceptance_rate(), best.spec.tokens_per_step(),
                  !comparable ? "-"
                  : same      ? "yes"
                              : "NO");
      j["cases"].push_back({{"prompt", prompts[p].first},
                            {"prompt_tokens", ids.size()},
                            {"decoded_tokens", best.tokens.size()},
                            {"speculative", ec.speculative.describe()},
                            {"tokens_per_s", rate},
                            {"speedup", rate / base_rate[p]},
                            {"tokens_per_cpu_s", cpu_rate},
                            {"cpu_speedup", cpu_rate / base_cpu_rate[p]},
                            {"draft_forwards", best.spec.draft_forwards},
                            {"draft_seconds", best.spec.draft_seconds},
                            {"acceptance_rate", best.spec.acceptance_rate()},
                            {"tokens_per_target_step", best.spec.tokens_per_step()},
                            {"draft_tokens", best.spec.drafted},
                            {"identical_to_off", same}});
    }
  }
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace vela::cli
