// AddedTokens: the "added_tokens" of a tokenizer.json (special or not). Finds them in text before
// the model runs, leftmost-longest like Hugging Face's Aho-Corasick matcher, applying single_word,
// lstrip and rstrip. Tokens with normalized=false are matched in the raw input, the others in the
// normalized text (each set has its own trie). Immutable and thread-safe once built.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/json.h"

namespace vela {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

// A piece of the input: either text to tokenize or an added token's id.
struct Segment {
  std::string_view text;  // for an added token: the matched span (incl. stripped spaces)
  int32_t token_id = -1;  // >= 0 for an added token
};

class AddedTokens {
 public:
  AddedTokens() = default;
  // `normalize` rewrites a normalized=true token's content into the form it is matched in.
  template <typename NormalizeFn>
  void build(std::vector<AddedToken> tokens, NormalizeFn&& normalize) {
    tokens_ = std::move(tokens);
    std::vector<std::string> raw_patterns, norm_patterns;
    for (size_t k = 0; k < tokens_.size(); ++k) {
      by_id_[tokens_[k].id] = k;
      by_content_[tokens_[k].content] = k;
      if (tokens_[k].content.empty()) continue;
      if (tokens_[k].normalized)
        norm_.add(normalize(tokens_[k].content), k);
      else
        raw_.add(tokens_[k].content, k);
    }
  }
  static std::vector<AddedToken> parse(const nlohmann::json& added_tokens);

  bool empty() const { return tokens_.empty(); }
  // Splits `text` on the raw (normalized=false) or normalized tokens; appends to `out`.
  void split(std::string_view text, bool normalized_set, std::vector<Segment>& out) const;

  const AddedToken* find_id(int32_t id) const;
  const AddedToken* find_content(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // A byte trie over token contents; a node's `token` is the token that ends there.
  class Trie {
   public:
    void add(const std::string& s, size_t token_idx);
    // Longest match starting at `pos`: (length, token index) or length 0.
    std::pair<size_t, size_t> longest(std::string_view text, size_t pos) const;
    bool empty() const { return nodes_.size() <= 1; }
    bool can_start(unsigned char c) const { return first_[c]; }

   private:
    struct Node {
      std::unordered_map<unsigned char, int32_t> next;
      int64_t token = -1;
    };
    std::vector<Node> nodes_{Node{}};
    bool first_[256] = {};
  };

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, size_t> by_content_;
  Trie raw_, norm_;
};

}  // namespace vela
