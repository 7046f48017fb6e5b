// CompiledGrammar and GrammarMatcher: the runtime of constrained decoding.
//
// CompiledGrammar = an Automaton + the TokenVocab it masks + a shared cache of token masks keyed
// by the full matcher state (every stack's content, hashed), so samples of one schema that reach
// the same state (the same property, the inside of the same string) reuse one mask. Immutable but
// for the cache (mutex inside): shared by every request of one schema, thread-safe.
//
// GrammarMatcher = one sample's position in the grammar: a set of pushdown stacks (persistent,
// in a node arena: a node is one frame, a state of the automaton, with a parent pointer), the
// "may terminate here" flag and a snapshot per accepted token for rollback (speculative decoding
// advances it along the drafts to mask each verify row, then rolls back; see BatchMasks). Byte
// transitions inside a rule's DFA never touch the stack. The allowed-token mask is computed by
// walking the vocabulary in sorted byte order (a trie walk: shared prefixes advance once, a dead
// prefix skips its subtree). Owned and used by one thread (the scheduler's loop). Stacks deeper
// than kMaxStackDepth are not explored: nesting past it is simply disallowed.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/constrain/automaton.h"
#include "engine/constrain/token_vocab.h"

namespace vela::constrain {

inline constexpr uint32_t kMaxStackDepth = 512;
inline constexpr size_t kMaxStacks = 4096;  // per state: more means a hopelessly ambiguous grammar

class CompiledGrammar {
 public:
  CompiledGrammar(Automaton automaton, std::shared_ptr<const TokenVocab> vocab);
  const Automaton& automaton() const { return automaton_; }
  const TokenVocab& vocab() const { return *vocab_; }
  const std::shared_ptr<const TokenVocab>& vocab_ptr() const { return vocab_; }

  // Mask cache: n_words() words per entry. lookup copies into `bits` and returns true on a hit.
  bool lookup_mask(uint64_t key, uint32_t* bits) const;
  void store_mask(uint64_t key, const uint32_t* bits) const;
  size_t n_cached_masks() const;

 private:
  Automaton automaton_;
  std::shared_ptr<const TokenVocab> vocab_;
  size_t max_cached_;
  mutable std::mutex mu_;
  mutable std::unordered_map<uint64_t, std::vector<uint32_t>> masks_;
};

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Advances by one token; false (state unchanged) when the grammar does not allow it. An end
  // token (vocab().end_ids()) is accepted only where the grammar may terminate, and finishes.
  bool accept_token(int32_t id);
  // Advances by raw bytes as one step (prefills, tests); false (unchanged) when not allowed.
  bool accept_bytes(std::string_view bytes);
  // Undoes the last n accepted steps (n <= n_steps()).
  void rollback(int32_t n);
  void reset() { rollback(n_steps()); }
  // Speculative decoding: how many of ids[0 .. n) the grammar accepts in sequence from here,
  // stopping at the first rejected token and after one that leaves it terminated (nothing but the
  // end can follow: the sample stops there). The state is unchanged on return.
  int32_t accepted_prefix(const int32_t* ids, int32_t n);
  int32_t n_steps() const { return static_cast<int32_t>(history_.size()) - 1; }

  bool can_terminate() const { return cur().accepting && !cur().finished; }
  bool is_finished() const { return cur().finished; }  // an end token was accepted
  // Finished, or nothing but the end can follow.
  bool is_terminated() const { return cur().finished || cur().n_tops == 0; }

  // bits: vocab().n_words() words; bit (id % 32) of word id / 32 is set where the token is
  // allowed next (end tokens where the grammar may terminate).
  void fill_next_token_bitmask(uint32_t* bits);
  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  struct Node {
    int32_t state;
    int32_t parent;  // -1 = bottom of the stack
    uint32_t depth;
    uint64_t hash;  // of the whole stack (state, parent's hash)
  };
  struct Snapshot {
    size_t tops_begin, n_tops;  // in tops_
    size_t n_nodes;             // arena size after this step
    bool accepting, finished;
  };
  const Snapshot& cur() const { return history_.back(); }
  int32_t new_node(int32_t state, int32_t parent);
  // Expands node `n` until every stack top has byte transitions; appends tops to `out`.
  void closure(int32_t n, std::vector<int32_t>& out, bool& accepting);
  // One byte over tops in[begin, end) (indices into `in`, which may be `out`): appends to `out`.
  void advance(const std::vector<int32_t>& in, size_t begin, size_t end, uint8_t byte,
               std::vector<int32_t>& out, bool& accepting);
  uint64_t state_key(const int32_t* tops, size_t n, bool accepting) const;

  std::shared_ptr<const CompiledGrammar> grammar_;
  const Automaton* a_;
  std::vector<Node> nodes_;
  std::vector<int32_t> tops_;
  std::vector<Snapshot> history_;
  // Scratch.
  std::vector<int32_t> work_;
  std::vector<uint64_t> processed_;
  std::vector<int32_t> scratch_a_, scratch_b_;
  std::vector<int32_t> level_tops_;
  std::vector<size_t> level_off_, level_nodes_;
  std::vector<uint8_t> level_acc_;
  std::vector<int32_t> level_state_;
};

}  // namespace vela::constrain
