// Regular expressions (the common subset of Python re / ECMAScript / RE2) compiled to the Grammar
// IR, matched as a whole (fullmatch). Supported: literals, escapes (\d \D \w \W \s \S \n \t \xHH
// \uHHHH \u{...} and escaped punctuation), classes with ranges and negation, `.` (any character
// but \n), groups ( ) (?: ) (?P<name> ) (?<name> ), alternation, * + ? {m} {m,} {m,n} (lazy
// suffixes accepted: they do not change the language), ^ and $ at the ends. Unsupported
// constructs (backreferences, lookaround, \b, inline flags, anchors inside) throw InvalidArgument
// naming the construct and its position.
#pragma once

#include <string_view>

#include "engine/constrain/grammar.h"

namespace vela::constrain {

struct RegexOptions {
  // Inside a JSON string: characters that JSON must escape (" \ and controls) are emitted as
  // their escapes when written literally and dropped from classes.
  bool json_string = false;
};

Expr regex_to_expr(std::string_view pattern, const RegexOptions& opt = {});
Grammar regex_grammar(std::string_view pattern);

}  // namespace vela::constrain
