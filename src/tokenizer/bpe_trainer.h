// BpeTrainer: learns a byte-level BPE vocabulary from text, GPT-style: text is cut into words by a
// split regex (the Llama-3 / cl100k pattern by default), special tokens never take part, and the
// vocabulary is laid out as special tokens first, then the 256 byte symbols (GPT-2's byte-level
// alphabet, in byte order), then one token per merge. Pair counts are kept incrementally with a
// lazy max-heap, so each merge only touches the words that contain the pair. The result is saved
// as a tokenizer.json (merges in the pair-list format, ByteLevel pre-tokenizer and decoder, the
// specials as added tokens) that Hugging Face `tokenizers` loads and encodes like vela.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace vela {

// The Llama-3 (cl100k) pre-tokenization regex.
extern const char* const kDefaultSplitPattern;

struct BpeTrainerOptions {
  int32_t vocab_size = 16384;  // specials + 256 bytes + merges
  std::vector<std::string> special_tokens;
  std::string split_pattern = kDefaultSplitPattern;
  int64_t min_frequency = 2;  // a pair seen fewer times is never merged
  bool progress = false;      // progress lines on stderr
};

struct TrainedBpe {
  std::vector<std::string> vocab;                           // index = id, byte-level strings
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  std::vector<std::string> special_tokens;                  // ids 0..n-1
  std::string split_pattern;
};

class BpeTrainer {
 public:
  explicit BpeTrainer(BpeTrainerOptions options);
  // Counts the words of `text` (uses all threads). May be called repeatedly.
  void add_text(std::string_view text);
  // Reads a file and adds its text (invalid UTF-8 is replaced by U+FFFD). Throws IoError.
  void add_file(const std::string& path);
  int64_t n_words() const { return static_cast<int64_t>(word_counts_.size()); }
  TrainedBpe train() const;

  // Writes dir/tokenizer.json (and a minimal tokenizer_config.json). Throws IoError.
  static void save(const TrainedBpe& bpe, const std::string& dir);

 private:
  BpeTrainerOptions options_;
  std::unordered_map<std::string, int64_t> word_counts_;  // raw UTF-8 word -> count
};

}  // namespace vela
