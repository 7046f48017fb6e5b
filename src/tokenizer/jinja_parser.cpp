// Jinja parser (see jinja_parser.h): a recursive-descent port of jinja2/parser.py for the
// statements transformers' environment enables (the builtins plus loopcontrols and the
// `generation` tag); expression precedence is or < and < not < compare < + - < ~ < * / // % <
// ** < unary < postfix/filters/tests.
#include "tokenizer/jinja_parser.h"

#include <functional>
#include <initializer_list>

#include "tokenizer/jinja_lexer.h"

namespace vela::jinja {
namespace {

using T = Token::Type;

ExprPtr make_expr(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

StmtPtr make_stmt(Stmt::Kind kind, int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = line;
  return s;
}

// True when the expression tree mentions the variable `name` (macro varargs/kwargs/caller).
bool expr_uses(const Expr* e, const std::string& name);
bool stmts_use(const StmtList& body, const std::string& name) {
  for (const auto& s : body) {
    if (expr_uses(s->expr.get(), name) || expr_uses(s->target.get(), name) ||
        expr_uses(s->cond.get(), name) || stmts_use(s->body, name) ||
        stmts_use(s->else_body, name))
      return true;
    for (const auto& d : s->params.defaults)
      if (expr_uses(d.get(), name)) return true;
    for (const auto& [t, v] : s->with_targets)
      if (expr_uses(v.get(), name)) return true;
  }
  return false;
}
bool expr_uses(const Expr* e, const std::string& name) {
  if (!e) return false;
  if (e->kind == Expr::Kind::kName && e->name == name) return true;
  for (const auto& c : e->children)
    if (expr_uses(c.get(), name)) return true;
  for (const auto& kv : e->kwargs)
    if (expr_uses(kv.second.get(), name)) return true;
  return expr_uses(e->dyn_args.get(), name) || expr_uses(e->dyn_kwargs.get(), name);
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Program parse() {
    Program prog;
    prog.body = subparse({});
    return prog;
  }

 private:
  // ---- token helpers ----
  const Token& cur() const { return toks_[pos_]; }
  const Token& look() const { return toks_[std::min(pos_ + 1, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool is_op(const char* op) const { return cur().type == T::kOperator && cur().value == op; }
  bool is_name(const char* n) const { return cur().type == T::kName && cur().value == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  [[noreturn]] void error(const std::string& msg, int line = 0) const {
    throw TemplateError(msg, line ? line : cur().line);
  }
  void expect_op(const char* op) {
    if (!skip_op(op))
      error(std::string("expected token '") + op + "', got " + describe_token(cur()));
  }
  void expect_block_end() {
    if (cur().type != T::kBlockEnd)
      error("expected token 'end of statement block', got " + describe_token(cur()));
    next();
  }
  std::string expect_name_token() {
    if (cur().type != T::kName) error("expected token 'name', got " + describe_token(cur()));
    return next().value;
  }

  // ---- statements ----

  // Parses template data and tags until one of `end_tags` (left unconsumed: the current token
  // is that tag's name) or the end of the template.
  StmtList subparse(std::initializer_list<const char*> end_tags) {
    StmtList body;
    for (;;) {
      const Token& t = cur();
      if (t.type == T::kData) {
        auto s = make_stmt(Stmt::Kind::kOutput, t.line);
        s->text = t.value;
        next();
        body.push_back(std::move(s));
      } else if (t.type == T::kVariableBegin) {
        int line = next().line;
        auto s = make_stmt(Stmt::Kind::kPrint, line);
        s->expr = parse_tuple(true, {}, false);
        if (cur().type != T::kVariableEnd)
          error("expected token 'end of print statement', got " + describe_token(cur()));
        next();
        body.push_back(std::move(s));
      } else if (t.type == T::kBlockBegin) {
        next();
        if (cur().type != T::kName) error("tag name expected");
        for (const char* e : end_tags)
          if (cur().value == e) return body;
        body.push_back(parse_statement());
      } else {  // end of template
        if (end_tags.size() != 0) {
          std::string want;
          for (const char* e : end_tags) want += (want.empty() ? "'" : " or '") + std::string(e) + "'";
          error("Unexpected end of template. Jinja was looking for the following tags: " + want +
                ". The innermost block that needs to be closed is '" + block_stack_.back() + "'.");
        }
        return body;
      }
    }
  }

  // Parses the body of a block statement up to `end` (consumed with its block end).
  StmtList block_body(const char* tag, std::initializer_list<const char*> ends) {
    block_stack_.push_back(tag);
    StmtList body = subparse(ends);
    block_stack_.pop_back();
    return body;
  }

  void end_tag(const char* end) {  // current token is the end tag name
    if (!skip_name(end)) error(std::string("expected '") + end + "'");
    expect_block_end();
  }

  StmtPtr parse_statement() {
    const Token& t = cur();
    std::string tag = t.value;
    int line = t.line;
    next();
    if (tag == "if") return parse_if(line);
    if (tag == "for") return parse_for(line);
    if (tag == "set") return parse_set(line);
    if (tag == "macro") return parse_macro(line);
    if (tag == "call") return parse_call_block(line);
    if (tag == "filter") return parse_filter_block(line);
    if (tag == "with") return parse_with(line);
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) error("'" + tag + "' outside of a loop", line);
      expect_block_end();
      return make_stmt(tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, line);
    }
    if (tag == "block" || tag == "generation" || tag == "autoescape") {
      auto s = make_stmt(Stmt::Kind::kScope, line);
      if (tag == "block") {
        s->name = expect_name_token();
        skip_name("scoped");
        skip_name("required");
      } else if (tag == "autoescape") {
        s->expr = parse_expression(true);
      }
      expect_block_end();
      std::string end = "end" + tag;
      s->body = block_body(tag.c_str(), {end.c_str()});
      next();
      if (tag == "block" && cur().type == T::kName) next();  // {% endblock name %}
      expect_block_end();
      return s;
    }
    if (tag == "extends" || tag == "include" || tag == "import" || tag == "from")
      error("'" + tag + "' is not supported in chat templates (no template loader)", line);
    if (tag.rfind("end", 0) == 0 || tag == "elif" || tag == "else") {
      std::string msg = "Encountered unknown tag '" + tag + "'.";
      if (!block_stack_.empty())
        msg += " The innermost block that needs to be closed is '" + block_stack_.back() + "'.";
      error(msg, line);
    }
    error("Encountered unknown tag '" + tag + "'.", line);
  }

  StmtPtr parse_if(int line) {
    auto s = make_stmt(Stmt::Kind::kIf, line);
    s->expr = parse_tuple(false, {}, false);
    expect_block_end();
    s->body = block_body("if", {"elif", "else", "endif"});
    if (is_name("elif")) {
      int elif_line = next().line;
      s->else_body.push_back(parse_if(elif_line));  // consumes the shared endif
      return s;
    }
    if (skip_name("else")) {
      expect_block_end();
      s->else_body = block_body("if", {"endif"});
    }
    end_tag("endif");
    return s;
  }

  StmtPtr parse_for(int line) {
    auto s = make_stmt(Stmt::Kind::kFor, line);
    s->target = parse_assign_target(false, {"in"});
    if (!skip_name("in")) error("expected token 'in', got " + describe_token(cur()));
    s->expr = parse_tuple(false, {"recursive"}, false);
    if (skip_name("if")) s->cond = parse_expression(true);
    s->recursive = skip_name("recursive");
    expect_block_end();
    ++loop_depth_;
    s->body = block_body("for", {"endfor", "else"});
    --loop_depth_;
    if (skip_name("else")) {
      expect_block_end();
      s->else_body = block_body("for", {"endfor"});
    }
    end_tag("endfor");
    return s;
  }

  StmtPtr parse_set(int line) {
    ExprPtr target = parse_assign_target(true, {});
    if (skip_op("=")) {
      auto s = make_stmt(Stmt::Kind::kSet, line);
      s->target = std::move(target);
      s->expr = parse_tuple(true, {}, false);
      expect_block_end();
      return s;
    }
    auto s = make_stmt(Stmt::Kind::kSetBlock, line);
    if (target->kind != Expr::Kind::kName) error("expected token '=', got " + describe_token(cur()));
    s->target = std::move(target);
    if (is_op("|")) s->expr = parse_filter(nullptr, false);
    expect_block_end();
    s->body = block_body("set", {"endset"});
    end_tag("endset");
    return s;
  }

  void parse_signature(MacroParams& params) {
    expect_op("(");
    while (!is_op(")")) {
      if (!params.names.empty()) expect_op(",");
      if (is_op(")")) break;
      std::string name = expect_name_token();
      params.names.push_back(name);
      params.defaults.push_back(skip_op("=") ? parse_expression(true) : nullptr);
    }
    expect_op(")");
  }

  void finish_params(MacroParams& params, const StmtList& body) {
    params.uses_varargs = stmts_use(body, "varargs");
    params.uses_kwargs = stmts_use(body, "kwargs");
    params.uses_caller = stmts_use(body, "caller");
  }

  StmtPtr parse_macro(int line) {
    auto s = make_stmt(Stmt::Kind::kMacro, line);
    s->name = expect_name_token();
    parse_signature(s->params);
    expect_block_end();
    int saved = loop_depth_;
    loop_depth_ = 0;
    s->body = block_body("macro", {"endmacro"});
    loop_depth_ = saved;
    end_tag("endmacro");
    finish_params(s->params, s->body);
    return s;
  }

  StmtPtr parse_call_block(int line) {
    auto s = make_stmt(Stmt::Kind::kCallBlock, line);
    if (is_op("(")) parse_signature(s->params);
    s->expr = parse_expression(true);
    if (s->expr->kind != Expr::Kind::kCall) error("expected call", line);
    expect_block_end();
    int saved = loop_depth_;
    loop_depth_ = 0;
    s->body = block_body("call", {"endcall"});
    loop_depth_ = saved;
    end_tag("endcall");
    finish_params(s->params, s->body);
    return s;
  }

  StmtPtr parse_filter_block(int line) {
    auto s = make_stmt(Stmt::Kind::kFilterBlock, line);
    s->expr = parse_filter(nullptr, true);
    expect_block_end();
    s->body = block_body("filter", {"endfilter"});
    end_tag("endfilter");
    return s;
  }

  StmtPtr parse_with(int line) {
    auto s = make_stmt(Stmt::Kind::kWith, line);
    while (cur().type != T::kBlockEnd) {
      if (!s->with_targets.empty()) expect_op(",");
      ExprPtr target = parse_assign_target(false, {});
      expect_op("=");
      s->with_targets.emplace_back(std::move(target), parse_expression(true));
    }
    next();
    s->body = block_body("with", {"endwith"});
    end_tag("endwith");
    return s;
  }

  // A name, `ns.attr` (with_namespace) or a tuple of names.
  ExprPtr parse_assign_target(bool with_namespace, std::initializer_list<const char*> end_rules) {
    if (with_namespace && cur().type == T::kName && look().type == T::kOperator &&
        look().value == ".") {
      int line = cur().line;
      auto obj = make_expr(Expr::Kind::kName, line);
      obj->name = next().value;
      next();  // .
      auto e = make_expr(Expr::Kind::kGetAttr, line);
      e->name = expect_name_token();
      e->children.push_back(std::move(obj));
      return e;
    }
    ExprPtr target = parse_tuple(false, end_rules, true);
    check_target(*target);
    return target;
  }

  void check_target(const Expr& e) {
    if (e.kind == Expr::Kind::kName) {
      if (e.name == "true" || e.name == "false" || e.name == "none" || e.name == "True" ||
          e.name == "False" || e.name == "None")
        error("cannot assign to " + e.name, e.line);
      return;
    }
    if (e.kind == Expr::Kind::kTuple) {
      for (const auto& c : e.children) check_target(*c);
      return;
    }
    error("can't assign to " + std::string(e.kind == Expr::Kind::kConst ? "literal" : "expression"),
          e.line);
  }

  // ---- expressions ----

  bool is_tuple_end(std::initializer_list<const char*> end_rules) const {
    T t = cur().type;
    if (t == T::kVariableEnd || t == T::kBlockEnd || t == T::kEof) return true;
    if (is_op(")")) return true;
    for (const char* r : end_rules)
      if (is_name(r)) return true;
    return false;
  }

  // parse_tuple: `a, b` is a tuple; `simplified` parses only primaries (assignment targets).
  ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<const char*> end_rules,
                      bool simplified, bool explicit_parens = false) {
    int line = cur().line;
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    for (;;) {
      if (!args.empty()) expect_op(",");
      if (is_tuple_end(end_rules)) break;
      args.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parens) error("Expected an expression, got " + describe_token(cur()));
    }
    auto t = make_expr(Expr::Kind::kTuple, line);
    t->children = std::move(args);
    return t;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    int line = cur().line;
    ExprPtr expr1 = parse_or();
    while (skip_name("if")) {
      ExprPtr expr2 = parse_or();
      ExprPtr expr3 = skip_name("else") ? parse_condexpr() : nullptr;
      auto c = make_expr(Expr::Kind::kCond, line);
      c->children.push_back(std::move(expr2));
      c->children.push_back(std::move(expr1));
      c->children.push_back(std::move(expr3));
      expr1 = std::move(c);
    }
    return expr1;
  }

  ExprPtr binary(Expr::Kind kind, int line, ExprPtr l, ExprPtr r, std::string op = "") {
    auto e = make_expr(kind, line);
    e->name = std::move(op);
    e->children.push_back(std::move(l));
    e->children.push_back(std::move(r));
    return e;
  }

  ExprPtr parse_or() {
    int line = cur().line;
    ExprPtr left = parse_and();
    while (skip_name("or")) left = binary(Expr::Kind::kOr, line, std::move(left), parse_and());
    return left;
  }

  ExprPtr parse_and() {
    int line = cur().line;
    ExprPtr left = parse_not();
    while (skip_name("and")) left = binary(Expr::Kind::kAnd, line, std::move(left), parse_not());
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      int line = next().line;
      auto e = make_expr(Expr::Kind::kNot, line);
      e->children.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr expr = parse_math1();
    ExprPtr cmp;
    for (;;) {
      std::string op;
      if (cur().type == T::kOperator &&
          (cur().value == "==" || cur().value == "!=" || cur().value == "<" ||
           cur().value == "<=" || cur().value == ">" || cur().value == ">=")) {
        op = next().value;
      } else if (skip_name("in")) {
        op = "in";
      } else if (is_name("not") && look().type == T::kName && look().value == "in") {
        next();
        next();
        op = "notin";
      } else {
        break;
      }
      if (!cmp) {
        cmp = make_expr(Expr::Kind::kCompare, line);
        cmp->children.push_back(std::move(expr));
      }
      cmp->ops.push_back(op);
      cmp->children.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(expr);
  }

  ExprPtr parse_math1() {
    int line = cur().line;
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = next().value;
      left = binary(Expr::Kind::kBinary, line, std::move(left), parse_concat(), op);
    }
    return left;
  }

  ExprPtr parse_concat() {
    int line = cur().line;
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    auto e = make_expr(Expr::Kind::kConcat, line);
    e->children.push_back(std::move(first));
    while (skip_op("~")) e->children.push_back(parse_math2());
    return e;
  }

  ExprPtr parse_math2() {
    int line = cur().line;
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = next().value;
      left = binary(Expr::Kind::kBinary, line, std::move(left), parse_pow(), op);
    }
    return left;
  }

  ExprPtr parse_pow() {
    int line = cur().line;
    ExprPtr left = parse_unary(true);
    while (skip_op("**"))
      left = binary(Expr::Kind::kBinary, line, std::move(left), parse_unary(true), "**");
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    int line = cur().line;
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      bool neg = next().value == "-";
      node = make_expr(neg ? Expr::Kind::kNeg : Expr::Kind::kPos, line);
      node->children.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    int line = t.line;
    switch (t.type) {
      case T::kName: {
        std::string n = next().value;
        auto e = make_expr(Expr::Kind::kConst, line);
        if (n == "true" || n == "True") e->value = Value(true);
        else if (n == "false" || n == "False") e->value = Value(false);
        else if (n == "none" || n == "None") e->value = Value(nullptr);
        else {
          e->kind = Expr::Kind::kName;
          e->name = n;
        }
        return e;
      }
      case T::kString: {
        std::string s = next().value;
        while (cur().type == T::kString) s += next().value;
        auto e = make_expr(Expr::Kind::kConst, line);
        e->value = Value(std::move(s));
        return e;
      }
      case T::kInteger: {
        auto e = make_expr(Expr::Kind::kConst, line);
        e->value = Value(next().int_value);
        return e;
      }
      case T::kFloat: {
        auto e = make_expr(Expr::Kind::kConst, line);
        e->value = Value(next().float_value);
        return e;
      }
      case T::kOperator:
        if (t.value == "(") {
          next();
          ExprPtr e = parse_tuple(true, {}, false, true);
          expect_op(")");
          return e;
        }
        if (t.value == "[") {
          next();
          auto e = make_expr(Expr::Kind::kList, line);
          while (!is_op("]")) {
            if (!e->children.empty()) expect_op(",");
            if (is_op("]")) break;
            e->children.push_back(parse_expression(true));
          }
          expect_op("]");
          return e;
        }
        if (t.value == "{") {
          next();
          auto e = make_expr(Expr::Kind::kDict, line);
          while (!is_op("}")) {
            if (!e->children.empty()) expect_op(",");
            if (is_op("}")) break;
            e->children.push_back(parse_expression(true));
            expect_op(":");
            e->children.push_back(parse_expression(true));
          }
          expect_op("}");
          return e;
        }
        break;
      default:
        break;
    }
    error("unexpected " + describe_token(t));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    for (;;) {
      if (is_op(".") || is_op("[")) node = parse_subscript(std::move(node));
      else if (is_op("(")) node = parse_call(std::move(node));
      else return node;
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    for (;;) {
      if (is_op("|")) node = parse_filter(std::move(node), false);
      else if (is_name("is")) node = parse_test(std::move(node));
      else if (is_op("(")) node = parse_call(std::move(node));
      else return node;
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& t = next();
    int line = t.line;
    if (t.value == ".") {
      const Token& attr = next();
      if (attr.type == T::kName) {
        auto e = make_expr(Expr::Kind::kGetAttr, line);
        e->name = attr.value;
        e->children.push_back(std::move(node));
        return e;
      }
      if (attr.type != T::kInteger) error("expected name or number", attr.line);
      auto e = make_expr(Expr::Kind::kGetItem, line);
      auto idx = make_expr(Expr::Kind::kConst, line);
      idx->value = Value(attr.int_value);
      e->children.push_back(std::move(node));
      e->children.push_back(std::move(idx));
      return e;
    }
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) {
        expect_op(",");
        if (is_op("]")) break;
      }
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    auto e = make_expr(Expr::Kind::kGetItem, line);
    e->children.push_back(std::move(node));
    if (args.size() == 1) {
      e->children.push_back(std::move(args[0]));
    } else {
      auto tup = make_expr(Expr::Kind::kTuple, line);
      tup->children = std::move(args);
      e->children.push_back(std::move(tup));
    }
    return e;
  }

  ExprPtr parse_subscribed() {
    int line = cur().line;
    ExprPtr start;
    if (!is_op(":")) {
      start = parse_expression(true);
      if (!is_op(":")) return start;
    }
    next();  // :
    auto s = make_expr(Expr::Kind::kSlice, line);
    s->children.push_back(std::move(start));
    s->children.push_back(!is_op("]") && !is_op(",") && !is_op(":") ? parse_expression(true)
                                                                    : nullptr);
    ExprPtr step;
    if (skip_op(":") && !is_op("]") && !is_op(",")) step = parse_expression(true);
    s->children.push_back(std::move(step));
    return s;
  }

  // Parses `( args )` into node (a kCall, kFilter or kTest) starting at child index 1.
  void parse_call_args(Expr& node) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) {
        expect_op(",");
        if (is_op(")")) break;
      }
      first = false;
      if (skip_op("*")) {
        node.dyn_args = parse_expression(true);
      } else if (skip_op("**")) {
        node.dyn_kwargs = parse_expression(true);
      } else if (cur().type == T::kName && look().type == T::kOperator && look().value == "=") {
        std::string key = next().value;
        next();
        node.kwargs.emplace_back(key, parse_expression(true));
      } else {
        if (!node.kwargs.empty() || node.dyn_args || node.dyn_kwargs)
          error("invalid syntax for function call expression");
        node.children.push_back(parse_expression(true));
      }
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = make_expr(Expr::Kind::kCall, cur().line);
    e->children.push_back(std::move(callee));
    parse_call_args(*e);
    return e;
  }

  std::string dotted_name() {
    std::string name = expect_name_token();
    while (is_op(".") && look().type == T::kName) {
      next();
      name += "." + next().value;
    }
    return name;
  }

  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    while (is_op("|") || start_inline) {
      if (!start_inline) next();
      start_inline = false;
      int line = cur().line;
      auto f = make_expr(Expr::Kind::kFilter, line);
      f->name = dotted_name();
      if (!is_known_filter(f->name)) error("No filter named '" + f->name + "'.", line);
      f->children.push_back(std::move(node));
      if (is_op("(")) parse_call_args(*f);
      node = std::move(f);
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    int line = next().line;  // is
    bool negated = skip_name("not");
    auto t = make_expr(Expr::Kind::kTest, line);
    t->name = dotted_name();
    if (!is_known_test(t->name)) error("No test named '" + t->name + "'.", line);
    t->children.push_back(std::move(node));
    if (is_op("(")) {
      parse_call_args(*t);
    } else {
      const Token& c = cur();
      bool arg_start = c.type == T::kName || c.type == T::kString || c.type == T::kInteger ||
                       c.type == T::kFloat ||
                       (c.type == T::kOperator && (c.value == "(" || c.value == "[" || c.value == "{"));
      if (arg_start && !(c.type == T::kName &&
                         (c.value == "else" || c.value == "or" || c.value == "and"))) {
        if (c.type == T::kName && c.value == "is") error("You cannot chain multiple tests with is");
        t->children.push_back(parse_postfix(parse_primary()));
      }
    }
    if (!negated) return t;
    auto n = make_expr(Expr::Kind::kNot, line);
    n->children.push_back(std::move(t));
    return n;
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int loop_depth_ = 0;
  std::vector<std::string> block_stack_;
};

}  // namespace

Program parse_template(const std::string& source) { return Parser(tokenize(source)).parse(); }

}  // namespace vela::jinja
