// Jinja AST and parser. The grammar and operator precedence follow jinja2/parser.py; filter and
// test names are checked at parse time (an unknown one is a syntax error, as in Jinja2). The AST
// is immutable after parsing and shared by concurrent renders.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace vela::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using StmtList = std::vector<StmtPtr>;

struct Expr {
  enum class Kind {
    kConst,    // value
    kName,     // name
    kList,     // children: items
    kTuple,    // children: items
    kDict,     // children: key0, value0, key1, value1, ...
    kGetAttr,  // children[0] . name
    kGetItem,  // children[0] [ children[1] ]
    kSlice,    // children: start, stop, step (each may be null)
    kCall,     // children[0] ( children[1..], kwargs, *dyn_args, **dyn_kwargs )
    kFilter,   // children[0] (null inside a filter block) | name ( children[1..], kwargs )
    kTest,     // children[0] is name ( children[1..], kwargs )
    kNeg, kPos, kNot,  // children[0]
    kBinary,   // children[0] op children[1], op in + - * / // % **
    kAnd, kOr,  // children[0], children[1]
    kCompare,  // children[0] ops[0] children[1] ops[1] children[2] ...
    kConcat,   // children joined with ~
    kCond,     // children[1] if children[0] else children[2] (may be null)
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  ExprPtr dyn_args, dyn_kwargs;
  std::vector<std::string> ops;  // kCompare: == != < <= > >= in notin
};

struct MacroParams {
  std::vector<std::string> names;
  std::vector<ExprPtr> defaults;  // aligned with names; null = no default
  bool uses_varargs = false, uses_kwargs = false, uses_caller = false;
};

struct Stmt {
  enum class Kind {
    kOutput,       // text
    kPrint,        // expr
    kIf,           // expr, body, else_body (elif = nested if in else_body)
    kFor,          // target, expr (iterable), cond, body, else_body, recursive
    kSet,          // target, expr
    kSetBlock,     // target, expr (filter chain or null), body
    kMacro,        // name, params, body
    kCallBlock,    // expr (the call), params (of caller), body
    kFilterBlock,  // expr (filter chain with a null innermost operand), body
    kWith,         // targets / values (with_targets), body
    kScope,        // body rendered in place: block, generation, autoescape
    kBreak, kContinue,
  };
  Kind kind;
  int line = 0;
  std::string text;
  std::string name;
  ExprPtr expr, target, cond;
  StmtList body, else_body;
  bool recursive = false;
  MacroParams params;
  std::vector<std::pair<ExprPtr, ExprPtr>> with_targets;
};

struct Program {
  StmtList body;
};

// Parses a template; throws TemplateError with the line of the problem.
Program parse_template(const std::string& source);

bool is_known_filter(const std::string& name);
bool is_known_test(const std::string& name);

}  // namespace vela::jinja
