// Jinja filters and tests, ported from jinja2/filters.py and jinja2/tests.py (with transformers'
// tojson = json.dumps(ensure_ascii=False, indent, separators, sort_keys)). Filters that return
// generators in Python (map, select, reverse, batch ...) return lists here.
#include <utf8proc.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "tokenizer/jinja_interpreter.h"

namespace vela::jinja {
namespace {

const std::set<std::string>& filter_names() {
  static const std::set<std::string> names = {
      "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e",
      "escape", "first", "float", "forceescape", "format", "indent", "int", "items", "join",
      "last", "length", "list", "lower", "map", "max", "min", "reject", "rejectattr", "replace",
      "reverse", "round", "safe", "select", "selectattr", "slice", "sort", "string", "sum",
      "title", "tojson", "trim", "truncate", "unique", "upper", "wordcount",
      // Jinja2 builtins vela does not implement: known names, so the error comes at render time.
      "filesizeformat", "groupby", "pprint", "random", "striptags", "urlencode", "urlize",
      "wordwrap", "xmlattr"};
  return names;
}

const std::set<std::string>& test_names() {
  static const std::set<std::string> names = {
      "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "==", "escaped", "even",
      "false", "filter", "float", "ge", ">=", "gt", "greaterthan", ">", "in", "integer",
      "iterable", "le", "<=", "lower", "lt", "lessthan", "<", "mapping", "ne", "!=", "none",
      "number", "odd", "sameas", "sequence", "string", "test", "true", "undefined", "upper"};
  return names;
}

// Python str() of a value, as soft_str does; undefined is "".
std::string text_of(const Value& v) { return v.to_str(); }

Value lower_if_string(const Value& v) {
  if (!v.is_string()) return v;
  std::string out;
  for (char32_t c : utf8_decode(v.str()))
    utf8_append(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
  return Value(out);
}

// make_attrgetter: "a.b.0" walks items/attributes; `default` replaces undefined parts.
Value get_path(Interpreter& in, Value item, const Value& attribute, const Value& dflt) {
  std::vector<Value> parts;
  if (attribute.is_string()) {
    const std::string& a = attribute.str();
    size_t start = 0;
    for (;;) {
      size_t dot = a.find('.', start);
      std::string part = a.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
      parts.push_back(digits ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
  } else if (!attribute.is_none() && !attribute.is_undefined()) {
    parts.push_back(attribute);
  }
  for (const auto& part : parts) {
    item = in.get_item(item, part);
    if (!dflt.is_none() && !dflt.is_undefined() && item.is_undefined()) item = dflt;
  }
  return item;
}

// make_multi_attrgetter for sort: "a,b" gives a list key.
Value sort_key(Interpreter& in, const Value& item, const Value& attribute, bool case_sensitive) {
  auto post = [&](const Value& v) { return case_sensitive ? v : lower_if_string(v); };
  if (!attribute.is_string() || attribute.str().find(',') == std::string::npos)
    return post(get_path(in, item, attribute, Value()));
  ValueList keys;
  std::string a = attribute.str();
  size_t start = 0;
  for (;;) {
    size_t comma = a.find(',', start);
    keys.push_back(post(get_path(in, item, Value(a.substr(start, comma - start)), Value())));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return Value::list(std::move(keys));
}

ValueList sorted(ValueList items, std::vector<Value> keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return reverse ? values_less(keys[b], keys[a]) : values_less(keys[a], keys[b]);
  });
  ValueList out;
  out.reserve(items.size());
  for (size_t i : order) out.push_back(std::move(items[i]));
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

// Python int(str, base) for the int filter.
std::optional<int64_t> parse_int(std::string s, int base) {
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  s = s.substr(b, e - b);
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, base);
  if (errno || *end != '\0') return std::nullopt;
  return static_cast<int64_t>(v);
}

std::optional<double> parse_float(const std::string& str) {
  std::string s = str;
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  s = s.substr(b, e - b);
  if (s.empty() || s.find_first_of("xXpP") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return v;
}

// Python's round(x, ndigits) for floats (round-half-even on the exact binary value).
double py_round(double x, int64_t ndigits) {
  if (!std::isfinite(x)) return x;
  if (ndigits == 0) return std::nearbyint(x);
  if (ndigits > 300 || ndigits < -300) return ndigits > 0 ? x : 0.0 * x;
  if (ndigits > 0) {
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(ndigits), x);
    return std::strtod(buf, nullptr);
  }
  double p = std::pow(10.0, static_cast<double>(-ndigits));
  return std::nearbyint(x / p) * p;
}

std::string indent_text(const std::string& s_in, const Value& width, bool first, bool blank) {
  std::string ind = width.is_string() ? width.str() : std::string(static_cast<size_t>(std::max<int64_t>(0, width.as_int())), ' ');
  std::string s = s_in + "\n";
  // str.splitlines()
  std::vector<std::string> lines;
  {
    std::u32string cps = utf8_decode(s);
    size_t i = 0;
    while (i < cps.size()) {
      size_t j = i;
      auto brk = [](char32_t c) {
        return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
               c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
      };
      while (j < cps.size() && !brk(cps[j])) ++j;
      lines.push_back(utf8_encode(cps.substr(i, j - i)));
      if (j < cps.size() && cps[j] == '\r' && j + 1 < cps.size() && cps[j + 1] == '\n') ++j;
      i = j + 1;
    }
  }
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) rv += "\n" + ind;
      rv += lines[i];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    if (lines.size() > 1) {
      rv += "\n";
      for (size_t i = 1; i < lines.size(); ++i) {
        if (i > 1) rv += "\n";
        rv += lines[i].empty() ? lines[i] : ind + lines[i];
      }
    }
  }
  if (first) rv = ind + rv;
  return rv;
}

int64_t to_int_arg(const Value& v, const char* what) {
  if (v.is_undefined()) v.fail_undefined();
  if (v.is_float()) return static_cast<int64_t>(v.as_double());
  if (!v.is_int() && !v.is_bool()) fail(std::string(what) + " must be an integer, not " + v.type_name());
  return v.as_int();
}

}  // namespace

bool is_known_filter(const std::string& name) { return filter_names().count(name) != 0; }
bool is_known_test(const std::string& name) { return test_names().count(name) != 0; }

Value Interpreter::apply_filter(const std::string& name, const Value& v, CallArgs& args) {
  // These filters are generator functions in Jinja2: their errors surface only when the result
  // is iterated, so a failure here becomes a generator that fails when used.
  static const std::set<std::string> lazy = {"map", "select", "reject", "selectattr", "rejectattr",
                                             "unique", "batch", "slice", "items"};
  if (lazy.count(name)) {
    // map and the select family start with `if value:`: a falsy input yields nothing.
    if (!v.truthy() && (name == "map" || name.find("select") != std::string::npos ||
                        name.find("reject") != std::string::npos))
      return Value::generator({});
    try {
      return apply_filter_eager(name, v, args);
    } catch (const TemplateError& e) {
      return Value::failing_generator(e.message());
    }
  }
  return apply_filter_eager(name, v, args);
}

Value Interpreter::apply_filter_eager(const std::string& name, const Value& v, CallArgs& args) {
  auto arg = [&](size_t pos, const char* key, const Value& dflt = Value()) {
    return get_arg(args, pos, key, dflt);
  };
  if (name == "tojson") {
    JsonDumpOptions o;
    o.ensure_ascii = arg(0, "ensure_ascii", Value(false)).truthy();
    Value indent = arg(1, "indent", Value(nullptr));
    if (indent.is_string()) o.indent = indent.str();
    else if (!indent.is_none() && !indent.is_undefined())
      o.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, to_int_arg(indent, "indent"))), ' ');
    Value seps = arg(2, "separators", Value(nullptr));
    if (seps.is_sequence() && seps.items().size() == 2) {
      o.item_separator = seps.items()[0].to_str();
      o.key_separator = seps.items()[1].to_str();
    }
    o.sort_keys = arg(3, "sort_keys", Value(false)).truthy();
    return Value(json_dumps(v, o));
  }
  if (name == "default" || name == "d") {
    bool boolean = arg(1, "boolean", Value(false)).truthy();
    if (v.is_undefined() || (boolean && !v.truthy())) return arg(0, "default_value", Value(""));
    return v;
  }
  if (name == "length" || name == "count") {
    switch (v.kind()) {
      case Value::Kind::kUndefined: return Value(int64_t{0});
      case Value::Kind::kString: return Value(static_cast<int64_t>(utf8_length(v.str())));
      case Value::Kind::kList: case Value::Kind::kTuple: return Value(static_cast<int64_t>(v.items().size()));
      case Value::Kind::kDict: return Value(static_cast<int64_t>(v.dict().size()));
      case Value::Kind::kNamespace: return Value(static_cast<int64_t>(v.ns().attrs.size()));
      default: fail("object of type '" + v.type_name() + "' has no len()");
    }
  }
  if (name == "trim") {
    CallArgs a;
    a.positional.push_back(arg(0, "chars", Value(nullptr)));
    return call(*get_method(Value(text_of(v)), "strip"), a);
  }
  if (name == "upper" || name == "lower" || name == "capitalize") {
    CallArgs a;
    return call(*get_method(Value(text_of(v)), name), a);
  }
  if (name == "title") {
    std::string out;
    bool at_start = true;
    for (char32_t c : utf8_decode(text_of(v))) {
      bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_py_space(c);
      if (sep) {
        utf8_append(out, c);
        at_start = true;
      } else {
        auto cp = static_cast<utf8proc_int32_t>(c);
        utf8_append(out, static_cast<char32_t>(at_start ? utf8proc_toupper(cp) : utf8proc_tolower(cp)));
        at_start = false;
      }
    }
    return Value(out);
  }
  if (name == "replace") {
    CallArgs a;
    a.positional = {Value(text_of(arg(0, "old"))), Value(text_of(arg(1, "new")))};
    Value count = arg(2, "count", Value(nullptr));
    if (!count.is_none()) a.positional.push_back(count);
    return call(*get_method(Value(text_of(v)), "replace"), a);
  }
  if (name == "center") {
    CallArgs a;
    a.positional = {arg(0, "width", Value(80))};
    return call(*get_method(Value(text_of(v)), "center"), a);
  }
  if (name == "string" || name == "safe") return Value(text_of(v));
  if (name == "e" || name == "escape" || name == "forceescape") return Value(html_escape(text_of(v)));
  if (name == "wordcount") {
    int64_t n = 0;
    bool in_word = false;
    for (char32_t c : utf8_decode(text_of(v))) {
      auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
      bool w = c == '_' || (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
               (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
      if (w && !in_word) ++n;
      in_word = w;
    }
    return Value(n);
  }
  if (name == "first" || name == "last") {
    if (name == "last" && v.is_generator()) fail("'generator' object is not reversible");
    ValueList items = v.iterate();
    if (items.empty())
      return Value::undefined(std::string("No ") + name + " item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value::list(v.iterate());
  if (name == "reverse") {
    if (v.is_string()) {
      std::u32string cps = utf8_decode(v.str());
      std::reverse(cps.begin(), cps.end());
      return Value(utf8_encode(cps));
    }
    ValueList items = v.iterate();
    std::reverse(items.begin(), items.end());
    // reversed(list) is an iterator; a generator is not reversible and becomes a reversed list
    return v.is_generator() ? Value::list(std::move(items)) : Value::generator(std::move(items));
  }
  if (name == "join") {
    std::string sep = text_of(arg(0, "d", Value("")));
    Value attribute = arg(1, "attribute", Value(nullptr));
    std::string out;
    bool first = true;
    for (const auto& item : v.iterate()) {
      if (!first) out += sep;
      first = false;
      out += text_of(attribute.is_none() ? item : get_path(*this, item, attribute, Value()));
    }
    return Value(out);
  }
  if (name == "int") {
    Value dflt = arg(0, "default", Value(int64_t{0}));
    if (v.is_undefined()) v.fail_undefined();
    int base = static_cast<int>(to_int_arg(arg(1, "base", Value(10)), "base"));
    if (v.is_int()) return v;
    if (v.is_bool()) return Value(v.as_int());
    auto from_double = [](double d) {
      if (!std::isfinite(d)) fail("cannot convert float infinity or NaN to integer");
      if (std::fabs(d) >= 9.2e18) fail("integer overflow: " + float_repr(d) + " does not fit in 64 bits");
      return Value(static_cast<int64_t>(d));
    };
    if (v.is_float()) return from_double(v.as_double());
    if (v.is_string()) {
      if (auto i = parse_int(v.str(), base)) return Value(*i);
      if (auto f = parse_float(v.str())) return from_double(*f);
    }
    return dflt;
  }
  if (name == "float") {
    Value dflt = arg(0, "default", Value(0.0));
    if (v.is_undefined()) v.fail_undefined();
    if (v.is_number()) return Value(v.as_double());
    if (v.is_string())
      if (auto f = parse_float(v.str())) return Value(*f);
    return dflt;
  }
  if (name == "abs") {
    if (v.is_undefined()) v.fail_undefined();
    if (v.is_float()) return Value(std::fabs(v.as_double()));
    if (v.is_number()) return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
    fail("bad operand type for abs(): '" + v.type_name() + "'");
  }
  if (name == "round") {
    int64_t precision = to_int_arg(arg(0, "precision", Value(0)), "precision");
    std::string method = text_of(arg(1, "method", Value("common")));
    if (method != "common" && method != "ceil" && method != "floor")
      fail("method must be common, ceil or floor");
    if (v.is_undefined()) v.fail_undefined();
    if (!v.is_number()) fail("type " + v.type_name() + " doesn't define __round__ method");
    if (method == "common") {
      if (!v.is_float()) return Value(v.as_int());
      return Value(py_round(v.as_double(), precision));
    }
    double p = std::pow(10.0, static_cast<double>(precision));
    double x = v.as_double() * p;
    return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / p);
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::list({});
    if (!v.is_dict()) fail("Can only get item pairs from a mapping.");
    ValueList out;
    for (const auto& [k, val] : v.dict().entries) out.push_back(Value::tuple({k, val}));
    return Value::generator(std::move(out));
  }
  if (name == "dictsort") {
    if (!v.is_dict()) fail("dictsort requires a mapping, got " + v.type_name());
    bool case_sensitive = arg(0, "case_sensitive", Value(false)).truthy();
    std::string by = text_of(arg(1, "by", Value("key")));
    bool reverse = arg(2, "reverse", Value(false)).truthy();
    if (by != "key" && by != "value") fail("You can only sort by either 'key' or 'value'");
    ValueList items;
    std::vector<Value> keys;
    for (const auto& [k, val] : v.dict().entries) {
      items.push_back(Value::tuple({k, val}));
      const Value& key = by == "key" ? k : val;
      keys.push_back(case_sensitive ? key : lower_if_string(key));
    }
    return Value::list(sorted(std::move(items), std::move(keys), reverse));
  }
  if (name == "sort") {
    bool reverse = arg(0, "reverse", Value(false)).truthy();
    bool case_sensitive = arg(1, "case_sensitive", Value(false)).truthy();
    Value attribute = arg(2, "attribute", Value(nullptr));
    ValueList items = v.iterate();
    std::vector<Value> keys;
    for (const auto& item : items) keys.push_back(sort_key(*this, item, attribute, case_sensitive));
    return Value::list(sorted(std::move(items), std::move(keys), reverse));
  }
  if (name == "unique") {
    bool case_sensitive = arg(0, "case_sensitive", Value(false)).truthy();
    Value attribute = arg(1, "attribute", Value(nullptr));
    ValueList out, seen;
    for (const auto& item : v.iterate()) {
      Value key = get_path(*this, item, attribute, Value());
      if (!case_sensitive) key = lower_if_string(key);
      bool dup = false;
      for (const auto& s : seen) dup = dup || values_equal(s, key);
      if (dup) continue;
      seen.push_back(key);
      out.push_back(item);
    }
    return Value::generator(std::move(out));
  }
  if (name == "min" || name == "max") {
    bool case_sensitive = arg(0, "case_sensitive", Value(false)).truthy();
    Value attribute = arg(1, "attribute", Value(nullptr));
    ValueList items = v.iterate();
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    size_t best = 0;
    Value best_key = sort_key(*this, items[0], attribute, case_sensitive);
    for (size_t i = 1; i < items.size(); ++i) {
      Value key = sort_key(*this, items[i], attribute, case_sensitive);
      if (name == "min" ? values_less(key, best_key) : values_less(best_key, key)) {
        best = i;
        best_key = key;
      }
    }
    return items[best];
  }
  if (name == "sum") {
    Value attribute = arg(0, "attribute", Value(nullptr));
    Value total = arg(1, "start", Value(int64_t{0}));
    for (const auto& item : v.iterate())
      total = binary_op("+", total, get_path(*this, item, attribute, Value()));
    return total;
  }
  if (name == "map") {
    ValueList out;
    if (args.positional.empty()) {
      Value attribute, dflt(nullptr);
      for (const auto& [k, val] : args.keyword) {
        if (k == "attribute") attribute = val;
        else if (k == "default") dflt = val;
        else fail("Unexpected keyword argument '" + k + "'");
      }
      if (attribute.is_undefined()) return Value::generator(v.iterate());
      for (const auto& item : v.iterate()) out.push_back(get_path(*this, item, attribute, dflt));
      return Value::generator(std::move(out));
    }
    std::string filter = text_of(args.positional[0]);
    if (!is_known_filter(filter)) fail("No filter named '" + filter + "'.");
    CallArgs rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.keyword = args.keyword;
    for (const auto& item : v.iterate()) {
      CallArgs a = rest;
      out.push_back(apply_filter(filter, item, a));
    }
    return Value::generator(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    bool by_attr = name == "selectattr" || name == "rejectattr";
    bool want = name == "select" || name == "selectattr";
    size_t off = by_attr ? 1 : 0;
    if (by_attr && args.positional.empty()) fail("Missing parameter for attribute name");
    Value attribute = by_attr ? args.positional[0] : Value();
    std::optional<std::string> test;
    CallArgs rest;
    if (args.positional.size() > off) {
      test = text_of(args.positional[off]);
      if (!is_known_test(*test)) fail("No test named '" + *test + "'.");
      rest.positional.assign(args.positional.begin() + static_cast<long>(off) + 1, args.positional.end());
    }
    rest.keyword = args.keyword;
    ValueList out;
    for (const auto& item : v.iterate()) {
      Value x = by_attr ? get_path(*this, item, attribute, Value()) : item;
      bool ok;
      if (test) {
        CallArgs a = rest;
        ok = apply_test(*test, x, a);
      } else {
        ok = x.truthy();
      }
      if (ok == want) out.push_back(item);
    }
    return Value::generator(std::move(out));
  }
  if (name == "batch") {
    int64_t n = to_int_arg(arg(0, "linecount"), "linecount");
    if (n <= 0) fail("batch size must be positive");
    Value fill = arg(1, "fill_with", Value(nullptr));
    ValueList out, tmp;
    for (const auto& item : v.iterate()) {
      if (static_cast<int64_t>(tmp.size()) == n) {
        out.push_back(Value::list(std::move(tmp)));
        tmp.clear();
      }
      tmp.push_back(item);
    }
    if (!tmp.empty()) {
      if (!fill.is_none())
        while (static_cast<int64_t>(tmp.size()) < n) tmp.push_back(fill);
      out.push_back(Value::list(std::move(tmp)));
    }
    return Value::generator(std::move(out));
  }
  if (name == "slice") {
    int64_t slices = to_int_arg(arg(0, "slices"), "slices");
    if (slices <= 0) fail("slices must be positive");
    Value fill = arg(1, "fill_with", Value(nullptr));
    ValueList seq = v.iterate(), out;
    int64_t length = static_cast<int64_t>(seq.size());
    int64_t per = length / slices, extra = length % slices, offset = 0;
    for (int64_t k = 0; k < slices; ++k) {
      int64_t start = offset + k * per;
      if (k < extra) ++offset;
      int64_t end = offset + (k + 1) * per;
      ValueList tmp(seq.begin() + start, seq.begin() + end);
      if (!fill.is_none() && k >= extra) tmp.push_back(fill);
      out.push_back(Value::list(std::move(tmp)));
    }
    return Value::generator(std::move(out));
  }
  if (name == "indent") {
    if (v.is_undefined()) v.fail_undefined();
    if (!v.is_string())
      fail("unsupported operand type(s) for +=: '" + v.type_name() + "' and 'str'");
    Value width = arg(0, "width", Value(4));
    if (!width.is_string()) width = Value(to_int_arg(width, "width"));
    return Value(indent_text(text_of(v), width, arg(1, "first", Value(false)).truthy(),
                             arg(2, "blank", Value(false)).truthy()));
  }
  if (name == "truncate") {
    int64_t length = to_int_arg(arg(0, "length", Value(255)), "length");
    bool killwords = arg(1, "killwords", Value(false)).truthy();
    std::string end = text_of(arg(2, "end", Value("...")));
    Value lw = arg(3, "leeway", Value(nullptr));
    int64_t leeway = lw.is_none() ? 5 : to_int_arg(lw, "leeway");
    if (!v.is_string()) {  // Jinja2 only measures len(); short containers pass through
      int64_t n = v.is_undefined() ? 0
                  : v.is_sequence() ? static_cast<int64_t>(v.items().size())
                  : v.is_dict()     ? static_cast<int64_t>(v.dict().size())
                                    : -1;
      if (n < 0) fail("object of type '" + v.type_name() + "' has no len()");
      if (n <= length + leeway) return v;
      fail("truncate needs a string, got " + v.type_name());
    }
    std::u32string s = utf8_decode(text_of(v)), e = utf8_decode(end);
    if (length < static_cast<int64_t>(e.size())) fail("expected length >= " + std::to_string(e.size()) + ", got " + std::to_string(length));
    if (static_cast<int64_t>(s.size()) <= length + leeway) return Value(text_of(v));
    std::u32string head = s.substr(0, static_cast<size_t>(length) - e.size());
    if (!killwords) {
      size_t sp = head.rfind(U' ');
      if (sp != std::u32string::npos) head = head.substr(0, sp);
    }
    return Value(utf8_encode(head + e));
  }
  if (name == "format") {
    if (!args.positional.empty() && !args.keyword.empty())
      fail("can't handle positional and keyword arguments at the same time");
    if (!args.keyword.empty()) {
      ValueDict d;
      for (const auto& [k, val] : args.keyword) d.set(Value(k), val);
      return Value(percent_format(text_of(v), Value::dict(std::move(d))));
    }
    return Value(percent_format(text_of(v), Value::tuple(args.positional)));
  }
  if (name == "attr") {
    std::string attr = text_of(arg(0, "name"));
    if (v.is_undefined()) v.fail_undefined();
    if (v.is_namespace()) {
      if (const Value* x = v.ns().attrs.find(attr)) return *x;
    } else if (v.is_loop()) {
      return get_attr(v, attr);
    } else if (auto m = get_method(v, attr)) {
      return *m;
    }
    return Value::undefined(object_type_repr(v) + " has no attribute '" + attr + "'");
  }
  fail("filter '" + name + "' is not supported by vela's template engine");
}

bool Interpreter::apply_test(const std::string& name, const Value& v, CallArgs& args) {
  auto arg0 = [&]() { return get_arg(args, 0, "value"); };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable")
    return v.is_undefined() || v.is_string() || v.is_sequence() || v.is_dict() || v.is_generator();
  if (name == "sequence") return v.is_undefined() || v.is_string() || v.is_sequence() || v.is_dict();
  if (name == "callable") return v.is_undefined() || v.is_function() || v.is_loop();
  if (name == "escaped") return false;
  if (name == "lower" || name == "upper") {
    CallArgs a;
    return call(*get_method(Value(text_of(v)), "is" + name), a).truthy();
  }
  if (name == "even" || name == "odd" || name == "divisibleby") {
    Value d = name == "divisibleby" ? get_arg(args, 0, "num") : Value(int64_t{2});
    Value r = binary_op("%", v, d);
    bool zero = !r.truthy();
    return name == "odd" ? !zero : zero;
  }
  if (name == "eq" || name == "equalto" || name == "==") return values_equal(v, arg0());
  if (name == "ne" || name == "!=") return !values_equal(v, arg0());
  if (name == "lt" || name == "lessthan" || name == "<") return values_less(v, arg0(), "<");
  if (name == "gt" || name == "greaterthan" || name == ">") return values_less(arg0(), v, ">");
  if (name == "le" || name == "<=") return !values_less(arg0(), v, "<=");
  if (name == "ge" || name == ">=") return !values_less(v, arg0(), ">=");
  if (name == "in") return contains(get_arg(args, 0, "seq"), v);
  if (name == "sameas") {
    Value other = arg0();
    if (v.kind() != other.kind()) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.is_bool() || v.is_int() || v.is_float() || v.is_string()) return values_equal(v, other);
    return v.same_object(other);
  }
  if (name == "filter") return is_known_filter(text_of(v));
  if (name == "test") return is_known_test(text_of(v));
  fail("No test named '" + name + "'.");
}

}  // namespace vela::jinja
