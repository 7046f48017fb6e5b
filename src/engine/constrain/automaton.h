// Automaton: a Grammar compiled to one deterministic automaton per rule over bytes and rule calls
// (a recursive transition network). A state has byte transitions (next[state * 256 + byte], -1 =
// none), call edges (rule, return state) and a final flag (the rule may end here). The matcher
// runs it as a pushdown automaton: a stack frame is a state, calling a rule pushes the return
// state. Repetitions and terminal-only rules (strings, numbers, whitespace) are loops and paths
// inside one DFA, so matching their bytes never touches the stack. Immutable, thread-safe.
//
// compile_automaton() throws InvalidArgument for an undefined rule, left recursion (a rule that can
// call itself before consuming a byte: it would never terminate), or a grammar past
// kMaxAutomatonStates. Never hangs: every expansion is bounded by those checks.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/constrain/grammar.h"

namespace vela::constrain {

struct Automaton {
  int32_t n_states = 0;
  std::vector<int32_t> next;       // [n_states * 256] byte transitions, -1 = none
  std::vector<uint8_t> has_bytes;  // [n_states] some byte transition exists
  std::vector<uint8_t> final;      // [n_states] the state's rule may end here
  std::vector<std::vector<std::pair<int32_t, int32_t>>> calls;  // [n_states] (rule, return state)
  std::vector<int32_t> rule_start;                              // [n_rules]
  std::vector<std::string> rule_names;                          // [n_rules]
  int32_t root = 0;

  // Final with nothing else to do: returning from a call that leads here pops the caller too.
  bool pure_final(int32_t s) const {
    return final[static_cast<size_t>(s)] && !has_bytes[static_cast<size_t>(s)] &&
           calls[static_cast<size_t>(s)].empty();
  }
};

Automaton compile_automaton(const Grammar& g);

}  // namespace vela::constrain
