// compile_automaton: inline terminal-only rules, Thompson NFA per rule, subset construction over
// bytes and rule calls, then the nullable / left-recursion analysis that guarantees the matcher's
// closure terminates.
#include "engine/constrain/automaton.h"

#include <algorithm>
#include <map>

#include "core/error.h"

namespace vela::constrain {
namespace {

constexpr int64_t kMaxInlineNodes = 4000;  // expression nodes of a rule worth inlining

int64_t count_nodes(const Expr& e) {
  int64_t n = 1;
  for (const Expr& c : e.children) n += count_nodes(c);
  return n;
}

bool has_refs(const Expr& e) {
  if (e.kind == Expr::Kind::kRef) return true;
  for (const Expr& c : e.children)
    if (has_refs(c)) return true;
  return false;
}

// Replaces refs to inlinable rules by their bodies, in dependency order (cycles keep their refs).
class Inliner {
 public:
  explicit Inliner(const Grammar& g) : g_(g), state_(g.names.size(), 0), bodies_(g.bodies) {}

  std::vector<Expr> run() {
    for (int32_t r = 0; r < g_.n_rules(); ++r) visit(r, 0);
    return std::move(bodies_);
  }

 private:
  void visit(int32_t r, int depth) {
    if (state_[static_cast<size_t>(r)] != 0) return;
    VELA_CHECK(depth < 10000, "grammar: rule references nest deeper than 10000");
    state_[static_cast<size_t>(r)] = 1;
    rewrite(bodies_[static_cast<size_t>(r)], depth);
    state_[static_cast<size_t>(r)] = 2;
  }
  void rewrite(Expr& e, int depth) {
    if (e.kind == Expr::Kind::kRef) {
      VELA_CHECK(e.rule >= 0 && e.rule < g_.n_rules(), "grammar: reference to rule id ", e.rule,
                 " which does not exist");
      visit(e.rule, depth + 1);
      const Expr& body = bodies_[static_cast<size_t>(e.rule)];
      if (state_[static_cast<size_t>(e.rule)] == 2 && !has_refs(body) &&
          count_nodes(body) <= kMaxInlineNodes) {
        Expr copy = body;
        e = std::move(copy);
      }
      return;
    }
    for (Expr& c : e.children) rewrite(c, depth);
  }
  const Grammar& g_;
  std::vector<int> state_;
  std::vector<Expr> bodies_;
};

struct Nfa {
  struct State {
    std::vector<int32_t> eps;
    std::vector<std::pair<ByteSet, int32_t>> bytes;
    std::vector<std::pair<int32_t, int32_t>> refs;
  };
  std::vector<State> states;
  int64_t* budget;  // states left for the whole grammar

  int32_t add() {
    VELA_CHECK(--*budget >= 0, "grammar: too large (more than ", kMaxAutomatonStates,
               " automaton states); simplify the schema or grammar");
    states.emplace_back();
    return static_cast<int32_t>(states.size()) - 1;
  }
  // Builds `e` starting at `from`; returns the end state.
  int32_t build(const Expr& e, int32_t from) {
    switch (e.kind) {
      case Expr::Kind::kEmpty:
        return from;
      case Expr::Kind::kBytes: {
        int32_t s = add();
        states[static_cast<size_t>(from)].bytes.push_back({e.bytes, s});
        return s;
      }
      case Expr::Kind::kRef: {
        int32_t s = add();
        states[static_cast<size_t>(from)].refs.push_back({e.rule, s});
        return s;
      }
      case Expr::Kind::kSeq: {
        int32_t cur = from;
        for (const Expr& c : e.children) cur = build(c, cur);
        return cur;
      }
      case Expr::Kind::kAlt: {
        int32_t end = add();
        for (const Expr& c : e.children) {
          int32_t s = add();
          states[static_cast<size_t>(from)].eps.push_back(s);
          int32_t t = build(c, s);
          states[static_cast<size_t>(t)].eps.push_back(end);
        }
        return end;
      }
      case Expr::Kind::kRepeat: {
        const Expr& c = e.children[0];
        int32_t cur = from;
        for (int32_t i = 0; i < e.min; ++i) {
          int32_t s = add();
          states[static_cast<size_t>(cur)].eps.push_back(s);
          cur = build(c, s);
        }
        if (e.max == -1) {
          int32_t loop = add();
          states[static_cast<size_t>(cur)].eps.push_back(loop);
          int32_t s = add();
          states[static_cast<size_t>(loop)].eps.push_back(s);
          int32_t t = build(c, s);
          states[static_cast<size_t>(t)].eps.push_back(loop);
          return loop;
        }
        int32_t end = add();
        states[static_cast<size_t>(cur)].eps.push_back(end);
        for (int32_t i = e.min; i < e.max; ++i) {
          int32_t s = add();
          states[static_cast<size_t>(cur)].eps.push_back(s);
          cur = build(c, s);
          states[static_cast<size_t>(cur)].eps.push_back(end);
        }
        return end;
      }
    }
    return from;
  }
};

// Subset construction of one rule's NFA into `a` (states appended); returns the start state.
class Determinizer {
 public:
  Determinizer(const Nfa& nfa, int32_t accept, Automaton& a, int64_t* budget)
      : nfa_(nfa), accept_(accept), a_(a), budget_(budget), mark_(nfa.states.size(), 0) {}

  int32_t run(int32_t start) {
    int32_t s0 = intern(closure({start}));
    while (!work_.empty()) {
      auto [id, set] = std::move(work_.back());
      work_.pop_back();
      expand(id, set);
    }
    return s0;
  }

 private:
  std::vector<int32_t> closure(std::vector<int32_t> seeds) {
    ++gen_;
    std::vector<int32_t> out, stack = std::move(seeds);
    while (!stack.empty()) {
      int32_t s = stack.back();
      stack.pop_back();
      if (mark_[static_cast<size_t>(s)] == gen_) continue;
      mark_[static_cast<size_t>(s)] = gen_;
      out.push_back(s);
      for (int32_t t : nfa_.states[static_cast<size_t>(s)].eps) stack.push_back(t);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  int32_t intern(std::vector<int32_t> set) {
    auto it = ids_.find(set);
    if (it != ids_.end()) return it->second;
    VELA_CHECK(--*budget_ >= 0, "grammar: too large (more than ", kMaxAutomatonStates,
               " automaton states); simplify the schema or grammar");
    const int32_t id = a_.n_states++;
    a_.next.resize(a_.next.size() + 256, -1);
    a_.has_bytes.push_back(0);
    a_.final.push_back(std::binary_search(set.begin(), set.end(), accept_) ? 1 : 0);
    a_.calls.emplace_back();
    ids_.emplace(set, id);
    work_.emplace_back(id, std::move(set));
    return id;
  }
  void expand(int32_t id, const std::vector<int32_t>& set) {
    std::vector<std::vector<int32_t>> per_byte(256);
    std::map<int32_t, std::vector<int32_t>> per_rule;
    for (int32_t s : set) {
      const Nfa::State& st = nfa_.states[static_cast<size_t>(s)];
      for (const auto& [bytes, t] : st.bytes)
        for (int b = 0; b < 256; ++b)
          if (bytes.test(static_cast<size_t>(b))) per_byte[static_cast<size_t>(b)].push_back(t);
      for (const auto& [rule, t] : st.refs) per_rule[rule].push_back(t);
    }
    std::map<std::vector<int32_t>, int32_t> memo;  // target set -> DFA state, for this state
    for (int b = 0; b < 256; ++b) {
      auto& targets = per_byte[static_cast<size_t>(b)];
      if (targets.empty()) continue;
      std::sort(targets.begin(), targets.end());
      auto m = memo.find(targets);
      int32_t t;
      if (m != memo.end()) {
        t = m->second;
      } else {
        t = intern(closure(targets));
        memo.emplace(targets, t);
      }
      a_.next[static_cast<size_t>(id) * 256 + static_cast<size_t>(b)] = t;
      a_.has_bytes[static_cast<size_t>(id)] = 1;
    }
    for (auto& [rule, targets] : per_rule) {
      int32_t t = intern(closure(targets));
      a_.calls[static_cast<size_t>(id)].push_back({rule, t});
    }
  }

  const Nfa& nfa_;
  int32_t accept_;
  Automaton& a_;
  int64_t* budget_;
  std::vector<uint32_t> mark_;
  uint32_t gen_ = 0;
  std::map<std::vector<int32_t>, int32_t> ids_;
  std::vector<std::pair<int32_t, std::vector<int32_t>>> work_;
};

// The states of `rule` reachable from its start through calls of nullable rules only.
std::vector<int32_t> epsilon_reachable(const Automaton& a, int32_t rule,
                                       const std::vector<uint8_t>& nullable) {
  std::vector<int32_t> out, stack{a.rule_start[static_cast<size_t>(rule)]};
  std::vector<uint8_t> seen;
  while (!stack.empty()) {
    int32_t s = stack.back();
    stack.pop_back();
    if (std::find(out.begin(), out.end(), s) != out.end()) continue;
    out.push_back(s);
    for (const auto& [q, t] : a.calls[static_cast<size_t>(s)])
      if (nullable[static_cast<size_t>(q)]) stack.push_back(t);
  }
  return out;
}

void check_left_recursion(const Automaton& a) {
  const size_t n_rules = a.rule_start.size();
  std::vector<uint8_t> nullable(n_rules, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n_rules; ++r) {
      if (nullable[r]) continue;
      for (int32_t s : epsilon_reachable(a, static_cast<int32_t>(r), nullable)) {
        if (a.final[static_cast<size_t>(s)]) {
          nullable[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  std::vector<std::vector<int32_t>> left(n_rules);  // rules callable before any byte
  for (size_t r = 0; r < n_rules; ++r)
    for (int32_t s : epsilon_reachable(a, static_cast<int32_t>(r), nullable))
      for (const auto& [q, t] : a.calls[static_cast<size_t>(s)]) left[r].push_back(q);
  std::vector<int> color(n_rules, 0);
  // Iterative DFS for a cycle in the left-corner graph.
  for (size_t r0 = 0; r0 < n_rules; ++r0) {
    if (color[r0] != 0) continue;
    std::vector<std::pair<int32_t, size_t>> stack{{static_cast<int32_t>(r0), 0}};
    color[r0] = 1;
    while (!stack.empty()) {
      auto& [r, k] = stack.back();
      if (k < left[static_cast<size_t>(r)].size()) {
        int32_t q = left[static_cast<size_t>(r)][k++];
        if (color[static_cast<size_t>(q)] == 1)
          VELA_THROW(InvalidArgument, "grammar: rule '", a.rule_names[static_cast<size_t>(q)],
                     "' is left-recursive (it can reach itself before consuming any input); "
                     "rewrite it with repetition");
        if (color[static_cast<size_t>(q)] == 0) {
          color[static_cast<size_t>(q)] = 1;
          stack.push_back({q, 0});
        }
      } else {
        color[static_cast<size_t>(r)] = 2;
        stack.pop_back();
      }
    }
  }
}

}  // namespace

Automaton compile_automaton(const Grammar& g) {
  VELA_CHECK(g.root >= 0 && g.root < g.n_rules(), "grammar: no root rule");
  std::vector<Expr> bodies = Inliner(g).run();
  Automaton a;
  a.rule_names = g.names;
  a.root = g.root;
  a.rule_start.assign(g.names.size(), -1);
  int64_t nfa_budget = kMaxAutomatonStates * 4, dfa_budget = kMaxAutomatonStates;
  // Only rules reachable from the root (inlined rules vanish from the call graph).
  std::vector<uint8_t> needed(g.names.size(), 0);
  std::vector<int32_t> todo{g.root};
  needed[static_cast<size_t>(g.root)] = 1;
  while (!todo.empty()) {
    int32_t r = todo.back();
    todo.pop_back();
    Nfa nfa;
    nfa.budget = &nfa_budget;
    int32_t start = nfa.add();
    int32_t accept = nfa.build(bodies[static_cast<size_t>(r)], start);
    for (const auto& st : nfa.states) {
      for (const auto& [q, t] : st.refs) {
        VELA_CHECK(q >= 0 && q < g.n_rules(), "grammar: reference to an undefined rule");
        if (!needed[static_cast<size_t>(q)]) {
          needed[static_cast<size_t>(q)] = 1;
          todo.push_back(q);
        }
      }
    }
    a.rule_start[static_cast<size_t>(r)] = Determinizer(nfa, accept, a, &dfa_budget).run(start);
  }
  // Unreachable rules get a dead start state so every rule id stays valid.
  for (size_t r = 0; r < a.rule_start.size(); ++r) {
    if (a.rule_start[r] >= 0) continue;
    a.rule_start[r] = a.n_states++;
    a.next.resize(a.next.size() + 256, -1);
    a.has_bytes.push_back(0);
    a.final.push_back(0);
    a.calls.emplace_back();
  }
  check_left_recursion(a);
  return a;
}

}  // namespace vela::constrain
