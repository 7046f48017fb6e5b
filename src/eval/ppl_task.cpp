// `vela eval ppl`: documents -> sliding windows -> LoglikelihoodScorer -> perplexity / bits per
// byte.
#include "eval/ppl_task.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/progress_bar.h"
#include "eval/jsonl_records.h"
#include "eval/loglikelihood.h"

namespace vela::eval {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int64_t count_words(const std::string& text) {
  int64_t n = 0;
  bool in_word = false;
  for (char c : text) {
    bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
    if (!space && !in_word) ++n;
    in_word = !space;
  }
  return n;
}

}  // namespace

int64_t default_batch_tokens(const ModelConfig& config, int64_t longest) {
  const int64_t logits_rows = (int64_t{1} << 28) / std::max<int64_t>(config.vocab_size, 1);
  return std::max<int64_t>({longest, std::min<int64_t>(logits_rows, 8192), 1});
}

json run_ppl(const Transformer& model, const Tokenizer& tokenizer, const PplOptions& o) {
  const ModelConfig& mc = model.config;
  const int64_t max_length = o.max_length > 0 ? o.max_length : mc.max_position_embeddings;
  const int64_t stride = o.stride > 0 ? o.stride : max_length;
  VELA_CHECK(max_length >= 2 && max_length <= mc.max_position_embeddings, "--max-length ",
             max_length, " must be in [2, ", mc.max_position_embeddings,
             "] (the model's max_position_embeddings)");
  VELA_CHECK(stride <= max_length, "--stride ", stride, " must not exceed --max-length ",
             max_length, " (tokens between windows would never be scored)");
  std::string format = o.format;
  if (format == "auto")
    format = ends_with(o.data, ".jsonl") || ends_with(o.data, ".json") ? "jsonl" : "text";
  VELA_CHECK(format == "text" || format == "jsonl", "--format must be auto, text or jsonl, got '",
             format, "'");

  // Documents.
  struct Doc {
    std::string text;
    int64_t line = 0;
  };
  std::vector<Doc> docs;
  if (format == "text") {
    docs.push_back({read_text_file(o.data), 0});
  } else {
    for (const JsonlRecord& rec : read_jsonl(o.data, o.limit)) {
      std::string text = require_string(o.data, rec, o.field);
      if (text.empty()) record_error(o.data, rec, o.field, "the text is empty");
      docs.push_back({std::move(text), rec.line});
    }
  }

  // Windows.
  std::vector<LoglikelihoodRequest> windows;
  std::vector<size_t> window_doc;
  std::vector<int64_t> doc_tokens(docs.size());
  for (size_t d = 0; d < docs.size(); ++d) {
    std::vector<int32_t> ids = tokenizer.encode(docs[d].text, /*add_special_tokens=*/true);
    doc_tokens[d] = static_cast<int64_t>(ids.size());
    const auto n = static_cast<int64_t>(ids.size());
    int64_t prev_end = 0;
    for (int64_t begin = 0; begin < n && n >= 2; begin += stride) {
      const int64_t end = std::min(begin + max_length, n);
      const int64_t len = end - begin;
      const int64_t first = std::max<int64_t>(1, len - (end - prev_end));
      if (len >= 2 && first < len) {
        windows.push_back({std::vector<int32_t>(ids.begin() + begin, ids.begin() + end),
                           static_cast<int32_t>(first)});
        window_doc.push_back(d);
      }
      prev_end = end;
      if (end == n) break;
    }
  }

  const int64_t budget = o.batch_tokens > 0 ? o.batch_tokens : default_batch_tokens(mc, max_length);
  LoglikelihoodScorer scorer(model, budget);
  ProgressBar bar("ppl", windows.size(), o.progress, ProgressBar::Unit::kItems);
  auto results = scorer.score(
      windows, [&](size_t n_done) { bar.update(n_done, static_cast<int64_t>(n_done)); });
  bar.finish(windows.size(), static_cast<int64_t>(windows.size()));

  std::vector<double> doc_nll(docs.size(), 0.0);
  std::vector<int64_t> doc_scored(docs.size(), 0);
  for (size_t w = 0; w < windows.size(); ++w) {
    doc_nll[window_doc[w]] -= results[w].logprob;
    doc_scored[window_doc[w]] += results[w].n_targets;
  }
  double nll = 0;
  int64_t n_scored = 0, n_tokens = 0, n_bytes = 0, n_words = 0;
  json documents = json::array();
  for (size_t d = 0; d < docs.size(); ++d) {
    nll += doc_nll[d];
    n_scored += doc_scored[d];
    n_tokens += doc_tokens[d];
    n_bytes += static_cast<int64_t>(docs[d].text.size());
    n_words += count_words(docs[d].text);
    json jd = {{"n_tokens", doc_tokens[d]}, {"n_scored", doc_scored[d]}, {"nll", doc_nll[d]}};
    if (docs[d].line > 0) jd["line"] = docs[d].line;
    documents.push_back(jd);
  }
  VELA_CHECK(n_scored > 0, o.data, ": nothing to score (every document is shorter than 2 tokens)");
  json metrics = {
      {"perplexity", std::exp(nll / static_cast<double>(n_scored))},
      {"bits_per_byte", nll / (std::log(2.0) * static_cast<double>(n_bytes))},
      {"byte_perplexity", std::exp(nll / static_cast<double>(n_bytes))},
      {"word_perplexity", n_words > 0 ? std::exp(nll / static_cast<double>(n_words)) : 0.0},
      {"nll_per_token", nll / static_cast<double>(n_scored)},
  };
  json counts = {{"n_documents", docs.size()},
                 {"n_tokens", n_tokens},
                 {"n_scored", n_scored},
                 {"n_bytes", n_bytes},
                 {"n_words", n_words},
                 {"n_windows", windows.size()},
                 {"nll", nll}};
  json config = {{"data", o.data},   {"format", format}, {"max_length", max_length},
                 {"stride", stride}, {"limit", o.limit}, {"batch_tokens", budget}};
  if (format == "jsonl") config["field"] = o.field;
  return {{"task", "ppl"},
          {"metrics", metrics},
          {"counts", counts},
          {"config", config},
          {"documents", documents}};
}

}  // namespace vela::eval
