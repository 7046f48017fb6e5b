// `vela eval choice`: documents -> (context, choice) pairs -> LoglikelihoodScorer -> acc, acc_norm.
#include "eval/choice_task.h"

#include <map>

#include "core/error.h"
#include "core/progress_bar.h"
#include "eval/choice_docs.h"
#include "eval/context_tokens.h"
#include "eval/few_shot.h"
#include "eval/jsonl_records.h"
#include "eval/loglikelihood.h"
#include "eval/ppl_task.h"
#include "eval/results.h"

namespace vela::eval {
namespace {

int32_t argmax(const std::vector<double>& v) {
  int32_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  return best;
}

}  // namespace

json run_choice(const Transformer& model, const Tokenizer& tok, const ChatTemplate* chat,
                const ChoiceOptions& o) {
  const ChoiceFormat format = parse_choice_format(o.format);
  std::vector<ChoiceDoc> docs;
  for (const JsonlRecord& rec : read_jsonl(o.data, o.limit))
    docs.push_back(parse_choice_doc(o.data, rec, format));
  std::vector<ChoiceDoc> shots;
  VELA_CHECK(o.num_fewshot >= 0, "--num-fewshot must be >= 0, got ", o.num_fewshot);
  if (o.num_fewshot > 0) {
    VELA_CHECK(!o.fewshot_file.empty(), "--num-fewshot ", o.num_fewshot,
               " needs --fewshot-file (e.g. the dev split)");
    for (const JsonlRecord& rec : read_jsonl(o.fewshot_file))
      shots.push_back(parse_choice_doc(o.fewshot_file, rec, format));
  }
  const bool same_file = !o.fewshot_file.empty() && o.fewshot_file == o.data;
  const int64_t max_tokens = model.config.max_position_embeddings;

  std::vector<LoglikelihoodRequest> requests;
  std::vector<size_t> first_request(docs.size());
  for (size_t d = 0; d < docs.size(); ++d) {
    const ChoiceDoc& doc = docs[d];
    std::string context = doc.description;
    if (o.num_fewshot > 0) {
      int64_t exclude = -1;
      if (same_file)
        for (size_t s = 0; s < shots.size(); ++s)
          if (shots[s].line == doc.line) exclude = static_cast<int64_t>(s);
      for (size_t s : select_few_shot(shots.size(), o.num_fewshot, o.seed, d, exclude))
        context +=
            shots[s].query + " " + shots[s].choices[static_cast<size_t>(shots[s].gold)] + "\n\n";
    }
    context += doc.query;
    std::string delimiter = " ";
    bool add_special = true;
    if (chat != nullptr) {
      json messages = json::array({{{"role", "user"}, {"content", context}}});
      context = chat->render(messages, nullptr, /*add_generation_prompt=*/true);
      delimiter = "";
      add_special = false;  // the template writes its own special tokens
    }
    first_request[d] = requests.size();
    for (const std::string& c : doc.choices) {
      try {
        requests.push_back(encode_pair(tok, context, delimiter + c, add_special, max_tokens));
      } catch (const InvalidArgument& e) {
        VELA_THROW(InvalidArgument, o.data, ":", doc.line, ": ", e.what());
      }
    }
  }

  int64_t longest = 2;
  for (const auto& r : requests) longest = std::max<int64_t>(longest, r.tokens.size());
  const int64_t budget =
      o.batch_tokens > 0 ? o.batch_tokens : default_batch_tokens(model.config, longest);
  LoglikelihoodScorer scorer(model, budget);
  ProgressBar bar("choice", requests.size(), o.progress, ProgressBar::Unit::kItems);
  auto results = scorer.score(requests, [&](size_t n) { bar.update(n, static_cast<int64_t>(n)); });
  bar.finish(requests.size(), static_cast<int64_t>(requests.size()));

  std::vector<double> acc, acc_norm;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> by_subject;
  json samples = json::array();
  for (size_t d = 0; d < docs.size(); ++d) {
    const ChoiceDoc& doc = docs[d];
    std::vector<double> ll, ll_norm;
    for (size_t c = 0; c < doc.choices.size(); ++c) {
      double lp = results[first_request[d] + c].logprob;
      ll.push_back(lp);
      ll_norm.push_back(lp / static_cast<double>(std::max<size_t>(doc.choices[c].size(), 1)));
    }
    int32_t pred = argmax(ll), pred_norm = argmax(ll_norm);
    acc.push_back(pred == doc.gold ? 1.0 : 0.0);
    acc_norm.push_back(pred_norm == doc.gold ? 1.0 : 0.0);
    if (!doc.subject.empty()) {
      by_subject[doc.subject].first.push_back(acc.back());
      by_subject[doc.subject].second.push_back(acc_norm.back());
    }
    samples.push_back({{"line", doc.line},
                       {"format", choice_format_name(doc.format)},
                       {"gold", doc.gold},
                       {"pred", pred},
                       {"pred_norm", pred_norm},
                       {"logprobs", ll}});
  }
  json metrics = {{"acc", mean(acc)},
                  {"acc_stderr", mean_stderr(acc)},
                  {"acc_norm", mean(acc_norm)},
                  {"acc_norm_stderr", mean_stderr(acc_norm)}};
  json out = {{"task", "choice"},
              {"metrics", metrics},
              {"counts", {{"n_documents", docs.size()}, {"n_requests", requests.size()}}},
              {"config",
               {{"data", o.data},
                {"format", o.format},
                {"fewshot_file", o.fewshot_file},
                {"num_fewshot", o.num_fewshot},
                {"seed", o.seed},
                {"limit", o.limit},
                {"chat_template", chat != nullptr},
                {"batch_tokens", budget}}},
              {"samples", samples}};
  if (!by_subject.empty()) {
    json subjects = json::object();
    for (const auto& [s, v] : by_subject)
      subjects[s] = {{"n", v.first.size()}, {"acc", mean(v.first)}, {"acc_norm", mean(v.second)}};
    out["subjects"] = subjects;
  }
  return out;
}

}  // namespace vela::eval
