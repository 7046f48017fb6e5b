// Grammar IR of constrained decoding: named rules, each one expression over single bytes (a set of
// byte values), references to rules, sequences, alternatives and bounded or unbounded repetition.
// Everything is byte level: a Unicode character class becomes the alternatives of its UTF-8 byte
// sequences (utf8_class), so the automaton and the vocabulary walk never see code points. Every
// front end (EBNF, regex, JSON Schema, choice) produces this IR; compile_automaton() turns it into
// per-rule DFAs. Plain values, no invariants beyond "refs name existing rules" (checked by the
// compiler).
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace vela::constrain {

using ByteSet = std::bitset<256>;

// Limits that keep every front end and the compiler bounded (InvalidArgument when exceeded).
inline constexpr int32_t kMaxRepeat = 10000;           // {m,n} bounds
inline constexpr int32_t kMaxNestingDepth = 200;       // parser / schema recursion
inline constexpr int64_t kMaxAutomatonStates = 60000;  // DFA states (256 ints each)

struct Expr {
  enum class Kind : uint8_t { kEmpty, kBytes, kRef, kSeq, kAlt, kRepeat };
  Kind kind = Kind::kEmpty;
  ByteSet bytes;              // kBytes: one byte from this set
  int32_t rule = -1;          // kRef
  int32_t min = 0, max = -1;  // kRepeat: [min, max] copies of children[0]; max -1 = unbounded
  std::vector<Expr> children;

  static Expr empty() { return {}; }
  static Expr byte_set(const ByteSet& s);
  static Expr byte(uint8_t b);
  static Expr literal(std::string_view bytes);  // the sequence of these bytes
  static Expr ref(int32_t rule);
  static Expr seq(std::vector<Expr> items);
  static Expr alt(std::vector<Expr> items);
  static Expr repeat(Expr item, int32_t min, int32_t max);
  static Expr optional(Expr item) { return repeat(std::move(item), 0, 1); }
  static Expr star(Expr item) { return repeat(std::move(item), 0, -1); }
};

// An inclusive code point range.
using CodepointRange = std::pair<uint32_t, uint32_t>;
// The UTF-8 encodings of every scalar value in `ranges` (surrogates excluded), or of every scalar
// value NOT in them when `negated`. An empty set yields an alternative with no branches (matches
// nothing).
Expr utf8_class(std::vector<CodepointRange> ranges, bool negated);

// Any byte string that does not contain `trigger` (free text before a lazily triggered grammar:
// the text may end in a proper prefix of the trigger). The trigger's first byte must not occur
// again in it (true of tool-call openers: "<tool_call>", "[TOOL_CALLS]"); InvalidArgument if not.
Expr text_without(std::string_view trigger);

struct Grammar {
  std::vector<std::string> names;  // per rule
  std::vector<Expr> bodies;        // per rule
  int32_t root = -1;
  std::unordered_map<std::string, int32_t> index;  // name -> id

  // The id of `name`, adding an empty rule when it is new.
  int32_t rule_id(const std::string& name);
  // -1 when absent.
  int32_t find(const std::string& name) const;
  // A new rule with a unique name derived from `hint`.
  int32_t add_rule(const std::string& hint, Expr body);
  int32_t n_rules() const { return static_cast<int32_t>(names.size()); }
};

}  // namespace vela::constrain
