// GrammarCompiler: Constraint -> CompiledGrammar for one model vocabulary, cached by (kind, text)
// so every request with the same schema shares one automaton and one mask cache. Thread-safe
// (compiles run on the caller's thread, outside the lock; a race compiles twice, keeps one).
// compile() throws InvalidArgument naming the unsupported construct or the syntax error.
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "engine/constrain/constraint.h"
#include "engine/constrain/grammar.h"
#include "engine/constrain/matcher.h"

namespace vela::constrain {

// The Grammar IR of a constraint (no vocabulary needed).
Grammar build_grammar(const Constraint& c);

class GrammarCompiler {
 public:
  explicit GrammarCompiler(std::shared_ptr<const TokenVocab> vocab, size_t max_entries = 256);

  std::shared_ptr<const CompiledGrammar> compile(const Constraint& c);
  const TokenVocab& vocab() const { return *vocab_; }
  size_t n_cached() const;
  int64_t n_compiles() const;  // cache misses so far

 private:
  std::shared_ptr<const TokenVocab> vocab_;
  size_t max_entries_;
  mutable std::mutex mu_;
  std::list<std::string> lru_;  // most recent first
  std::unordered_map<std::string, std::pair<std::shared_ptr<const CompiledGrammar>,
                                            std::list<std::string>::iterator>>
      cache_;
  int64_t n_compiles_ = 0;
};

}  // namespace vela::constrain
