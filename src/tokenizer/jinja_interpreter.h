// Jinja interpreter: renders a parsed Program against a scope of variables, with the semantics of
// Python Jinja2's ImmutableSandboxedEnvironment as transformers configures it. One Interpreter
// per render (it holds the render's state); the Program is shared read-only, so concurrent
// renders of one template are safe. Errors are TemplateError carrying the template line.
#pragma once

#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_parser.h"
#include "tokenizer/jinja_value.h"

namespace vela::jinja {

// A variable scope: the render's globals, a loop iteration, a macro call, a with block.
struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* find(const std::string& name) const;
  void set(const std::string& name, Value value);
};
using ScopePtr = std::shared_ptr<Scope>;

// Local time for strftime_now(); injectable so tests can pin the date.
using Clock = std::function<std::tm()>;
std::tm system_local_time();

class Interpreter {
 public:
  explicit Interpreter(Clock clock) : clock_(std::move(clock)) {}
  // Breaks the scope <-> macro reference cycles of this render.
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders `program` with `globals` as the outermost scope (builtins are added beneath it).
  std::string render(const Program& program, ScopePtr globals);

  Value eval(const Expr& e, const ScopePtr& scope);
  Value call(const Value& callee, CallArgs& args);
  Value get_attr(const Value& obj, const std::string& name);
  Value get_item(const Value& obj, const Value& key);
  Value apply_filter(const std::string& name, const Value& operand, CallArgs& args);
  bool apply_test(const std::string& name, const Value& operand, CallArgs& args);
  // Renders a statement list into `out` (macros, call blocks and set blocks use this).
  void render_body(const StmtList& body, const ScopePtr& scope, std::string& out);
  const Clock& clock() const { return clock_; }

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  Flow exec(const StmtList& body, const ScopePtr& scope, std::string& out);
  Flow exec_stmt(const Stmt& s, const ScopePtr& scope, std::string& out);
  Flow exec_for(const Stmt& s, const ScopePtr& scope, std::string& out);
  void run_loop(const Stmt& s, const Value& iterable, const ScopePtr& scope, int depth0,
                std::string& out);
  void assign(const Expr& target, const Value& value, Scope& scope);
  Value eval_inner(const Expr& e, const ScopePtr& scope);
  Value apply_filter_eager(const std::string& name, const Value& operand, CallArgs& args);
  Value eval_filter_chain(const Expr& e, const ScopePtr& scope, Value operand);
  CallArgs eval_args(const Expr& e, const ScopePtr& scope, size_t first_child);
  Value eval_compare(const Expr& e, const ScopePtr& scope);
  Value make_macro(const Stmt& s, const ScopePtr& scope, const std::string& name);

  Clock clock_;
  int depth_ = 0;
  std::vector<ScopePtr> closure_scopes_;  // scopes captured by macros (cleared at the end)  // recursion guard for macros and recursive loops
};

// Parses and renders `source` with the variables of `context` (a JSON object): for tests and
// tools. Throws TemplateError.
std::string render_string(const std::string& source, const json& context,
                          Clock clock = system_local_time);

// Operators with Python semantics (jinja_operators.cpp).
Value binary_op(const std::string& op, const Value& a, const Value& b);
Value unary_minus(const Value& v);
bool contains(const Value& container, const Value& item);
// Python printf-style formatting: "%s-%d" % args (args: a tuple, a dict, or a single value).
std::string percent_format(const std::string& fmt, const Value& args);
// Python str.format(*args, **kwargs) for {} / {0} / {name} fields without format specs.
std::string str_format(const std::string& fmt, const CallArgs& args);

// Attribute lookup of built-in methods on str, dict and list values (jinja_methods.cpp);
// nullopt when `obj` has no method `name`. Mutating methods (list.append, dict.update, ...)
// come back as an undefined that raises the sandbox's "unsafe" error when called.
std::optional<Value> get_method(const Value& obj, const std::string& name);
// The builtin globals: range, namespace, dict, raise_exception, strftime_now, joiner, cycler.
const std::vector<std::pair<std::string, Value>>& builtin_globals();

// "'dict object' has no attribute 'x'" and friends (jinja2.utils.object_type_repr).
std::string object_type_repr(const Value& v);
std::string strftime_format(const std::string& fmt, const std::tm& tm);

}  // namespace vela::jinja
