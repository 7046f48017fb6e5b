// preprocess(): the whole `vela preprocess` job. JSONL files -> RecordEncoder (in parallel, in
// blocks of lines; output order = input order) -> truncation -> SequencePacker -> ShardWriter ->
// index.json. Bad records are counted by reason (and the first few reported with file:line), never
// fatal; a run in which no record survives throws InvalidArgument listing the reasons, and writes
// no index. Unreadable inputs throw IoError; config problems InvalidArgument.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/json.h"
#include "train/data/preprocess_config.h"

namespace vela {

struct PreprocessOptions {
  bool progress = false;         // progress bar on stderr
  int max_bad_examples = 5;      // bad records reported with file:line and detail
  int64_t block_records = 4096;  // lines encoded per parallel block
};

struct PreprocessStats {
  int64_t n_records = 0, n_ok = 0, n_bad = 0;  // non-blank input lines
  std::map<std::string, int64_t> bad_by_reason;
  std::vector<std::string> bad_examples;  // "file:line: reason: detail"
  int64_t n_docs = 0, n_sequences = 0, n_tokens = 0, n_trained_tokens = 0;
  int64_t n_truncated = 0;  // documents cut (truncate_left/right) or split
  uint64_t n_input_bytes = 0;
  double seconds = 0;
  json to_json() const;
};

PreprocessStats preprocess(const PreprocessConfig& config, const std::vector<std::string>& inputs,
                           const std::string& out_dir, const PreprocessOptions& options = {});

}  // namespace vela
