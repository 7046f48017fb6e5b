// preprocess(): read JSONL in blocks, encode in parallel, pack and write shards in input order.
#include "train/data/preprocess.h"

#include <omp.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/log.h"
#include "core/parallel.h"
#include "core/sha256.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "core/progress_bar.h"
#include "train/data/record_encoder.h"
#include "train/data/sequence_packer.h"
#include "train/data/shard_writer.h"

namespace vela {
namespace fs = std::filesystem;

namespace {

bool truncate_has_target(const EncodedDoc& d) {
  for (uint8_t m : d.mask)
    if (m) return true;
  return false;
}

}  // namespace

json PreprocessStats::to_json() const {
  json j;
  j["n_records"] = n_records;
  j["n_ok"] = n_ok;
  j["n_bad"] = n_bad;
  j["bad"] = json::object();
  for (const auto& [k, v] : bad_by_reason) j["bad"][k] = v;
  j["n_truncated"] = n_truncated;
  j["n_docs"] = n_docs;
  j["n_sequences"] = n_sequences;
  j["n_tokens"] = n_tokens;
  j["n_trained_tokens"] = n_trained_tokens;
  j["n_input_bytes"] = n_input_bytes;
  return j;
}

PreprocessStats preprocess(const PreprocessConfig& config, const std::vector<std::string>& inputs,
                           const std::string& out_dir, const PreprocessOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  VELA_CHECK(!inputs.empty(), "preprocess needs at least one input JSONL file");
  PreprocessStats st;
  json input_list = json::array();
  for (const auto& in : inputs) {
    std::error_code ec;
    VELA_CHECK_T(IoError, fs::is_regular_file(in, ec), "input '", in, "' is not a readable file");
    uint64_t n = fs::file_size(in, ec);
    st.n_input_bytes += n;
    input_list.push_back({{"path", in}, {"bytes", n}});
  }

  // Tokenizer (+ chat template) and their hashes: a dataset records exactly what made it.
  fs::path tok_path = config.tokenizer;
  fs::path tok_dir = fs::is_directory(tok_path) ? tok_path : tok_path.parent_path();
  Tokenizer tokenizer = Tokenizer::from_file(config.tokenizer);
  json tok_info;
  tok_info["path"] = config.tokenizer;
  fs::path tok_json = fs::is_directory(tok_path) ? tok_path / "tokenizer.json" : tok_path;
  if (fs::exists(tok_json)) tok_info["sha256"] = sha256_file(tok_json.string());
  tok_info["vocab_size"] = tokenizer.vocab_size();
  std::unique_ptr<ChatTemplate> tpl;
  if (config.format != RecordFormat::kText) {
    tpl = std::make_unique<ChatTemplate>(ChatTemplate::from_tokenizer_config(tok_dir.string()));
    tok_info["chat_template_sha256"] = sha256_hex(tpl->source());
  }
  RecordEncoder encoder(config, tokenizer, tpl.get());
  if (encoder.bos_id()) tok_info["bos_id"] = *encoder.bos_id();
  if (encoder.eos_id()) tok_info["eos_id"] = *encoder.eos_id();

  ShardWriter writer(out_dir, config.shard_tokens);
  SequencePacker packer(config.seq_len, config.packing, writer, config.packing_window);
  const int n_threads = config.threads > 0 ? config.threads : num_threads();
  const int64_t max_length = config.effective_max_length();
  const bool preference = config.format == RecordFormat::kPreference;
  const bool prompt_only = config.format == RecordFormat::kPrompt;
  std::vector<std::string> answers;  // prompt format: one per written sequence
  ProgressBar bar("preprocess", st.n_input_bytes, options.progress);
  uint64_t bytes_done = 0;

  auto count_bad = [&](const std::string& file, int64_t line_no, const std::string& reason,
                       const std::string& detail) {
    st.n_bad += 1;
    st.bad_by_reason[reason] += 1;
    if (static_cast<int>(st.bad_examples.size()) < options.max_bad_examples)
      st.bad_examples.push_back(file + ":" + std::to_string(line_no) + ": " + reason +
                                (detail.empty() ? "" : ": " + detail.substr(0, 200)));
  };

  std::vector<std::string> lines;
  std::vector<int64_t> line_nos;
  std::vector<EncodeResult> results;
  for (const auto& in : inputs) {
    std::ifstream f(in, std::ios::binary);
    VELA_CHECK_T(IoError, f.good(), "cannot open input '", in, "'");
    int64_t line_no = 0;
    bool eof = false;
    while (!eof) {
      lines.clear();
      line_nos.clear();
      std::string line;
      while (static_cast<int64_t>(lines.size()) < options.block_records) {
        if (!std::getline(f, line)) {
          eof = true;
          break;
        }
        ++line_no;
        bytes_done += line.size() + 1;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank line
        lines.push_back(std::move(line));
        line_nos.push_back(line_no);
      }
      VELA_CHECK_T(IoError, eof ? !f.bad() : true, "error reading '", in, "'");
      int64_t n = static_cast<int64_t>(lines.size());
      results.assign(static_cast<size_t>(n), EncodeResult{});
#pragma omp parallel for schedule(dynamic, 8) num_threads(n_threads) if (n > 1)
      for (int64_t i = 0; i < n; ++i) results[i] = encoder.encode(lines[i]);
      for (int64_t i = 0; i < n; ++i) {
        st.n_records += 1;
        EncodeResult& r = results[i];
        // A preference record without one of its responses is a broken dataset, not noise.
        VELA_CHECK(r.bad_reason != "missing_chosen" && r.bad_reason != "missing_rejected", in,
                   ":", line_nos[i], ": ", r.detail);
        if (!r.ok()) {
          count_bad(in, line_nos[i], r.bad_reason, r.detail);
          continue;
        }
        if (preference || prompt_only) {
          // Rows of their own, never cut: a cut response (or prompt) would train a different
          // preference / ask a different question.
          const size_t longest = std::max(r.doc.tokens.size(), r.rejected.tokens.size());
          if (static_cast<int64_t>(longest) > max_length) {
            count_bad(in, line_nos[i], "too_long",
                      std::to_string(longest) + " tokens > max_length " +
                          std::to_string(max_length));
            continue;
          }
          if (preference && (!truncate_has_target(r.doc) || !truncate_has_target(r.rejected))) {
            count_bad(in, line_nos[i], "no_trained_tokens", "an empty response");
            continue;
          }
          st.n_ok += 1;
          packer.add(std::move(r.doc));
          if (preference) packer.add(std::move(r.rejected));
          if (prompt_only) answers.push_back(std::move(r.answer));
          continue;
        }
        size_t n_tok = r.doc.tokens.size();
        std::string reason;
        std::vector<EncodedDoc> pieces =
            truncate_document(std::move(r.doc), max_length, config.truncation, &reason);
        if (pieces.empty()) {
          count_bad(in, line_nos[i], reason,
                    reason == "too_long" ? std::to_string(n_tok) + " tokens > max_length " +
                                               std::to_string(max_length)
                                         : "");
          continue;
        }
        if (static_cast<int64_t>(n_tok) > max_length) st.n_truncated += 1;
        st.n_ok += 1;
        for (auto& p : pieces) packer.add(std::move(p));
      }
      bar.update(std::min(bytes_done, st.n_input_bytes), st.n_records);
    }
  }
  packer.finish();
  bar.finish(st.n_input_bytes, st.n_records);
  if (writer.n_sequences() == 0) {
    std::string reasons;
    for (const auto& [k, v] : st.bad_by_reason) reasons += " " + k + "=" + std::to_string(v);
    VELA_THROW(InvalidArgument, "no usable records in ", st.n_records, " (bad:", reasons,
               st.bad_examples.empty() ? "" : "; first: " + st.bad_examples[0], ")");
  }
  st.n_docs = writer.n_docs();
  st.n_sequences = writer.n_sequences();
  st.n_tokens = writer.n_tokens();
  st.n_trained_tokens = writer.n_trained_tokens();
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  json extra;
  if (prompt_only) {
    // The reference answers, line i = sequence i (the reward's ground truth).
    const fs::path ap = fs::path(out_dir) / "answers.jsonl";
    {
      std::ofstream f(ap, std::ios::binary | std::ios::trunc);
      VELA_CHECK_T(IoError, f.good(), "cannot write '", ap.string(), "'");
      for (const std::string& a : answers) f << json(a).dump() << "\n";
      VELA_CHECK_T(IoError, f.good(), "error writing '", ap.string(), "'");
    }
    extra["answers"] = {{"file", "answers.jsonl"},
                        {"n", static_cast<int64_t>(answers.size())},
                        {"sha256", sha256_file(ap.string())}};
  }
  extra["config"] = config.to_json();
  extra["tokenizer"] = tok_info;
  extra["inputs"] = input_list;
  extra["records"] = st.to_json();
  writer.finish(extra);
  VELA_LOG_INFO("[preprocess] ", st.n_ok, "/", st.n_records, " records -> ", st.n_sequences,
                " sequences, ", st.n_tokens, " tokens in ", out_dir);
  return st;
}

}  // namespace vela
