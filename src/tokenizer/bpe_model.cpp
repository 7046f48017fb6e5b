// BpeModel (see bpe_model.h). The merge loop keeps the word as a doubly linked list of symbols and
// a min-heap of candidate merges ordered by (rank, position); a candidate whose symbols changed
// since it was queued is dropped when popped, as in Hugging Face's Word::merge_all.
#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <memory>
#include <queue>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace vela {
using tjson = nlohmann::json;  // tokenizer files: ordered_json parses big objects in O(n^2)
namespace {

constexpr size_t kCacheCapacity = 1 << 18;  // words per thread per model
constexpr size_t kMaxCachedWordBytes = 256;

inline uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

struct WordCache {
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
};

// Per-thread caches, keyed by model (a never-reused counter, so a destroyed model's entries can
// never be served to a new one). The most recently used cache is remembered for the fast path.
struct ThreadCaches {
  std::unordered_map<uint64_t, std::unique_ptr<WordCache>> by_model;
  uint64_t last_key = 0;
  WordCache* last = nullptr;
  WordCache& get(uint64_t key) {
    if (key == last_key && last) return *last;
    // A thread that outlives many tokenizers would keep their caches forever: keep a few.
    if (by_model.size() >= 8 && !by_model.count(key)) by_model.clear();
    auto& slot = by_model[key];
    if (!slot) slot = std::make_unique<WordCache>();
    last_key = key;
    last = slot.get();
    return *last;
  }
};
ThreadCaches& thread_caches() {
  thread_local ThreadCaches c;
  return c;
}
std::atomic<uint64_t> g_next_cache_key{1};

struct Symbol {
  int32_t id;
  int32_t prev, next;
  bool alive;
};
struct Candidate {
  int32_t rank, pos, new_id;
  bool operator<(const Candidate& o) const {  // inverted: std::priority_queue is a max-heap
    return rank != o.rank ? rank > o.rank : pos > o.pos;
  }
};

}  // namespace

BpeModel::BpeModel(Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges,
                   BpeOptions options)
    : vocab_(std::move(vocab)), options_(std::move(options)), cache_key_(g_next_cache_key++) {
  for (const auto& [tok, id] : vocab_) {
    VELA_CHECK(id >= 0, "BPE vocab: token '", tok, "' has a negative id ", id);
    max_id_ = std::max(max_id_, id);
  }
  id_to_token_.assign(static_cast<size_t>(max_id_ + 1), nullptr);
  for (const auto& [tok, id] : vocab_) id_to_token_[id] = &tok;

  merges_.reserve(merges.size() * 2);
  size_t prefix_len = options_.continuing_subword_prefix.size();
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    auto ia = vocab_.find(a), ib = vocab_.find(b);
    VELA_CHECK(ia != vocab_.end(), "BPE merge ", rank, " ('", a, "' '", b, "'): '", a,
               "' is not in the vocab");
    VELA_CHECK(ib != vocab_.end(), "BPE merge ", rank, " ('", a, "' '", b, "'): '", b,
               "' is not in the vocab");
    std::string merged = a + (b.size() >= prefix_len ? b.substr(prefix_len) : std::string());
    auto im = vocab_.find(merged);
    VELA_CHECK(im != vocab_.end(), "BPE merge ", rank, " ('", a, "' '", b, "'): the merged token '",
               merged, "' is not in the vocab");
    // A repeated pair keeps its last rank (HashMap insert order in Hugging Face).
    merges_[pair_key(ia->second, ib->second)] = {static_cast<int32_t>(rank), im->second};
  }
  if (options_.unk_token) {
    auto it = vocab_.find(*options_.unk_token);
    if (it != vocab_.end()) unk_id_ = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = vocab_.find(std::string_view(name));
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
  }
}

namespace {
std::optional<std::string> opt_string(const tjson& m, const char* key) {
  if (!m.contains(key) || m[key].is_null()) return std::nullopt;
  VELA_CHECK(m[key].is_string(), "BPE model: '", key, "' must be a string or null");
  return m[key].get<std::string>();
}
}  // namespace

std::string BpeModel::split_merge_error(std::string_view s, size_t index) {
  return "BPE merge " + std::to_string(index) + " '" + std::string(s) +
         "' is not of the form 'a b'";
}

std::string BpeModel::bad_merge_error(size_t index) {
  return "BPE merge " + std::to_string(index) + " must be \"a b\" or [\"a\", \"b\"]";
}

std::optional<std::pair<std::string, std::string>> BpeModel::split_merge(std::string_view s) {
  const size_t sp = s.find(' ');
  if (sp == std::string_view::npos || s.find(' ', sp + 1) != std::string_view::npos)
    return std::nullopt;
  return std::pair<std::string, std::string>{std::string(s.substr(0, sp)),
                                             std::string(s.substr(sp + 1))};
}

void BpeTables::reset_vocab() {
  vocab.clear();
  has_vocab = false;
  bad_ids.clear();
}

void BpeTables::reset_merges() {
  merges.clear();
  has_merges = false;
  merges_error.clear();
}

void BpeTables::set_id(std::string key, int64_t id, bool valid) {
  valid = valid && id >= 0 && id <= INT32_MAX;
  if (!bad_ids.empty()) std::erase(bad_ids, key);  // a later value replaces a bad one
  if (valid) {
    vocab.insert_or_assign(std::move(key), static_cast<int32_t>(id));
  } else {
    vocab.erase(key);
    bad_ids.push_back(std::move(key));
  }
}

void BpeTables::check() const {
  VELA_CHECK(bad_ids.empty(), "BPE vocab: the id of '", bad_ids.empty() ? "" : bad_ids.front(),
             "' is not an integer in [0, 2^31)");
  VELA_CHECK(merges_error.empty(), merges_error);
}

BpeModel BpeModel::from_json(const tjson& m) {
  BpeTables tables;
  if (m.is_object() && m.contains("vocab") && m["vocab"].is_object()) {
    tables.has_vocab = true;
    tables.vocab.reserve(m["vocab"].size());
    for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) {
      const tjson& v = it.value();
      const bool integer =
          v.is_number_integer() && (v.is_number_unsigned() ? v.get<uint64_t>() <= INT32_MAX : true);
      tables.set_id(it.key(), integer ? v.get<int64_t>() : -1, integer);
    }
  }
  if (m.is_object() && m.contains("merges") && m["merges"].is_array()) {
    tables.has_merges = true;
    tables.merges.reserve(m["merges"].size());
    size_t idx = 0;
    for (const auto& e : m["merges"]) {
      if (e.is_string()) {
        const std::string& text = e.get_ref<const std::string&>();
        auto pair = split_merge(text);
        if (!pair) {
          tables.merges_error = split_merge_error(text, idx);
          break;
        }
        tables.merges.push_back(std::move(*pair));
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
        tables.merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
      } else {
        tables.merges_error = bad_merge_error(idx);
        break;
      }
      ++idx;
    }
  }
  return from_json(m, std::move(tables));
}

BpeModel BpeModel::from_json(const tjson& m, BpeTables tables) {
  VELA_CHECK(m.is_object(), "'model' must be an object");
  std::string type =
      m.contains("type") && m["type"].is_string() ? m["type"].get<std::string>() : "";
  if (type.empty()) {
    // Old files omit the type; a BPE has merges.
    VELA_CHECK(tables.has_merges || m.contains("merges"), "'model' has no 'type' and no 'merges'");
    type = "BPE";
  }
  if (type != "BPE") VELA_THROW(Unsupported, "model type '", type, "' is not supported (only BPE)");
  if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"].get<double>() > 0)
    VELA_THROW(Unsupported, "BPE dropout is not supported (it is a training-time option)");
  VELA_CHECK(tables.has_vocab, "BPE model needs a 'vocab' object");
  VELA_CHECK(tables.has_merges, "BPE model needs a 'merges' array");
  tables.check();
  BpeOptions o;
  o.unk_token = opt_string(m, "unk_token");
  o.continuing_subword_prefix = opt_string(m, "continuing_subword_prefix").value_or("");
  o.end_of_word_suffix = opt_string(m, "end_of_word_suffix").value_or("");
  o.fuse_unk = m.contains("fuse_unk") && m["fuse_unk"].is_boolean() && m["fuse_unk"].get<bool>();
  o.byte_fallback = m.contains("byte_fallback") && m["byte_fallback"].is_boolean() &&
                    m["byte_fallback"].get<bool>();
  o.ignore_merges = m.contains("ignore_merges") && m["ignore_merges"].is_boolean() &&
                    m["ignore_merges"].get<bool>();
  return BpeModel(std::move(tables.vocab), tables.merges, std::move(o));
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || id > max_id_) return nullptr;
  return id_to_token_[id];
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    auto it = vocab_.find(word);
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (word.size() > kMaxCachedWordBytes) {
    merge_word(word, out);
    return;
  }
  WordCache& cache = thread_caches().get(cache_key_);
  auto it = cache.map.find(word);
  if (it != cache.map.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    return;
  }
  size_t before = out.size();
  merge_word(word, out);
  if (cache.map.size() < kCacheCapacity)
    cache.map.emplace(std::string(word), std::vector<int32_t>(out.begin() + before, out.end()));
}

void BpeModel::merge_word(std::string_view w, std::vector<int32_t>& out) const {
  thread_local std::vector<Symbol> syms;
  thread_local std::vector<Candidate> heap_storage;
  thread_local std::string buf;
  syms.clear();
  auto add = [&](int32_t id) {
    syms.push_back({id, static_cast<int32_t>(syms.size()) - 1, -1, true});
  };

  const std::string& prefix = options_.continuing_subword_prefix;
  const std::string& suffix = options_.end_of_word_suffix;
  bool plain = prefix.empty() && suffix.empty();
  // A pending unknown run: (unk id) when set.
  bool pending_unk = false;
  size_t i = 0;
  while (i < w.size()) {
    size_t b = i;
    i += unicode::seq_len(static_cast<unsigned char>(w[i]));
    if (i > w.size()) i = w.size();
    std::string_view ch = w.substr(b, i - b);
    std::string_view sym = ch;
    if (!plain) {
      buf.clear();
      if (b != 0) buf += prefix;
      buf += ch;
      if (i == w.size()) buf += suffix;
      sym = buf;
    }
    auto it = vocab_.find(sym);
    if (it != vocab_.end()) {
      if (pending_unk) {
        add(*unk_id_);
        pending_unk = false;
      }
      add(it->second);
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (unsigned char c : sym) all &= byte_ids_[c] >= 0;
      if (all) {
        for (unsigned char c : sym) add(byte_ids_[c]);
        continue;
      }
    }
    if (options_.unk_token) {
      VELA_CHECK(unk_id_.has_value(), "BPE unk_token '", *options_.unk_token,
                 "' is not in the vocab");
      if (pending_unk && !options_.fuse_unk) add(*unk_id_);
      pending_unk = true;
    }
    // No unk token: the character is dropped, as Hugging Face does.
  }
  if (pending_unk) add(*unk_id_);
  int32_t n = static_cast<int32_t>(syms.size());
  for (int32_t k = 0; k < n; ++k) syms[k].next = k + 1 < n ? k + 1 : -1;

  if (n > 1 && !merges_.empty()) {
    heap_storage.clear();
    std::priority_queue<Candidate, std::vector<Candidate>> heap(std::less<Candidate>(),
                                                                std::move(heap_storage));
    for (int32_t k = 0; k + 1 < n; ++k) {
      auto m = merges_.find(pair_key(syms[k].id, syms[k + 1].id));
      if (m != merges_.end()) heap.push({m->second.first, k, m->second.second});
    }
    while (!heap.empty()) {
      Candidate top = heap.top();
      heap.pop();
      Symbol& left = syms[top.pos];
      if (!left.alive || left.next < 0) continue;
      Symbol& right = syms[left.next];
      auto m = merges_.find(pair_key(left.id, right.id));
      if (m == merges_.end() || m->second.second != top.new_id) continue;
      // Merge right into left.
      left.id = top.new_id;
      right.alive = false;
      left.next = right.next;
      if (right.next >= 0) syms[right.next].prev = top.pos;
      if (left.prev >= 0) {
        auto pm = merges_.find(pair_key(syms[left.prev].id, left.id));
        if (pm != merges_.end()) heap.push({pm->second.first, left.prev, pm->second.second});
      }
      if (left.next >= 0) {
        auto nm = merges_.find(pair_key(left.id, syms[left.next].id));
        if (nm != merges_.end()) heap.push({nm->second.first, top.pos, nm->second.second});
      }
    }
  }
  for (int32_t k = 0; k < n; k = syms[k].next) {
    out.push_back(syms[k].id);
    if (syms[k].next < 0) break;
  }
}

}  // namespace vela
