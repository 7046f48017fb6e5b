// Python operator semantics for the Jinja engine: arithmetic (int / float promotion, true and floor
// division, modulo with the divisor's sign, **), sequence concatenation and repetition, `in`, and
// the two string formatting mini-languages templates use: "%s" % x and "{}".format(x).
#include <cmath>
#include <cstdio>

#include "tokenizer/jinja_interpreter.h"

namespace vela::jinja {
namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  fail("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" +
       b.type_name() + "'");
}

std::string repeat(const std::string& s, int64_t n) {
  std::string out;
  for (int64_t i = 0; i < n; ++i) out += s;
  return out;
}

Value float_op(const std::string& op, double x, double y);

Value int_op(const std::string& op, int64_t x, int64_t y) {
  int64_t r = 0;
  if (op == "+") {
    if (__builtin_add_overflow(x, y, &r)) fail("integer overflow");
    return Value(r);
  }
  if (op == "-") {
    if (__builtin_sub_overflow(x, y, &r)) fail("integer overflow");
    return Value(r);
  }
  if (op == "*") {
    if (__builtin_mul_overflow(x, y, &r)) fail("integer overflow");
    return Value(r);
  }
  if (op == "/") {
    if (y == 0) fail("division by zero");
    return Value(static_cast<double>(x) / static_cast<double>(y));
  }
  if (op == "//" || op == "%") {
    if (y == 0) fail(op == "//" ? "integer division or modulo by zero" : "integer modulo by zero");
    int64_t q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) {
      q -= 1;
      m += y;
    }
    return Value(op == "//" ? q : m);
  }
  // **
  if (y < 0) return float_op("**", static_cast<double>(x), static_cast<double>(y));
  int64_t result = 1, base = x;
  for (int64_t e = y; e > 0; e >>= 1) {
    if (e & 1)
      if (__builtin_mul_overflow(result, base, &result)) fail("integer overflow");
    if (e > 1 && __builtin_mul_overflow(base, base, &base)) fail("integer overflow");
  }
  return Value(result);
}

Value float_op(const std::string& op, double x, double y) {
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "/") {
    if (y == 0) fail("float division by zero");
    return Value(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) fail(op == "//" ? "float floor division by zero" : "float modulo");
    double m = std::fmod(x, y);
    double div = (x - m) / y;
    if (m != 0 && ((y < 0) != (m < 0))) {
      m += y;
      div -= 1.0;
    }
    if (op == "%") return Value(m == 0 ? std::copysign(0.0, y) : m);
    double floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
    return Value(floordiv);
  }
  if (x == 0 && y < 0) fail("0.0 cannot be raised to a negative power");
  return Value(std::pow(x, y));
}

// Applies a printf-style conversion spec to one value.
std::string format_one(char conv, const std::string& flags, int width, int precision,
                       const Value& v) {
  std::string body;
  if (conv == 's' || conv == 'r' || conv == 'a') {
    body = conv == 's' ? v.to_str() : v.repr();
    if (precision >= 0) body = utf8_encode(utf8_decode(body).substr(0, static_cast<size_t>(precision)));
    int pad = width - static_cast<int>(utf8_length(body));
    if (pad > 0) {
      if (flags.find('-') != std::string::npos) body += std::string(static_cast<size_t>(pad), ' ');
      else body = std::string(static_cast<size_t>(pad), ' ') + body;
    }
    return body;
  }
  if (conv == 'c') {
    if (v.is_string()) return v.str();
    std::string s;
    utf8_append(s, static_cast<char32_t>(v.as_int()));
    return s;
  }
  if (v.is_undefined()) v.fail_undefined();
  if (!v.is_number())
    fail(std::string("%") + conv + " format: a real number is required, not " + v.type_name());
  std::string spec(1, '%');
  spec += flags;
  if (width >= 0) spec += std::to_string(width);
  if (precision >= 0) {
    spec += '.';
    spec += std::to_string(precision);
  }
  char buf[512];
  if (conv == 'd' || conv == 'i' || conv == 'u' || conv == 'x' || conv == 'X' || conv == 'o') {
    int64_t n = v.is_float() ? static_cast<int64_t>(v.as_double()) : v.as_int();
    spec += std::string("ll") + (conv == 'i' || conv == 'u' ? 'd' : conv);
    std::snprintf(buf, sizeof(buf), spec.c_str(), static_cast<long long>(n));
  } else {
    spec.push_back(conv);
    std::snprintf(buf, sizeof(buf), spec.c_str(), v.as_double());
  }
  return buf;
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) a.fail_undefined();
  if (b.is_undefined()) b.fail_undefined();
  if (a.is_number() && b.is_number()) {
    if (!a.is_float() && !b.is_float()) return int_op(op, a.as_int(), b.as_int());
    return float_op(op, a.as_double(), b.as_double());
  }
  if (a.is_string()) {
    if (op == "+") {
      if (!b.is_string())
        fail("can only concatenate str (not \"" + b.type_name() + "\") to str");
      return Value(a.str() + b.str());
    }
    if (op == "*" && (b.is_int() || b.is_bool())) return Value(repeat(a.str(), b.as_int()));
    if (op == "%") return Value(percent_format(a.str(), b));
    unsupported(op, a, b);
  }
  if (op == "*" && b.is_string() && (a.is_int() || a.is_bool()))
    return Value(repeat(b.str(), a.as_int()));
  if (op == "*" && b.is_sequence() && (a.is_int() || a.is_bool())) return binary_op(op, b, a);
  if (a.is_sequence()) {
    if (op == "+") {
      if (b.kind() != a.kind())
        fail("can only concatenate " + a.type_name() + " (not \"" + b.type_name() + "\") to " +
             a.type_name());
      ValueList out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return a.is_list() ? Value::list(std::move(out)) : Value::tuple(std::move(out));
    }
    if (op == "*" && (b.is_int() || b.is_bool())) {
      ValueList out;
      for (int64_t i = 0; i < b.as_int(); ++i) out.insert(out.end(), a.items().begin(), a.items().end());
      return a.is_list() ? Value::list(std::move(out)) : Value::tuple(std::move(out));
    }
  }
  unsupported(op, a, b);
}

Value unary_minus(const Value& v) {
  if (v.is_undefined()) v.fail_undefined();
  if (v.is_float()) return Value(-v.as_double());
  if (v.is_number()) {
    if (v.as_int() == INT64_MIN) fail("integer overflow");
    return Value(-v.as_int());
  }
  fail("bad operand type for unary -: '" + v.type_name() + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined: return false;
    case Value::Kind::kString:
      if (item.is_undefined()) item.fail_undefined();
      if (!item.is_string())
        fail("'in <string>' requires string as left operand, not " + item.type_name());
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::kList: case Value::Kind::kTuple: case Value::Kind::kGenerator:
      for (const auto& x : container.items())
        if (values_equal(x, item)) return true;
      return false;
    case Value::Kind::kDict:
      if (item.is_list() || item.is_dict() || item.is_namespace())
        fail("unhashable type: '" + item.type_name() + "'");
      return container.dict().find(item) != nullptr;
    default: fail("argument of type '" + container.type_name() + "' is not iterable");
  }
}

std::string percent_format(const std::string& fmt, const Value& args) {
  ValueList positional;
  const ValueDict* mapping = nullptr;
  if (args.is_tuple()) positional = args.items();
  else if (args.is_dict()) mapping = &args.dict();
  else positional.push_back(args);
  size_t next = 0;
  bool used_mapping = false;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (++i >= fmt.size()) fail("incomplete format");
    const Value* value = nullptr;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string::npos) fail("incomplete format key");
      if (!mapping) fail("format requires a mapping");
      value = mapping->find(fmt.substr(i + 1, close - i - 1));
      if (!value) fail("KeyError: '" + fmt.substr(i + 1, close - i - 1) + "'");
      used_mapping = true;
      i = close + 1;
    }
    std::string flags;
    while (i < fmt.size() && std::string("-+ #0").find(fmt[i]) != std::string::npos) flags += fmt[i++];
    int width = -1, precision = -1;
    while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9')
      width = (width < 0 ? 0 : width) * 10 + (fmt[i++] - '0');
    if (i < fmt.size() && fmt[i] == '.') {
      precision = 0;
      ++i;
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') precision = precision * 10 + (fmt[i++] - '0');
    }
    while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) fail("incomplete format");
    char conv = fmt[i];
    if (conv == '%') {
      out.push_back('%');
      continue;
    }
    if (std::string("sradiuxXoeEfFgGc").find(conv) == std::string::npos)
      fail(std::string("unsupported format character '") + conv + "'");
    Value single;
    if (!value) {
      if (mapping) {
        single = args;  // "%s" % {'a': 1} formats the dict itself
        value = &single;
      } else {
        if (next >= positional.size()) fail("not enough arguments for format string");
        value = &positional[next++];
      }
    }
    out += format_one(conv, flags, width, precision, *value);
  }
  // A single non-tuple argument that is a sequence or mapping may go unused (CPython's rule).
  bool lenient = !args.is_tuple() && (args.is_list() || args.is_dict() || args.is_undefined());
  if (!mapping && !lenient && next < positional.size())
    fail("not all arguments converted during string formatting");
  (void)used_mapping;
  return out;
}

std::string str_format(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      fail("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) fail("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    std::string spec, conv;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      conv = field.substr(bang + 1);
      field = field.substr(0, bang);
    }
    Value v;
    if (field.empty() || std::all_of(field.begin(), field.end(), ::isdigit)) {
      size_t idx = field.empty() ? auto_idx++ : std::stoul(field);
      if (idx >= args.positional.size())
        fail("Replacement index " + std::to_string(idx) + " out of range for positional args tuple");
      v = args.positional[idx];
    } else {
      bool found = false;
      for (const auto& [k, kv] : args.keyword) {
        if (k == field) {
          v = kv;
          found = true;
        }
      }
      if (!found) fail("KeyError: '" + field + "'");
    }
    if (conv == "r") v = Value(v.repr());
    else if (conv == "s") v = Value(v.to_str());
    if (spec.empty()) {
      out += v.to_str();
      continue;
    }
    // [[fill]align][sign][0][width][.precision][type]
    size_t p = 0;
    char fill = ' ', align = 0;
    if (spec.size() >= 2 && std::string("<>^=").find(spec[1]) != std::string::npos) {
      fill = spec[0];
      align = spec[1];
      p = 2;
    } else if (!spec.empty() && std::string("<>^=").find(spec[0]) != std::string::npos) {
      align = spec[0];
      p = 1;
    }
    std::string flags;
    if (p < spec.size() && (spec[p] == '+' || spec[p] == '-' || spec[p] == ' ')) flags += spec[p++];
    if (p < spec.size() && spec[p] == '0') {
      fill = '0';
      if (!align) align = '=';
      ++p;
    }
    int width = 0, precision = -1;
    while (p < spec.size() && isdigit(static_cast<unsigned char>(spec[p]))) width = width * 10 + (spec[p++] - '0');
    if (p < spec.size() && spec[p] == '.') {
      precision = 0;
      ++p;
      while (p < spec.size() && isdigit(static_cast<unsigned char>(spec[p]))) precision = precision * 10 + (spec[p++] - '0');
    }
    char type = p < spec.size() ? spec[p] : (v.is_string() ? 's' : v.is_float() ? 'r' : 'd');
    std::string body;
    if (type == 'r') body = v.to_str();
    else if (type == 's') body = format_one('s', "", -1, precision, v);
    else body = format_one(type, flags, -1, precision, v);
    int pad = width - static_cast<int>(utf8_length(body));
    if (!align) align = v.is_string() ? '<' : '>';
    if (pad > 0) {
      std::string f(static_cast<size_t>(pad), fill);
      if (align == '<') body += f;
      else if (align == '>') body = f + body;
      else if (align == '^') body = std::string(static_cast<size_t>(pad / 2), fill) + body +
                                   std::string(static_cast<size_t>(pad - pad / 2), fill);
      else {
        size_t sign = (!body.empty() && (body[0] == '-' || body[0] == '+')) ? 1 : 0;
        body = body.substr(0, sign) + f + body.substr(sign);
      }
    }
    out += body;
  }
  return out;
}

}  // namespace vela::jinja
