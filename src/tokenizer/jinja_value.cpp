// Jinja runtime values: construction, Python printing (str/repr), comparison, JSON conversion and
// json.dumps-compatible serialisation, and the UTF-8 helpers the engine shares.
#include "tokenizer/jinja_value.h"

#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace vela::jinja {

void fail(std::string message) { throw TemplateError(std::move(message)); }

// ---- UTF-8 ---------------------------------------------------------------------------------

std::u32string utf8_decode(const std::string& s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    utf8proc_int32_t cp = 0;
    utf8proc_ssize_t len = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                                            static_cast<utf8proc_ssize_t>(n - i), &cp);
    if (len <= 0) {
      out.push_back(0xFFFD);
      ++i;
    } else {
      out.push_back(static_cast<char32_t>(cp));
      i += static_cast<size_t>(len);
    }
  }
  return out;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string utf8_encode(const std::u32string& s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) utf8_append(out, cp);
  return out;
}

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool is_py_space(char32_t cp) {
  switch (cp) {
    case ' ': case '\t': case '\n': case '\v': case '\f': case '\r': case 0x1C: case 0x1D:
    case 0x1E: case 0x1F: case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

static bool is_py_printable(char32_t cp) {
  if (cp == ' ') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

// ---- Construction --------------------------------------------------------------------------

Value::Value(std::string s) : kind_(Kind::kString) {
  ptr_ = std::make_shared<const std::string>(std::move(s));
}

Value Value::undefined(std::string message) {
  Value v;
  v.ptr_ = std::make_shared<const std::string>(std::move(message));
  return v;
}

Value Value::list(ValueList items) {
  Value v;
  v.kind_ = Kind::kList;
  v.ptr_ = std::make_shared<const ValueList>(std::move(items));
  return v;
}

Value Value::tuple(ValueList items) {
  Value v = list(std::move(items));
  v.kind_ = Kind::kTuple;
  return v;
}

namespace {
struct Generator {
  ValueList items;
  std::string error;  // raised on iteration when set
};
}  // namespace

Value Value::generator(ValueList items) {
  Value v;
  v.kind_ = Kind::kGenerator;
  v.ptr_ = std::make_shared<const Generator>(Generator{std::move(items), ""});
  return v;
}

Value Value::failing_generator(std::string message) {
  Value v;
  v.kind_ = Kind::kGenerator;
  v.ptr_ = std::make_shared<const Generator>(Generator{{}, std::move(message)});
  return v;
}

const ValueList& Value::generator_items() const {
  const auto* g = static_cast<const Generator*>(ptr_.get());
  if (!g->error.empty()) fail(g->error);
  return g->items;
}

Value Value::dict(ValueDict d) {
  Value v;
  v.kind_ = Kind::kDict;
  v.ptr_ = std::make_shared<const ValueDict>(std::move(d));
  return v;
}

Value Value::new_namespace() {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.ptr_ = std::make_shared<Namespace>();
  return v;
}

Value Value::function(std::shared_ptr<const Function> fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.ptr_ = std::move(fn);
  return v;
}

Value Value::loop(std::shared_ptr<LoopState> state) {
  Value v;
  v.kind_ = Kind::kLoop;
  v.ptr_ = std::move(state);
  return v;
}

Value Value::from_json(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return Value(nullptr);
    case json::value_t::boolean: return Value(j.get<bool>());
    case json::value_t::number_integer: return Value(j.get<int64_t>());
    case json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case json::value_t::number_float: return Value(j.get<double>());
    case json::value_t::string: return Value(j.get<std::string>());
    case json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e));
      return list(std::move(items));
    }
    case json::value_t::object: {
      ValueDict d;
      d.entries.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        d.entries.emplace_back(Value(it.key()), from_json(it.value()));
      }
      return dict(std::move(d));
    }
    default: return Value(nullptr);  // binary / discarded: not produced by the JSON parser
  }
}

Namespace& Value::ns() const {
  return *const_cast<Namespace*>(static_cast<const Namespace*>(ptr_.get()));
}

LoopState& Value::loop_state() const {
  return *const_cast<LoopState*>(static_cast<const LoopState*>(ptr_.get()));
}

double Value::as_double() const {
  switch (kind_) {
    case Kind::kBool: return num_.b ? 1.0 : 0.0;
    case Kind::kInt: return static_cast<double>(num_.i);
    default: return num_.f;
  }
}

std::string Value::undefined_message() const {
  if (ptr_) return *static_cast<const std::string*>(ptr_.get());
  return "value is undefined";
}

void Value::fail_undefined() const { fail(undefined_message()); }

// ---- Python behaviour ----------------------------------------------------------------------

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined: case Kind::kNone: return false;
    case Kind::kBool: return num_.b;
    case Kind::kInt: return num_.i != 0;
    case Kind::kFloat: return num_.f != 0.0;
    case Kind::kString: return !str().empty();
    case Kind::kList: case Kind::kTuple: return !items().empty();
    case Kind::kDict: return dict().size() != 0;
    default: return true;
  }
}

std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci looks like "-1.2345e+02": split into sign, digits and the decimal exponent.
  bool neg = sci[0] == '-';
  size_t start = neg ? 1 : 0;
  size_t epos = sci.find('e');
  std::string digits;
  for (size_t i = start; i < epos; ++i)
    if (sci[i] != '.') digits.push_back(sci[i]);
  int exp = std::atoi(sci.c_str() + epos + 1);
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exp - 1), '0');
      out += digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out += digits;
      out.append(static_cast<size_t>(exp) + 1 - digits.size(), '0');
      out += ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exp) + 1);
      out += ".";
      out += digits.substr(static_cast<size_t>(exp) + 1);
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += ebuf;
  }
  return out;
}

std::string string_repr(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  char buf[16];
  for (char32_t cp : utf8_decode(s)) {
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x20 || cp == 0x7F) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(cp));
      out += buf;
    } else if (cp < 0x7F || is_py_printable(cp)) {
      utf8_append(out, cp);
    } else {
      if (cp <= 0xFF) std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(cp));
      else if (cp <= 0xFFFF) std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
      else std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(cp));
      out += buf;
    }
  }
  out.push_back(quote);
  return out;
}

std::string Value::to_str() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kString: return str();
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "None";
    case Kind::kBool: return num_.b ? "True" : "False";
    case Kind::kInt: return std::to_string(num_.i);
    case Kind::kFloat: return float_repr(num_.f);
    case Kind::kString: return string_repr(str());
    case Kind::kList: case Kind::kTuple: {
      bool is_tup = kind_ == Kind::kTuple;
      std::string out = is_tup ? "(" : "[";
      const auto& xs = items();
      for (size_t i = 0; i < xs.size(); ++i) {
        if (i) out += ", ";
        out += xs[i].repr();
      }
      if (is_tup && xs.size() == 1) out += ",";
      out += is_tup ? ")" : "]";
      return out;
    }
    case Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : dict().entries) {
        if (!first) out += ", ";
        first = false;
        out += k.repr() + ": " + v.repr();
      }
      return out + "}";
    }
    case Kind::kNamespace: return "<Namespace " + Value::dict(ns().attrs).repr() + ">";
    case Kind::kFunction: return fn().repr();
    case Kind::kGenerator: return "<generator object>";
    case Kind::kLoop: {
      const LoopState& st = loop_state();
      return "<LoopContext " + std::to_string(st.index0 + 1) + "/" +
             std::to_string(st.items.size()) + ">";
    }
  }
  return "";
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return "list";
    case Kind::kTuple: return "tuple";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kFunction: return "function";
    case Kind::kLoop: return "LoopContext";
    case Kind::kGenerator: return "generator";
  }
  return "object";
}

ValueList Value::iterate() const {
  switch (kind_) {
    case Kind::kUndefined: return {};
    case Kind::kList: case Kind::kTuple: case Kind::kGenerator: return items();
    case Kind::kDict: {
      ValueList keys;
      keys.reserve(dict().size());
      for (const auto& kv : dict().entries) keys.push_back(kv.first);
      return keys;
    }
    case Kind::kString: {
      ValueList chars;
      std::string ch;
      for (char32_t cp : utf8_decode(str())) {
        ch.clear();
        utf8_append(ch, cp);
        chars.emplace_back(ch);
      }
      return chars;
    }
    default: fail("'" + type_name() + "' object is not iterable");
  }
}

json Value::to_json() const {
  switch (kind_) {
    case Kind::kNone: case Kind::kUndefined: return nullptr;
    case Kind::kBool: return num_.b;
    case Kind::kInt: return num_.i;
    case Kind::kFloat: return num_.f;
    case Kind::kString: return str();
    case Kind::kList: case Kind::kTuple: {
      json arr = json::array();
      for (const auto& x : items()) arr.push_back(x.to_json());
      return arr;
    }
    case Kind::kDict: {
      json obj = json::object();
      for (const auto& [k, v] : dict().entries) obj[k.to_str()] = v.to_json();
      return obj;
    }
    case Kind::kNamespace: return Value::dict(ns().attrs).to_json();
    default: return repr();
  }
}

// ---- Dicts ---------------------------------------------------------------------------------

const Value* ValueDict::find(const std::string& key) const {
  for (const auto& kv : entries)
    if (kv.first.is_string() && kv.first.str() == key) return &kv.second;
  return nullptr;
}

const Value* ValueDict::find(const Value& key) const {
  if (key.is_string()) return find(key.str());
  for (const auto& kv : entries)
    if (values_equal(kv.first, key)) return &kv.second;
  return nullptr;
}

void ValueDict::set(Value key, Value value) {
  for (auto& kv : entries) {
    if (values_equal(kv.first, key)) {
      kv.second = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

// ---- Comparison ----------------------------------------------------------------------------

bool values_equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (!a.is_float() && !b.is_float()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::kUndefined: case K::kNone: return true;
    case K::kString: return a.str() == b.str();
    case K::kList: case K::kTuple: {
      const auto& x = a.items();
      const auto& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!values_equal(x[i], y[i])) return false;
      return true;
    }
    case K::kDict: {
      const auto& x = a.dict();
      const auto& y = b.dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* other = y.find(k);
        if (!other || !values_equal(v, *other)) return false;
      }
      return true;
    }
    default: return a.same_object(b);
  }
}

bool values_less(const Value& a, const Value& b, const char* op) {
  if (a.is_number() && b.is_number()) {
    if (!a.is_float() && !b.is_float()) return a.as_int() < b.as_int();
    return a.as_double() < b.as_double();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 order = code point order
  if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!values_equal(x[i], y[i])) return values_less(x[i], y[i], op);
    }
    return x.size() < y.size();
  }
  fail(std::string("'") + op + "' not supported between instances of '" + a.type_name() +
       "' and '" + b.type_name() + "'");
}

// ---- json.dumps ----------------------------------------------------------------------------

static void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out.push_back('"');
  char buf[16];
  for (char32_t cp : utf8_decode(s)) {
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (cp < 0x20 || (ensure_ascii && cp > 0x7E)) {
          if (cp >= 0x10000) {
            char32_t v = cp - 0x10000;
            std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xD800 + (v >> 10),
                          0xDC00 + (v & 0x3FF));
          } else {
            std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
          }
          out += buf;
        } else {
          utf8_append(out, cp);
        }
    }
  }
  out.push_back('"');
}

static std::string json_float(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return float_repr(v);
}

static void json_dump(std::string& out, const Value& v, const JsonDumpOptions& opts, int level) {
  using K = Value::Kind;
  const std::string item_sep =
      opts.item_separator ? *opts.item_separator : (opts.indent ? "," : ", ");
  auto newline = [&](int lvl) {
    out.push_back('\n');
    for (int i = 0; i < lvl; ++i) out += *opts.indent;
  };
  switch (v.kind()) {
    case K::kNone: out += "null"; return;
    case K::kBool: out += v.as_bool() ? "true" : "false"; return;
    case K::kInt: out += std::to_string(v.as_int()); return;
    case K::kFloat: out += json_float(v.as_double()); return;
    case K::kString: json_string(out, v.str(), opts.ensure_ascii); return;
    case K::kList: case K::kTuple: {
      const auto& xs = v.items();
      if (xs.empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      for (size_t i = 0; i < xs.size(); ++i) {
        if (i) out += item_sep;
        if (opts.indent) newline(level + 1);
        json_dump(out, xs[i], opts, level + 1);
      }
      if (opts.indent) newline(level);
      out.push_back(']');
      return;
    }
    case K::kDict: {
      std::vector<const std::pair<Value, Value>*> entries;
      for (const auto& kv : v.dict().entries) entries.push_back(&kv);
      if (entries.empty()) {
        out += "{}";
        return;
      }
      if (opts.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) {
          return values_less(a->first, b->first);
        });
      }
      out.push_back('{');
      bool first = true;
      for (const auto* kv : entries) {
        if (!first) out += item_sep;
        first = false;
        if (opts.indent) newline(level + 1);
        const Value& k = kv->first;
        switch (k.kind()) {
          case K::kString: json_string(out, k.str(), opts.ensure_ascii); break;
          case K::kBool: out += k.as_bool() ? "\"true\"" : "\"false\""; break;
          case K::kNone: out += "\"null\""; break;
          case K::kInt: out += "\"" + std::to_string(k.as_int()) + "\""; break;
          case K::kFloat: out += "\"" + json_float(k.as_double()) + "\""; break;
          default:
            fail("keys must be str, int, float, bool or None, not " + k.type_name());
        }
        out += opts.key_separator ? *opts.key_separator : ": ";
        json_dump(out, kv->second, opts, level + 1);
      }
      if (opts.indent) newline(level);
      out.push_back('}');
      return;
    }
    default:
      fail("Object of type " + v.type_name() + " is not JSON serializable");
  }
}

std::string json_dumps(const Value& v, const JsonDumpOptions& opts) {
  std::string out;
  json_dump(out, v, opts, 0);
  return out;
}

// ---- Arguments -----------------------------------------------------------------------------

Value get_arg(const CallArgs& args, size_t pos, const char* name, const Value& fallback) {
  if (pos < args.positional.size()) return args.positional[pos];
  for (const auto& [k, v] : args.keyword)
    if (k == name) return v;
  return fallback;
}

void check_args(const CallArgs& args, size_t max_positional,
                std::initializer_list<const char*> keywords, const char* what) {
  if (args.positional.size() > max_positional) {
    fail(std::string(what) + "() takes at most " + std::to_string(max_positional) +
         " positional argument(s) (" + std::to_string(args.positional.size()) + " given)");
  }
  for (const auto& kv : args.keyword) {
    bool known = false;
    for (const char* k : keywords) known = known || kv.first == k;
    if (!known) fail(std::string(what) + "() got an unexpected keyword argument '" + kv.first + "'");
  }
}

}  // namespace vela::jinja
