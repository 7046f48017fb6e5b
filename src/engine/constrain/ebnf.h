// EBNF grammars in llama.cpp's GBNF syntax:
//   name ::= alternatives        (rule names [A-Za-z0-9_-]+; `root` is the start rule)
//   "literal" [char class] [^negated] . (any character) name (group) x* x+ x? x{m} x{m,} x{m,n}
//   a | b   alternatives; # comments to the end of the line
// Literals and classes take \n \r \t \\ \" \' \[ \] \- \xHH \uHHHH \UHHHHHHHH escapes; text is
// UTF-8 and matched as UTF-8 bytes. Rules may span lines (a new rule starts at `name ::=`).
// Throws InvalidArgument with the line and column of the first problem (an undefined rule, a
// missing root, an unterminated literal, left recursion later in compile_automaton()).
#pragma once

#include <string>
#include <string_view>

#include "engine/constrain/grammar.h"

namespace vela::constrain {

Grammar parse_ebnf(std::string_view text, const std::string& root = "root");

}  // namespace vela::constrain
