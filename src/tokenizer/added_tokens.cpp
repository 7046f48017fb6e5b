// AddedTokens (see added_tokens.h). find_matches follows Hugging Face's AddedVocabulary: matches
// are non-overlapping leftmost-longest; a single_word token that touches a word character (Rust
// regex \w) is skipped (its span is still consumed); lstrip/rstrip widen the match over
// whitespace (Unicode White_Space), never back into the previous match.
#include "tokenizer/added_tokens.h"

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace vela {
using tjson = nlohmann::json;  // tokenizer files: ordered_json parses big objects in O(n^2)

void AddedTokens::Trie::add(const std::string& s, size_t token_idx) {
  int32_t node = 0;
  for (unsigned char c : s) {
    auto it = nodes_[node].next.find(c);
    if (it == nodes_[node].next.end()) {
      nodes_.push_back(Node{});
      int32_t nn = static_cast<int32_t>(nodes_.size() - 1);
      nodes_[node].next[c] = nn;
      node = nn;
    } else {
      node = it->second;
    }
  }
  // The first token given wins over a later duplicate, as with Aho-Corasick pattern order.
  if (nodes_[node].token < 0) nodes_[node].token = static_cast<int64_t>(token_idx);
  first_[static_cast<unsigned char>(s[0])] = true;
}

std::pair<size_t, size_t> AddedTokens::Trie::longest(std::string_view text, size_t pos) const {
  int32_t node = 0;
  size_t best_len = 0, best_tok = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    auto it = nodes_[node].next.find(static_cast<unsigned char>(text[i]));
    if (it == nodes_[node].next.end()) break;
    node = it->second;
    if (nodes_[node].token >= 0) {
      best_len = i + 1 - pos;
      best_tok = static_cast<size_t>(nodes_[node].token);
    }
  }
  return {best_len, best_tok};
}

std::vector<AddedToken> AddedTokens::parse(const tjson& j) {
  std::vector<AddedToken> out;
  if (j.is_null()) return out;
  VELA_CHECK(j.is_array(), "'added_tokens' must be an array");
  for (const auto& t : j) {
    VELA_CHECK(t.is_object() && t.contains("id") && t["id"].is_number_integer() &&
                   t.contains("content") && t["content"].is_string(),
               "each added token needs an integer 'id' and a string 'content'");
    AddedToken a;
    a.id = t["id"].get<int32_t>();
    VELA_CHECK(a.id >= 0, "added token '", t["content"].get<std::string>(), "' has a negative id");
    a.content = t["content"].get<std::string>();
    a.single_word = t.value("single_word", false);
    a.lstrip = t.value("lstrip", false);
    a.rstrip = t.value("rstrip", false);
    a.special = t.value("special", false);
    a.normalized = t.value("normalized", !a.special);
    out.push_back(std::move(a));
  }
  return out;
}

const AddedToken* AddedTokens::find_id(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedTokens::find_content(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

namespace {

uint32_t last_cp(std::string_view s) {
  size_t k = s.size() - 1;
  while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
  return unicode::next_cp(s, k);
}

}  // namespace

void AddedTokens::split(std::string_view text, bool normalized_set,
                        std::vector<Segment>& out) const {
  const Trie& trie = normalized_set ? norm_ : raw_;
  if (text.empty() || trie.empty()) {
    out.push_back({text, -1});
    return;
  }
  size_t start_offset = 0;  // end of the previous emitted match
  size_t pos = 0;
  while (pos < text.size()) {
    if (!trie.can_start(static_cast<unsigned char>(text[pos]))) {
      ++pos;
      continue;
    }
    auto [len, tok_idx] = trie.longest(text, pos);
    if (len == 0) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + len;
    pos = stop;  // non-overlapping, whatever happens to this match
    const AddedToken& tok = tokens_[tok_idx];
    if (tok.single_word) {
      bool start_space = start == 0 || !unicode::is_word_char(last_cp(text.substr(0, start)));
      size_t k = stop;
      bool stop_space = stop == text.size() || !unicode::is_word_char(unicode::next_cp(text, k));
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) {
      size_t s = start;
      while (s > 0) {
        size_t k = s - 1;
        while (k > 0 && (static_cast<unsigned char>(text[k]) & 0xC0) == 0x80) --k;
        size_t kk = k;
        if (!unicode::is_whitespace(unicode::next_cp(text, kk))) break;
        s = k;
      }
      start = std::max(s, start_offset);
    }
    if (tok.rstrip) {
      size_t e = stop;
      while (e < text.size()) {
        size_t k = e;
        if (!unicode::is_whitespace(unicode::next_cp(text, k))) break;
        e = k;
      }
      stop = e;
    }
    if (start_offset < start) out.push_back({text.substr(start_offset, start - start_offset), -1});
    out.push_back({text.substr(start, stop - start), tok.id});
    start_offset = stop;
  }
  if (start_offset != text.size()) out.push_back({text.substr(start_offset), -1});
}

}  // namespace vela
