// BpeTrainer (see bpe_trainer.h).
#include "tokenizer/bpe_trainer.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <queue>
#include <sstream>

#include "core/error.h"
#include "core/json.h"
#include "core/parallel.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace vela {

const char* const kDefaultSplitPattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

BpeTrainer::BpeTrainer(BpeTrainerOptions options) : options_(std::move(options)) {
  VELA_CHECK(options_.vocab_size >= static_cast<int32_t>(options_.special_tokens.size()) + 256,
             "vocab size ", options_.vocab_size, " is smaller than the ",
             options_.special_tokens.size(), " special tokens + 256 byte symbols");
}

void BpeTrainer::add_text(std::string_view text) {
  VELA_CHECK(unicode::find_invalid_utf8(text) == std::string_view::npos,
             "training text is not valid UTF-8");
  // Special tokens are cut out first and never counted.
  AddedTokens specials;
  std::vector<AddedToken> toks;
  for (size_t k = 0; k < options_.special_tokens.size(); ++k)
    toks.push_back(
        {static_cast<int32_t>(k), options_.special_tokens[k], false, false, false, false, true});
  specials.build(std::move(toks), [](const std::string& s) { return s; });
  std::vector<Segment> segs;
  specials.split(text, false, segs);
  std::vector<std::string_view> pieces;
  for (const auto& s : segs)
    if (s.token_id < 0 && !s.text.empty()) pieces.push_back(s.text);
  // Chunks end at line breaks so no word straddles two chunks (the split regex never matches across
  // "\n" followed by a letter... except whitespace runs, which only change counts of blank runs).
  std::vector<std::string_view> chunks;
  for (std::string_view p : pieces) {
    size_t b = 0;
    while (b < p.size()) {
      size_t e = std::min(p.size(), b + (1 << 20));
      while (e < p.size() && p[e - 1] != '\n') ++e;
      chunks.push_back(p.substr(b, e - b));
      b = e;
    }
  }
  Regex re(options_.split_pattern);
  int nt = num_threads();
  std::vector<std::unordered_map<std::string, int64_t>> local(static_cast<size_t>(nt));
  parallel_for(static_cast<int64_t>(chunks.size()), 1, [&](int64_t b, int64_t e) {
    auto& m = local[static_cast<size_t>(thread_index())];
    std::vector<std::pair<size_t, size_t>> ranges;
    for (int64_t c = b; c < e; ++c) {
      ranges.clear();
      re.find_all(chunks[c], ranges);
      for (auto [rb, re_] : ranges) ++m[std::string(chunks[c].substr(rb, re_ - rb))];
    }
  });
  for (auto& m : local)
    for (auto& [w, n] : m) word_counts_[w] += n;
}

void BpeTrainer::add_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) VELA_THROW(IoError, "cannot open training file '", path, "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  add_text(unicode::utf8_lossy(ss.str()));
}

namespace {
inline uint64_t key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}
struct HeapEntry {
  int64_t count;
  uint64_t pair;
  bool operator<(const HeapEntry& o) const {  // max count first; ties: smaller pair first
    return count != o.count ? count < o.count : pair > o.pair;
  }
};
}  // namespace

TrainedBpe BpeTrainer::train() const {
  auto t0 = std::chrono::steady_clock::now();
  TrainedBpe r;
  r.special_tokens = options_.special_tokens;
  r.split_pattern = options_.split_pattern;
  r.vocab = options_.special_tokens;
  const int32_t n_special = static_cast<int32_t>(options_.special_tokens.size());
  const auto& b2s = unicode::byte_to_utf8();
  std::unordered_map<std::string, int32_t> token_ids;
  for (int32_t k = 0; k < n_special; ++k) token_ids.emplace(r.vocab[k], k);
  for (int b = 0; b < 256; ++b) {
    token_ids.emplace(b2s[b], static_cast<int32_t>(r.vocab.size()));
    r.vocab.push_back(b2s[b]);
  }

  // Words as symbol sequences, sorted for determinism.
  std::vector<std::pair<std::string, int64_t>> sorted(word_counts_.begin(), word_counts_.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::vector<int32_t>> words(sorted.size());
  std::vector<int64_t> counts(sorted.size());
  for (size_t w = 0; w < sorted.size(); ++w) {
    counts[w] = sorted[w].second;
    for (unsigned char c : sorted[w].first) words[w].push_back(n_special + c);
  }
  std::unordered_map<uint64_t, int64_t> pair_counts;
  std::unordered_map<uint64_t, std::vector<int32_t>> where;
  for (size_t w = 0; w < words.size(); ++w) {
    for (size_t i = 0; i + 1 < words[w].size(); ++i) {
      uint64_t k = key(words[w][i], words[w][i + 1]);
      pair_counts[k] += counts[w];
      auto& v = where[k];
      if (v.empty() || v.back() != static_cast<int32_t>(w)) v.push_back(static_cast<int32_t>(w));
    }
  }
  std::priority_queue<HeapEntry> heap;
  for (auto& [k, c] : pair_counts) heap.push({c, k});

  const int32_t target = options_.vocab_size;
  std::vector<int32_t> next;
  while (static_cast<int32_t>(r.vocab.size()) < target && !heap.empty()) {
    HeapEntry top = heap.top();
    heap.pop();
    auto pc = pair_counts.find(top.pair);
    int64_t actual = pc == pair_counts.end() ? 0 : pc->second;
    if (actual != top.count) {
      if (actual > 0) heap.push({actual, top.pair});
      continue;
    }
    if (actual < options_.min_frequency) break;
    int32_t a = static_cast<int32_t>(top.pair >> 32),
            b = static_cast<int32_t>(top.pair & 0xFFFFFFFFu);
    std::string merged = r.vocab[a] + r.vocab[b];
    int32_t new_id;
    auto it = token_ids.find(merged);
    if (it != token_ids.end()) {
      new_id = it->second;
    } else {
      new_id = static_cast<int32_t>(r.vocab.size());
      token_ids.emplace(merged, new_id);
      r.vocab.push_back(merged);
    }
    r.merges.emplace_back(r.vocab[a], r.vocab[b]);

    std::vector<int32_t> affected = std::move(where[top.pair]);
    where.erase(top.pair);
    for (int32_t w : affected) {
      auto& s = words[w];
      bool has = false;
      for (size_t i = 0; i + 1 < s.size(); ++i) has |= (s[i] == a && s[i + 1] == b);
      if (!has) continue;
      int64_t c = counts[w];
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        auto p = pair_counts.find(key(s[i], s[i + 1]));
        if ((p->second -= c) == 0) pair_counts.erase(p);
      }
      next.clear();
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          next.push_back(new_id);
          ++i;
        } else {
          next.push_back(s[i]);
        }
      }
      s.swap(next);
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        uint64_t k = key(s[i], s[i + 1]);
        int64_t& pcount = pair_counts[k];
        pcount += c;
        if (s[i] == new_id || s[i + 1] == new_id) {
          auto& v = where[k];
          if (v.empty() || v.back() != w) v.push_back(w);
          heap.push({pcount, k});
        }
      }
    }
    if (options_.progress && (r.merges.size() % 1000 == 0)) {
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "[train] %zu merges, vocab %zu / %d (%.1f s)\n", r.merges.size(),
                   r.vocab.size(), target, secs);
    }
  }
  return r;
}

namespace {
std::string q(const std::string& s) { return json(s).dump(); }
}  // namespace

void BpeTrainer::save(const TrainedBpe& bpe, const std::string& dir) {
  std::filesystem::create_directories(dir);
  std::string path = (std::filesystem::path(dir) / "tokenizer.json").string();
  std::ostringstream o;
  o << "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  "
       "\"added_tokens\": [";
  for (size_t k = 0; k < bpe.special_tokens.size(); ++k) {
    o << (k ? "," : "") << "\n    {\"id\": " << k << ", \"content\": " << q(bpe.special_tokens[k])
      << ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, "
         "\"special\": true}";
  }
  o << "\n  ],\n  \"normalizer\": null,\n";
  o << "  \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
       "\"pattern\": {\"Regex\": "
    << q(bpe.split_pattern)
    << "}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", "
       "\"add_prefix_space\": false, "
       "\"trim_offsets\": true, \"use_regex\": false}]},\n";
  o << "  \"post_processor\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
       "\"trim_offsets\": false, "
       "\"use_regex\": false},\n";
  o << "  \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": "
       "true, \"use_regex\": false},\n";
  o << "  \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "
       "\"continuing_subword_prefix\": null, "
       "\"end_of_word_suffix\": null, \"fuse_unk\": false, \"byte_fallback\": false, "
       "\"ignore_merges\": false,\n";
  o << "    \"vocab\": {";
  // A merged string may repeat an existing token (then it keeps its first id): vocab lists each
  // once.
  for (size_t id = 0; id < bpe.vocab.size(); ++id)
    o << (id ? ",\n      " : "\n      ") << q(bpe.vocab[id]) << ": " << id;
  o << "\n    },\n    \"merges\": [";
  for (size_t k = 0; k < bpe.merges.size(); ++k)
    o << (k ? ",\n      " : "\n      ") << "[" << q(bpe.merges[k].first) << ", "
      << q(bpe.merges[k].second) << "]";
  o << "\n    ]\n  }\n}\n";
  std::ofstream f(path, std::ios::binary);
  if (!f) VELA_THROW(IoError, "cannot write '", path, "'");
  f << o.str();
  if (!f) VELA_THROW(IoError, "failed writing '", path, "'");
  std::ofstream c((std::filesystem::path(dir) / "tokenizer_config.json").string());
  json cfg = {{"tokenizer_class", "PreTrainedTokenizerFast"},
              {"clean_up_tokenization_spaces", false}};
  c << cfg.dump(2) << "\n";
}

}  // namespace vela
