// Jinja template lexer: splits a template into data and tag tokens exactly like Python Jinja2's
// lexer with trim_blocks=True and lstrip_blocks=True (newline normalisation, one trailing newline
// dropped, `-` / `+` whitespace control, raw blocks, comments, balanced brackets inside tags).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vela::jinja {

struct Token {
  enum class Type {
    kData, kVariableBegin, kVariableEnd, kBlockBegin, kBlockEnd, kName, kString, kInteger,
    kFloat, kOperator, kEof
  };
  Type type;
  std::string value;  // data text, name, unescaped string, operator, or literal source
  int line = 1;
  int64_t int_value = 0;
  double float_value = 0.0;
};

// Throws TemplateError (with the line) on a malformed template.
std::vector<Token> tokenize(const std::string& source);

// A short description of a token for error messages ("end of statement block", "'foo'").
std::string describe_token(const Token& tok);

}  // namespace vela::jinja
