// Runtime values of the Jinja engine, with Python semantics: truthiness, str() / repr() printing,
// equality and ordering, and conversion to and from JSON (tojson = json.dumps(ensure_ascii=False)).
// Values are cheap handles; lists, dicts and strings are shared and immutable (the sandbox is
// ImmutableSandboxedEnvironment), only namespace() objects and loop state mutate.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"

namespace vela::jinja {

class Interpreter;
class Value;
using ValueList = std::vector<Value>;

// A template error without a line yet; the interpreter adds the line of the node that failed.
class TemplateError : public std::exception {
 public:
  explicit TemplateError(std::string message, int line = 0)
      : message_(std::move(message)), line_(line) {}
  const char* what() const noexcept override { return message_.c_str(); }
  const std::string& message() const { return message_; }
  int line() const { return line_; }
  void set_line(int line) { line_ = line; }

 private:
  std::string message_;
  int line_;
};

[[noreturn]] void fail(std::string message);

struct ValueDict;
struct Namespace;
struct LoopState;
class Function;

// Arguments of a call: positional then keyword, in source order.
struct CallArgs {
  ValueList positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict, kNamespace,
    kFunction, kLoop,
    kGenerator,  // what map / select / batch ... return in Python: iterable once, always true,
                 // no len(), not subscriptable, not JSON serializable
  };

  Value() = default;  // undefined, without a message
  Value(std::nullptr_t) : kind_(Kind::kNone) {}
  Value(bool b) : kind_(Kind::kBool) { num_.b = b; }
  Value(int v) : Value(static_cast<int64_t>(v)) {}
  Value(int64_t v) : kind_(Kind::kInt) { num_.i = v; }
  Value(double v) : kind_(Kind::kFloat) { num_.f = v; }
  Value(std::string s);
  Value(const char* s) : Value(std::string(s)) {}

  // An undefined value; `message` is the error raised when it is used (attribute access, call,
  // arithmetic): "'x' is undefined", "'dict object' has no attribute 'y'".
  static Value undefined(std::string message);
  static Value list(ValueList items);
  static Value tuple(ValueList items);
  static Value generator(ValueList items);
  // A generator whose first iteration raises `message` (Python evaluates these filters lazily).
  static Value failing_generator(std::string message);
  static Value dict(ValueDict d);
  static Value new_namespace();
  static Value function(std::shared_ptr<const Function> fn);
  static Value loop(std::shared_ptr<LoopState> state);
  static Value from_json(const json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kTuple; }
  bool is_sequence() const { return is_list() || is_tuple(); }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_function() const { return kind_ == Kind::kFunction; }
  bool is_loop() const { return kind_ == Kind::kLoop; }
  bool is_generator() const { return kind_ == Kind::kGenerator; }

  bool as_bool() const { return num_.b; }
  int64_t as_int() const { return kind_ == Kind::kBool ? (num_.b ? 1 : 0) : num_.i; }
  // A number (bool, int or float) as a double.
  double as_double() const;
  const std::string& str() const { return *static_cast<const std::string*>(ptr_.get()); }
  const ValueList& items() const {  // list, tuple or generator
    if (kind_ == Kind::kGenerator) return generator_items();
    return *static_cast<const ValueList*>(ptr_.get()); }
  const ValueDict& dict() const { return *static_cast<const ValueDict*>(ptr_.get()); }
  Namespace& ns() const;
  const Function& fn() const { return *static_cast<const Function*>(ptr_.get()); }
  LoopState& loop_state() const;
  // The message of an undefined value (why it is undefined).
  std::string undefined_message() const;
  // Raises the undefined value's error (UndefinedError or SecurityError in Jinja2).
  [[noreturn]] void fail_undefined() const;

  bool truthy() const;
  std::string to_str() const;  // Python str(): what {{ x }} prints
  std::string repr() const;    // Python repr()
  // Python's name for the type, as in "'dict object' has no attribute 'x'".
  std::string type_name() const;
  // Iterates like Python's iter(): list/tuple items, dict keys, string characters; undefined
  // iterates as empty. Anything else is a TypeError.
  ValueList iterate() const;
  json to_json() const;  // for the API; not Python-exact (use tojson for that)
  bool same_object(const Value& other) const { return kind_ == other.kind_ && ptr_ == other.ptr_; }

 private:
  const ValueList& generator_items() const;

  Kind kind_ = Kind::kUndefined;
  union {
    bool b;
    int64_t i;
    double f;
  } num_{};
  std::shared_ptr<const void> ptr_;
};

struct ValueDict {
  std::vector<std::pair<Value, Value>> entries;
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
  void set(Value key, Value value);
  size_t size() const { return entries.size(); }
};

struct Namespace {
  ValueDict attrs;
};

// Loop state behind the `loop` variable of a for loop.
struct LoopState {
  ValueList items;
  size_t index0 = 0;
  int depth0 = 0;
  Value last_changed;  // for loop.changed()
  bool changed_called = false;
  const void* for_node = nullptr;  // the recursive for statement, for loop(...)
  std::shared_ptr<void> scope;     // the scope the recursive loop runs in
};

// A callable: builtin functions, filters exposed as functions, bound methods, macros.
class Function {
 public:
  virtual ~Function() = default;
  virtual Value call(Interpreter& in, CallArgs& args) const = 0;
  virtual std::string repr() const = 0;
};

// Python semantics.
bool values_equal(const Value& a, const Value& b);
// a < b, or a TypeError naming `op` for unorderable operands.
bool values_less(const Value& a, const Value& b, const char* op = "<");
// Python's repr() of a float ("1.0", "1e+16", "0.1", "inf", "nan").
std::string float_repr(double v);
std::string string_repr(const std::string& s);

struct JsonDumpOptions {
  std::optional<std::string> indent;  // none: single line with ", " and ": "
  bool sort_keys = false;
  bool ensure_ascii = false;
  std::optional<std::string> item_separator, key_separator;  // json.dumps(separators=...)
};
// json.dumps(value, ensure_ascii=False, indent=..., sort_keys=...).
std::string json_dumps(const Value& v, const JsonDumpOptions& opts);

// UTF-8 helpers (the engine indexes strings by code point, like Python).
std::u32string utf8_decode(const std::string& s);
std::string utf8_encode(const std::u32string& s);
void utf8_append(std::string& out, char32_t cp);
size_t utf8_length(const std::string& s);
bool is_py_space(char32_t cp);  // str.isspace()

// Reads a keyword-or-positional argument `name` at position `pos`, or returns `fallback`.
Value get_arg(const CallArgs& args, size_t pos, const char* name, const Value& fallback = Value());
// Fails when more than `max_positional` positional arguments or unknown keywords were passed.
void check_args(const CallArgs& args, size_t max_positional,
                std::initializer_list<const char*> keywords, const char* what);

}  // namespace vela::jinja
