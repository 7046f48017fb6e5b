// `vela eval generate`: records -> prompts -> Engine::generate -> scorers.
#include "eval/generate_task.h"

#include <algorithm>

#include "core/error.h"
#include "core/progress_bar.h"
#include "eval/context_tokens.h"
#include "eval/few_shot.h"
#include "eval/jsonl_records.h"
#include "eval/results.h"
#include "eval/scorers.h"

namespace vela::eval {
namespace {

std::string field_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// `tpl` with every "{name}" replaced by the record's field (a "{" not naming a field stays).
std::string render_prompt(const std::string& path, const JsonlRecord& rec, const std::string& tpl) {
  std::string out;
  for (size_t i = 0; i < tpl.size(); ++i) {
    if (tpl[i] == '{') {
      size_t close = tpl.find('}', i + 1);
      if (close != std::string::npos) {
        std::string name = tpl.substr(i + 1, close - i - 1);
        bool ident = !name.empty() && name.find_first_not_of(
                                          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                          "0123456789_") == std::string::npos;
        if (ident) {
          out += field_text(require_field(path, rec, name));
          i = close;
          continue;
        }
      }
    }
    out += tpl[i];
  }
  return out;
}

std::string default_template(const std::string& path, const JsonlRecord& rec) {
  if (rec.value.contains("question")) return "Question: {question}\nAnswer:";
  if (rec.value.contains("prompt")) return "{prompt}";
  if (rec.value.contains("input")) return "{input}";
  record_error(path, rec, "",
               "no prompt field: expected \"question\", \"prompt\" or \"input\" (or pass "
               "--template)");
}

std::string target_name(const std::string& path, const JsonlRecord& rec, const std::string& given) {
  if (!given.empty()) return given;
  for (const char* k : {"answer", "target", "reference", "output"})
    if (rec.value.contains(k)) return k;
  record_error(path, rec, "",
               "no reference field: expected \"answer\", \"target\", \"reference\" or \"output\" "
               "(or pass --target-field)");
}

// The references: a string, a number, or a list of them.
std::vector<std::string> references(const std::string& path, const JsonlRecord& rec,
                                    const std::string& name) {
  const json& v = require_field(path, rec, name);
  std::vector<std::string> out;
  if (v.is_array()) {
    for (const json& x : v) {
      if (!x.is_string() && !x.is_number())
        record_error(path, rec, name, "list entries must be strings or numbers");
      out.push_back(field_text(x));
    }
    if (out.empty()) record_error(path, rec, name, "the list of references is empty");
  } else if (v.is_string() || v.is_number()) {
    out.push_back(field_text(v));
  } else {
    record_error(path, rec, name,
                 std::string("expected a string, number or list, got ") + v.type_name());
  }
  return out;
}

bool same_answer(const std::string& a, const std::string& b) {
  auto na = scoring::canonical_number(a), nb = scoring::canonical_number(b);
  if (na && nb) return *na == *nb;
  return scoring::exact_match(a, b);
}

struct Scored {
  double score = 0;
  std::optional<std::string> extracted;
};

Scored score_one(const GenerateOptions& o, const std::string& scorer, const std::string& pred,
                 const std::vector<std::string>& refs) {
  Scored s;
  if (scorer == "exact_match") {
    s.extracted = pred;
    for (const auto& r : refs)
      s.score = std::max(s.score, scoring::exact_match(pred, r) ? 1.0 : 0.0);
  } else if (scorer == "rouge_l") {
    s.extracted = pred;
    for (const auto& r : refs) s.score = std::max(s.score, scoring::rouge_l_f1(pred, r));
  } else if (scorer == "gsm8k" || scorer == "last_number") {
    s.extracted = scorer == "gsm8k" ? scoring::extract_gsm8k_answer(pred)
                                    : scoring::extract_last_number(pred);
    for (const auto& r : refs) {
      auto ref =
          scorer == "gsm8k" ? scoring::extract_gsm8k_answer(r) : scoring::canonical_number(r);
      if (!ref) ref = scoring::extract_last_number(r);
      if (s.extracted && ref && *s.extracted == *ref) s.score = 1.0;
    }
  } else {  // regex
    s.extracted = scoring::extract_regex(pred, o.regex, o.regex_group);
    for (const auto& r : refs) {
      std::string ref = scoring::extract_regex(r, o.regex, o.regex_group).value_or(r);
      if (s.extracted && same_answer(*s.extracted, ref)) s.score = 1.0;
    }
  }
  return s;
}

}  // namespace

json run_generate(Engine& engine, const ChatTemplate* chat, const GenerateOptions& o) {
  const Tokenizer* tok = engine.tokenizer();
  VELA_CHECK(tok != nullptr, "vela eval generate needs a tokenizer.json in the model directory");
  const std::vector<std::string> scorers = {"auto",        "exact_match", "gsm8k",
                                            "last_number", "regex",       "rouge_l"};
  VELA_CHECK(std::find(scorers.begin(), scorers.end(), o.scorer) != scorers.end(),
             "--scorer must be auto, exact_match, gsm8k, last_number, regex or rouge_l, got '",
             o.scorer, "'");
  VELA_CHECK(o.scorer != "regex" || !o.regex.empty(), "--scorer regex needs --regex PATTERN");
  if (!o.regex.empty()) scoring::extract_regex("", o.regex, o.regex_group);  // validate early
  VELA_CHECK(o.num_fewshot >= 0, "--num-fewshot must be >= 0, got ", o.num_fewshot);

  std::vector<JsonlRecord> docs = read_jsonl(o.data, o.limit, o.where);
  std::vector<JsonlRecord> shots;
  if (o.num_fewshot > 0) {
    VELA_CHECK(!o.fewshot_file.empty(), "--num-fewshot ", o.num_fewshot, " needs --fewshot-file");
    shots = read_jsonl(o.fewshot_file);
  }
  auto prompt_of = [&](const std::string& path, const JsonlRecord& rec) {
    return render_prompt(
        path, rec, o.prompt_template.empty() ? default_template(path, rec) : o.prompt_template);
  };

  std::vector<std::vector<std::string>> refs;
  std::vector<Request> requests;
  const int64_t max_ctx = engine.max_context();
  const int32_t max_tokens =
      o.max_tokens > 0 ? o.max_tokens : static_cast<int32_t>(std::min<int64_t>(256, max_ctx / 2));
  VELA_CHECK(max_tokens >= 1 && max_tokens < max_ctx, "--max-tokens ", max_tokens,
             " must be in [1, ", max_ctx, ") (the model's context)");
  std::vector<std::string> stop = o.stop;
  if (!o.stop_given && chat == nullptr) stop = {"\n\n", "Question:"};
  for (size_t d = 0; d < docs.size(); ++d) {
    const JsonlRecord& rec = docs[d];
    refs.push_back(references(o.data, rec, target_name(o.data, rec, o.target_field)));
    std::string text;
    if (o.num_fewshot > 0) {
      int64_t exclude = -1;
      if (o.fewshot_file == o.data)
        for (size_t s = 0; s < shots.size(); ++s)
          if (shots[s].line == rec.line) exclude = static_cast<int64_t>(s);
      for (size_t s : select_few_shot(shots.size(), o.num_fewshot, o.seed, d, exclude)) {
        const JsonlRecord& shot = shots[s];
        text += prompt_of(o.fewshot_file, shot) + " " +
                references(o.fewshot_file, shot, target_name(o.fewshot_file, shot, o.target_field))
                    .front() +
                "\n\n";
      }
    }
    bool add_special = true;
    if (o.prompt_template.empty() && rec.value.contains("messages")) {
      // A chat record (the RL prompt layout): the conversation up to its last user turn, rendered
      // by the chat template with the generation prompt; a trailing assistant turn is the answer.
      VELA_CHECK(chat != nullptr, o.data, ":", rec.line,
                 ": records with \"messages\" need --chat-template");
      VELA_CHECK(o.num_fewshot == 0, o.data, ":", rec.line,
                 ": few-shot examples are not supported for \"messages\" records");
      json msgs = rec.value["messages"];
      VELA_CHECK(msgs.is_array() && !msgs.empty(), o.data, ":", rec.line,
                 ": field 'messages' must be a non-empty list of {role, content}");
      if (msgs.back().is_object() && msgs.back().value("role", "") == "assistant")
        msgs.erase(msgs.size() - 1);
      VELA_CHECK(!msgs.empty(), o.data, ":", rec.line, ": field 'messages' has no prompt turn");
      text = chat->render(msgs, nullptr, true);
      add_special = false;
    } else {
      text += prompt_of(o.data, rec);
      if (chat != nullptr) {
        text = chat->render(json::array({{{"role", "user"}, {"content", text}}}), nullptr, true);
        add_special = false;
      }
    }
    Request r;
    r.prompt = tok->encode(text, add_special);
    VELA_CHECK(!r.prompt.empty(), o.data, ":", rec.line, ": the prompt encodes to no token");
    truncate_left(r.prompt, max_ctx - max_tokens);
    r.params.max_tokens = max_tokens;
    r.params.temperature = o.temperature;
    r.params.seed = o.seed + d;
    r.params.stop = stop;
    requests.push_back(std::move(r));
  }
  std::string scorer = o.scorer;
  if (scorer == "auto")
    scorer = refs.front().front().find("####") != std::string::npos ? "gsm8k" : "exact_match";

  ProgressBar bar("generate", requests.size(), o.progress, ProgressBar::Unit::kItems);
  std::vector<RequestResult> results;
  for (size_t b = 0; b < requests.size(); b += static_cast<size_t>(o.max_batch)) {
    size_t e = std::min(requests.size(), b + static_cast<size_t>(o.max_batch));
    std::vector<Request> chunk(requests.begin() + static_cast<std::ptrdiff_t>(b),
                               requests.begin() + static_cast<std::ptrdiff_t>(e));
    for (RequestResult& r : engine.generate(chunk)) results.push_back(std::move(r));
    bar.update(e, static_cast<int64_t>(e));
  }
  bar.finish(requests.size(), static_cast<int64_t>(requests.size()));

  std::vector<double> scores, extracted;
  json samples = json::array();
  for (size_t d = 0; d < docs.size(); ++d) {
    const Completion& c = results[d].completions.at(0);
    VELA_CHECK_T(InternalError, c.error.empty(), o.data, ":", docs[d].line,
                 ": generation failed: ", c.error);
    Scored s = score_one(o, scorer, c.text, refs[d]);
    scores.push_back(s.score);
    extracted.push_back(s.extracted ? 1.0 : 0.0);
    samples.push_back({{"line", docs[d].line},
                       {"prompt_tokens", results[d].prompt_tokens},
                       {"output", c.text},
                       {"finish_reason", finish_reason_name(c.finish_reason)},
                       {"extracted", s.extracted ? json(*s.extracted) : json(nullptr)},
                       {"references", refs[d]},
                       {"score", s.score}});
  }
  const std::string metric = scorer == "rouge_l" ? "rouge_l" : "exact_match";
  json metrics = {{metric, mean(scores)}, {metric + "_stderr", mean_stderr(scores)}};
  if (scorer != "exact_match" && scorer != "rouge_l") metrics["extracted"] = mean(extracted);
  return {{"task", "generate"},
          {"metrics", metrics},
          {"counts", {{"n_documents", docs.size()}}},
          {"config",
           {{"data", o.data},
            {"scorer", scorer},
            {"regex", o.regex},
            {"regex_group", o.regex_group},
            {"template", o.prompt_template},
            {"fewshot_file", o.fewshot_file},
            {"num_fewshot", o.num_fewshot},
            {"seed", o.seed},
            {"max_tokens", max_tokens},
            {"temperature", o.temperature},
            {"stop", stop},
            {"limit", o.limit},
            {"chat_template", chat != nullptr}}},
          {"samples", samples}};
}

}  // namespace vela::eval
