// BpeModel: the "model" of a tokenizer.json with type BPE. Holds the vocabulary and the merge ranks
// (keyed by the pair of token ids) and turns one pre-tokenized word into token ids by applying the
// lowest-ranked merge first (leftmost on ties), exactly like Hugging Face tokenizers. Supports
// both merge formats ("a b" strings and ["a", "b"] pairs), ignore_merges, byte_fallback (<0xXX>),
// unk_token (+ fuse_unk), continuing_subword_prefix and end_of_word_suffix.
//
// tokenize() is const and thread-safe: results are memoized in a per-thread word cache.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/json.h"

namespace vela {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct BpeOptions {
  std::optional<std::string> unk_token;
  std::string continuing_subword_prefix;  // "" = none
  std::string end_of_word_suffix;         // "" = none
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

// The vocabulary and merge list of a BPE model as read from a file. tokenizer_json.h streams them
// out of a tokenizer.json without building a JSON tree for them; has_* say whether the file had
// them (an object and an array) at all. A wrong-typed entry is recorded, not thrown, so that the
// model's type is checked first (an unsupported model type says so) and a repeated key can still
// replace it (the last value of a key wins, as in the tree).
struct BpeTables {
  Vocab vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  bool has_vocab = false, has_merges = false;
  std::string merges_error;          // the first bad merge's message, "" when none
  std::vector<std::string> bad_ids;  // vocab keys whose (last) value is not a valid id

  void reset_vocab();
  void reset_merges();
  // Records `key` -> `id` (the last value of a repeated key wins); `valid`: an integer id in
  // [0, 2^31).
  void set_id(std::string key, int64_t id, bool valid);
  // Throws InvalidArgument for the first recorded bad entry.
  void check() const;
};

class BpeModel {
 public:
  // Throws InvalidArgument when a merge names a token (or a merged token) missing from the vocab.
  BpeModel(Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges,
           BpeOptions options);
  // Builds from a tokenizer.json "model" object (type BPE). Throws InvalidArgument / Unsupported.
  static BpeModel from_json(const nlohmann::json& model);
  // The same with the vocab and merges read already: `model`'s own "vocab" / "merges" are ignored.
  static BpeModel from_json(const nlohmann::json& model, BpeTables tables);
  // One merge in the "a b" string form -> ("a", "b"); nullopt when it is not of that form, and
  // the message for merge `index` then.
  static std::optional<std::pair<std::string, std::string>> split_merge(std::string_view merge);
  static std::string split_merge_error(std::string_view merge, size_t index);
  static std::string bad_merge_error(size_t index);  // neither "a b" nor ["a", "b"]

  // Appends the ids of `word` to `out`.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(int32_t id) const;  // nullptr when the id is not in the vocab
  int32_t max_id() const { return max_id_; }         // -1 for an empty vocab
  const Vocab& vocab() const { return vocab_; }
  const BpeOptions& options() const { return options_; }
  size_t n_merges() const { return merges_.size(); }

 private:
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

  Vocab vocab_;
  std::vector<const std::string*> id_to_token_;                       // index = id
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  // (a,b) -> (rank, new id)
  BpeOptions options_;
  std::optional<int32_t> unk_id_;
  int32_t byte_ids_[256];  // <0xXX> ids for byte_fallback, -1 when absent
  int32_t max_id_ = -1;
  uint64_t cache_key_;  // identifies this model in the per-thread caches
};

}  // namespace vela
