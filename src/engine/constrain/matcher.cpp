// GrammarMatcher: pushdown execution of the Automaton, rollback snapshots and the vocabulary
// trie walk; CompiledGrammar's mask cache.
#include "engine/constrain/matcher.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace vela::constrain {
namespace {

uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

constexpr uint64_t kBottomHash = 0x6A09E667F3BCC908ull;
constexpr size_t kMaskCacheBytes = size_t{256} << 20;  // per compiled grammar

}  // namespace

CompiledGrammar::CompiledGrammar(Automaton automaton, std::shared_ptr<const TokenVocab> vocab)
    : automaton_(std::move(automaton)), vocab_(std::move(vocab)) {
  VELA_CHECK(vocab_ != nullptr, "CompiledGrammar: no vocabulary");
  max_cached_ =
      std::max<size_t>(64, kMaskCacheBytes / (static_cast<size_t>(vocab_->n_words()) * 4));
}

bool CompiledGrammar::lookup_mask(uint64_t key, uint32_t* bits) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = masks_.find(key);
  if (it == masks_.end()) return false;
  std::memcpy(bits, it->second.data(), it->second.size() * sizeof(uint32_t));
  return true;
}

void CompiledGrammar::store_mask(uint64_t key, const uint32_t* bits) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (masks_.size() >= max_cached_) masks_.clear();  // rare: a grammar with very many states
  masks_[key].assign(bits, bits + vocab_->n_words());
}

size_t CompiledGrammar::n_cached_masks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return masks_.size();
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), a_(&grammar_->automaton()) {
  nodes_.reserve(1024);
  bool accepting = false;
  int32_t root = new_node(a_->rule_start[static_cast<size_t>(a_->root)], -1);
  processed_.clear();
  closure(root, tops_, accepting);
  history_.push_back({0, tops_.size(), nodes_.size(), accepting, false});
}

int32_t GrammarMatcher::new_node(int32_t state, int32_t parent) {
  Node n;
  n.state = state;
  n.parent = parent;
  n.depth = parent < 0 ? 1 : nodes_[static_cast<size_t>(parent)].depth + 1;
  const uint64_t ph = parent < 0 ? kBottomHash : nodes_[static_cast<size_t>(parent)].hash;
  n.hash = mix64(ph ^ (static_cast<uint64_t>(state) * 0xD6E8FEB86659FD93ull));
  nodes_.push_back(n);
  return static_cast<int32_t>(nodes_.size()) - 1;
}

void GrammarMatcher::closure(int32_t n, std::vector<int32_t>& out, bool& accepting) {
  work_.clear();
  work_.push_back(n);
  while (!work_.empty()) {
    const int32_t x = work_.back();
    work_.pop_back();
    const Node node = nodes_[static_cast<size_t>(x)];
    // Stacks are identified by their hash (64 bits: a collision would merge two stacks).
    if (std::find(processed_.begin(), processed_.end(), node.hash) != processed_.end()) continue;
    VELA_CHECK(processed_.size() < kMaxStacks, "grammar: more than ", kMaxStacks,
               " simultaneous parses; the grammar is too ambiguous");
    processed_.push_back(node.hash);
    const auto s = static_cast<size_t>(node.state);
    if (a_->has_bytes[s]) out.push_back(x);
    if (a_->final[s]) {
      if (node.parent < 0)
        accepting = true;
      else
        work_.push_back(node.parent);
    }
    for (const auto& [rule, ret] : a_->calls[s]) {
      const int32_t rp = a_->pure_final(ret) ? node.parent : new_node(ret, node.parent);
      if (rp >= 0 && nodes_[static_cast<size_t>(rp)].depth >= kMaxStackDepth) continue;
      work_.push_back(new_node(a_->rule_start[static_cast<size_t>(rule)], rp));
    }
  }
}

void GrammarMatcher::advance(const std::vector<int32_t>& in, size_t begin, size_t end, uint8_t byte,
                             std::vector<int32_t>& out, bool& accepting) {
  accepting = false;
  if (end == begin + 1) {
    // One stack moving inside a rule's DFA to a state that neither ends the rule nor calls one
    // (the inside of strings and numbers): no closure needed.
    const int32_t x = in[begin];
    const Node& node = nodes_[static_cast<size_t>(x)];
    const int32_t t = a_->next[static_cast<size_t>(node.state) * 256 + byte];
    if (t < 0) return;
    const auto ts = static_cast<size_t>(t);
    if (!a_->final[ts] && a_->calls[ts].empty()) {
      const int32_t y = t == node.state ? x : new_node(t, node.parent);
      out.push_back(y);
      return;
    }
  }
  processed_.clear();
  for (size_t k = begin; k < end; ++k) {
    const int32_t x = in[k];
    const Node node = nodes_[static_cast<size_t>(x)];
    const int32_t t = a_->next[static_cast<size_t>(node.state) * 256 + byte];
    if (t < 0) continue;
    closure(t == node.state ? x : new_node(t, node.parent), out, accepting);
  }
}

uint64_t GrammarMatcher::state_key(const int32_t* tops, size_t n, bool accepting) const {
  uint64_t h = accepting ? 0x243F6A8885A308D3ull : 0x13198A2E03707344ull;
  for (size_t k = 0; k < n; ++k) h += mix64(nodes_[static_cast<size_t>(tops[k])].hash);
  return mix64(h ^ n);
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  const Snapshot s = cur();
  if (s.finished) return false;
  if (bytes.empty()) {
    history_.push_back(s);
    return true;
  }
  scratch_a_.assign(tops_.begin() + static_cast<ptrdiff_t>(s.tops_begin),
                    tops_.begin() + static_cast<ptrdiff_t>(s.tops_begin + s.n_tops));
  bool accepting = false;
  for (size_t k = 0; k < bytes.size(); ++k) {
    scratch_b_.clear();
    advance(scratch_a_, 0, scratch_a_.size(), static_cast<uint8_t>(bytes[k]), scratch_b_,
            accepting);
    std::swap(scratch_a_, scratch_b_);
    if (scratch_a_.empty() && !(accepting && k + 1 == bytes.size())) {
      nodes_.resize(s.n_nodes);
      return false;
    }
  }
  const size_t begin = tops_.size();
  tops_.insert(tops_.end(), scratch_a_.begin(), scratch_a_.end());
  history_.push_back({begin, scratch_a_.size(), nodes_.size(), accepting, false});
  return true;
}

bool GrammarMatcher::accept_token(int32_t id) {
  const TokenVocab& v = grammar_->vocab();
  if (id < 0 || id >= v.size() || cur().finished) return false;
  if (v.is_end(id)) {
    if (!cur().accepting) return false;
    Snapshot s = cur();
    s.finished = true;
    history_.push_back(s);
    return true;
  }
  const std::string& b = v.bytes(id);
  if (b.empty()) return false;
  return accept_bytes(b);
}

void GrammarMatcher::rollback(int32_t n) {
  VELA_CHECK(n >= 0 && n <= n_steps(), "GrammarMatcher: cannot roll back ", n, " steps of ",
             n_steps());
  history_.resize(history_.size() - static_cast<size_t>(n));
  tops_.resize(cur().tops_begin + cur().n_tops);
  nodes_.resize(cur().n_nodes);
}

int32_t GrammarMatcher::accepted_prefix(const int32_t* ids, int32_t n) {
  int32_t a = 0;
  try {
    while (a < n && !is_terminated() && accept_token(ids[a])) ++a;
  } catch (const Error&) {  // past the grammar's limits: rejected, as BatchMasks::fill treats it
  }
  rollback(a);  // also drops arena nodes a throwing step left behind
  return a;
}

void GrammarMatcher::fill_next_token_bitmask(uint32_t* bits) {
  const TokenVocab& v = grammar_->vocab();
  const size_t n_words = static_cast<size_t>(v.n_words());
  const Snapshot s = cur();
  std::memset(bits, 0, n_words * sizeof(uint32_t));
  if (s.finished) return;
  const uint64_t key = state_key(tops_.data() + s.tops_begin, s.n_tops, s.accepting);
  if (grammar_->lookup_mask(key, bits)) return;

  auto allow = [&](int32_t id) { bits[id >> 5] |= 1u << (id & 31); };
  const std::vector<int32_t>& sorted = v.sorted();
  const std::vector<int32_t>& lcp = v.lcp();
  // Level d: the tops after the first d bytes of the current token (level 0: the state now). A
  // "simple" level (level_state_[d] >= 0) is one stack inside a rule's DFA, kept as the DFA state
  // alone (its parent is the level-0 top's, p0): moving it by a byte is one table lookup, no node
  // and no closure, until a state that calls a rule or returns from one (then it is materialised
  // and walked in general). Inside strings and numbers nearly the whole trie walk is simple.
  // Per level d (fixed arrays, max_token_bytes() + 1 levels): tops in level_tops_[off[d],
  // off[d + 1]), the arena size, the accepting flag, the simple state (-1 = general).
  const size_t max_levels = v.max_token_bytes() + 2;
  level_off_.assign(max_levels + 1, 0);
  level_nodes_.assign(max_levels, 0);
  level_acc_.assign(max_levels, 0);
  level_state_.assign(max_levels, -1);
  level_tops_.assign(tops_.begin() + static_cast<ptrdiff_t>(s.tops_begin),
                     tops_.begin() + static_cast<ptrdiff_t>(s.tops_begin + s.n_tops));
  size_t* off = level_off_.data();
  size_t* lnodes = level_nodes_.data();
  uint8_t* lacc = level_acc_.data();
  int32_t* lstate = level_state_.data();
  off[1] = level_tops_.size();
  lnodes[0] = nodes_.size();
  lacc[0] = static_cast<uint8_t>(s.accepting);
  int32_t p0 = -1;
  if (s.n_tops == 1) {
    const Node& top = nodes_[static_cast<size_t>(level_tops_[0])];
    lstate[0] = top.state;
    p0 = top.parent;
  }
  const int32_t* next = a_->next.data();
  const uint8_t* final_ = a_->final.data();
  const uint8_t* has_bytes = a_->has_bytes.data();
  auto nonempty = [&](size_t d) { return lstate[d] >= 0 || off[d + 1] > off[d]; };
  size_t valid = 0;  // levels 0..valid are computed for the current token's prefix
  const size_t n = sorted.size();
  if (s.n_tops > 0) {
    for (size_t i = 0; i < n;) {
      const int32_t id = sorted[i];
      const std::string_view tb = v.sorted_bytes(i);
      const size_t len = tb.size();
      size_t p = std::min(static_cast<size_t>(lcp[i]), valid);
      // Drop the levels past p (general levels own tops and arena nodes past theirs).
      if (level_tops_.size() != off[p + 1]) level_tops_.resize(off[p + 1]);
      if (nodes_.size() != lnodes[p]) nodes_.resize(lnodes[p]);
      while (p < len && nonempty(p)) {
        const auto byte = static_cast<uint8_t>(tb[p]);
        bool acc = false;
        int32_t simple = -1;
        if (const int32_t st = lstate[p]; st >= 0) {
          const int32_t t = next[static_cast<size_t>(st) * 256 + byte];
          if (t >= 0) {
            const auto ts = static_cast<size_t>(t);
            if (a_->calls[ts].empty() && (!final_[ts] || p0 < 0)) {
              acc = final_[ts] && p0 < 0;
              if (has_bytes[ts]) simple = t;
            } else {
              processed_.clear();
              closure(new_node(t, p0), level_tops_, acc);
            }
          }
        } else {
          advance(level_tops_, off[p], off[p + 1], byte, level_tops_, acc);
        }
        ++p;
        off[p + 1] = level_tops_.size();
        lnodes[p] = nodes_.size();
        lacc[p] = static_cast<uint8_t>(acc);
        lstate[p] = simple;
      }
      valid = p;
      const bool ok = p == len && (nonempty(len) || lacc[len]);
      if (ok) allow(id);
      ++i;
      if (!nonempty(p)) {
        // Dead after p bytes: every following token sharing those bytes is dead too, except
        // duplicates of an allowed token.
        while (i < n && static_cast<size_t>(lcp[i]) >= p) {
          if (ok && v.sorted_bytes(i).size() == len) allow(sorted[i]);
          ++i;
        }
      }
    }
  }
  nodes_.resize(s.n_nodes);
  if (s.accepting)
    for (int32_t e : v.end_ids()) allow(e);
  grammar_->store_mask(key, bits);
}

}  // namespace vela::constrain
