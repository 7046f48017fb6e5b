// Built-in methods of template values (str.strip / split / startswith ..., dict.get / items ...,
// list.index ..., loop.cycle / changed) and the global functions of transformers' environment
// (range, namespace, dict, joiner, raise_exception, strftime_now). Methods that would mutate a
// list or dict are refused like ImmutableSandboxedEnvironment does.
#include <utf8proc.h>

#include <algorithm>
#include <cstring>

#include "tokenizer/jinja_interpreter.h"

namespace vela::jinja {
namespace {

using NativeFn = std::function<Value(Interpreter&, CallArgs&)>;

class NativeFunction : public Function {
 public:
  NativeFunction(std::string name, NativeFn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  Value call(Interpreter& in, CallArgs& args) const override { return fn_(in, args); }
  std::string repr() const override { return "<built-in function " + name_ + ">"; }

 private:
  std::string name_;
  NativeFn fn_;
};

Value native(std::string name, NativeFn fn) {
  return Value::function(std::make_shared<NativeFunction>(std::move(name), std::move(fn)));
}

std::string need_str(const Value& v, const char* what) {
  if (v.is_undefined()) v.fail_undefined();
  if (!v.is_string()) fail(std::string(what) + " arg must be str, not " + v.type_name());
  return v.str();
}

int64_t need_int(const Value& v, const char* what) {
  if (v.is_undefined()) v.fail_undefined();
  if (!v.is_int() && !v.is_bool())
    fail(std::string("'") + v.type_name() + "' object cannot be interpreted as an integer (" +
         what + ")");
  return v.as_int();
}

bool is_cased_upper(char32_t c) {
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT;
}
bool is_cased_lower(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c)) == UTF8PROC_CATEGORY_LL;
}
char32_t to_upper(char32_t c) {
  return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c)));
}
char32_t to_lower(char32_t c) {
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}
bool is_alpha(char32_t c) {
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
}
bool is_decimal(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c)) == UTF8PROC_CATEGORY_ND;
}
bool is_numeric(char32_t c) {
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

template <typename F>
std::string map_chars(const std::string& s, F f) {
  std::string out;
  for (char32_t c : utf8_decode(s)) utf8_append(out, f(c));
  return out;
}

// Python str.split / rsplit. sep null: runs of whitespace.
ValueList split(const std::string& s, const Value& sep_v, int64_t maxsplit, bool from_right) {
  ValueList parts;
  if (sep_v.is_none() || sep_v.is_undefined()) {
    std::u32string cps = utf8_decode(s);
    std::vector<std::u32string> words;
    if (!from_right) {
      size_t i = 0, n = cps.size();
      while (i < n) {
        while (i < n && is_py_space(cps[i])) ++i;
        if (i >= n) break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) >= maxsplit) {
          size_t end = n;
          while (end > i && is_py_space(cps[end - 1])) --end;
          words.push_back(cps.substr(i, end - i));
          break;
        }
        size_t j = i;
        while (j < n && !is_py_space(cps[j])) ++j;
        words.push_back(cps.substr(i, j - i));
        i = j;
      }
    } else {
      size_t i = cps.size();
      while (i > 0) {
        while (i > 0 && is_py_space(cps[i - 1])) --i;
        if (i == 0) break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) >= maxsplit) {
          size_t b = 0;
          while (b < i && is_py_space(cps[b])) ++b;
          words.push_back(cps.substr(b, i - b));
          break;
        }
        size_t j = i;
        while (j > 0 && !is_py_space(cps[j - 1])) --j;
        words.push_back(cps.substr(j, i - j));
        i = j;
      }
      std::reverse(words.begin(), words.end());
    }
    for (auto& w : words) parts.emplace_back(utf8_encode(w));
    return parts;
  }
  std::string sep = need_str(sep_v, "split()");
  if (sep.empty()) fail("empty separator");
  std::vector<std::string> pieces;
  if (!from_right) {
    size_t start = 0;
    for (;;) {
      size_t p = s.find(sep, start);
      if (p == std::string::npos ||
          (maxsplit >= 0 && static_cast<int64_t>(pieces.size()) >= maxsplit)) {
        pieces.push_back(s.substr(start));
        break;
      }
      pieces.push_back(s.substr(start, p - start));
      start = p + sep.size();
    }
  } else {
    size_t end = s.size();
    for (;;) {
      size_t p = end >= sep.size() ? s.rfind(sep, end - sep.size()) : std::string::npos;
      if (p == std::string::npos ||
          (maxsplit >= 0 && static_cast<int64_t>(pieces.size()) >= maxsplit)) {
        pieces.push_back(s.substr(0, end));
        break;
      }
      pieces.push_back(s.substr(p + sep.size(), end - p - sep.size()));
      end = p;
    }
    std::reverse(pieces.begin(), pieces.end());
  }
  for (auto& p : pieces) parts.emplace_back(std::move(p));
  return parts;
}

bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
         c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
}

// Resolves Python's (start, end) code point bounds over a string; returns the substring.
std::u32string sub_range(const std::u32string& cps, const CallArgs& args, size_t first) {
  int64_t n = static_cast<int64_t>(cps.size());
  auto bound = [&](size_t i, int64_t dflt) {
    Value v = get_arg(args, i, "", Value(nullptr));
    if (v.is_none()) return dflt;
    int64_t x = need_int(v, "slice");
    if (x < 0) x = std::max<int64_t>(0, x + n);
    return std::min(x, n);
  };
  int64_t b = bound(first, 0), e = bound(first + 1, n);
  if (e < b) return U"";
  return cps.substr(static_cast<size_t>(b), static_cast<size_t>(e - b));
}

Value unsafe(const Value& obj, const std::string& name) {
  return Value::undefined("access to attribute '" + name + "' of '" + obj.type_name() +
                          "' object is unsafe.");
}

std::optional<Value> str_method(const Value& self, const std::string& name) {
  const std::string s = self.str();
  auto m = [&](NativeFn fn) { return std::optional<Value>(native(name, std::move(fn))); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return m([s, name](Interpreter&, CallArgs& a) {
      Value chars = get_arg(a, 0, "chars", Value(nullptr));
      std::u32string cps = utf8_decode(s), set;
      bool ws = chars.is_none();
      if (!ws) set = utf8_decode(need_str(chars, "strip()"));
      auto strip_it = [&](char32_t c) { return ws ? is_py_space(c) : set.find(c) != std::u32string::npos; };
      size_t b = 0, e = cps.size();
      if (name != "rstrip") while (b < e && strip_it(cps[b])) ++b;
      if (name != "lstrip") while (e > b && strip_it(cps[e - 1])) --e;
      return Value(utf8_encode(cps.substr(b, e - b)));
    });
  }
  if (name == "split" || name == "rsplit") {
    return m([s, name](Interpreter&, CallArgs& a) {
      int64_t maxsplit = need_int(get_arg(a, 1, "maxsplit", Value(-1)), "maxsplit");
      return Value::list(split(s, get_arg(a, 0, "sep", Value(nullptr)), maxsplit, name == "rsplit"));
    });
  }
  if (name == "splitlines") {
    return m([s](Interpreter&, CallArgs& a) {
      bool keep = get_arg(a, 0, "keepends", Value(false)).truthy();
      std::u32string cps = utf8_decode(s);
      ValueList lines;
      size_t i = 0, n = cps.size();
      while (i < n) {
        size_t j = i;
        while (j < n && !is_line_break(cps[j])) ++j;
        size_t eol = j;
        if (j < n) eol = (cps[j] == '\r' && j + 1 < n && cps[j + 1] == '\n') ? j + 2 : j + 1;
        lines.emplace_back(utf8_encode(cps.substr(i, (keep ? eol : j) - i)));
        i = eol;
      }
      return Value::list(std::move(lines));
    });
  }
  if (name == "startswith" || name == "endswith") {
    return m([s, name](Interpreter&, CallArgs& a) {
      Value arg = get_arg(a, 0, "prefix");
      ValueList options = arg.is_tuple() ? arg.items() : ValueList{arg};
      std::u32string cps = sub_range(utf8_decode(s), a, 1);
      for (const auto& o : options) {
        if (!o.is_string())
          fail(name + " first arg must be str or a tuple of str, not " + o.type_name());
        std::u32string p = utf8_decode(o.str());
        if (p.size() > cps.size()) continue;
        if (name == "startswith" ? cps.compare(0, p.size(), p) == 0
                                 : cps.compare(cps.size() - p.size(), p.size(), p) == 0)
          return Value(true);
      }
      return Value(false);
    });
  }
  if (name == "upper") return m([s](Interpreter&, CallArgs&) { return Value(map_chars(s, to_upper)); });
  if (name == "lower" || name == "casefold")
    return m([s](Interpreter&, CallArgs&) { return Value(map_chars(s, to_lower)); });
  if (name == "swapcase") {
    return m([s](Interpreter&, CallArgs&) {
      return Value(map_chars(s, [](char32_t c) {
        return is_cased_upper(c) ? to_lower(c) : is_cased_lower(c) ? to_upper(c) : c;
      }));
    });
  }
  if (name == "title" || name == "capitalize") {
    return m([s, name](Interpreter&, CallArgs&) {
      std::string out;
      bool prev_cased = false, first = true;
      for (char32_t c : utf8_decode(s)) {
        bool upper = name == "title" ? !prev_cased : first;
        utf8_append(out, upper ? static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c)))
                               : to_lower(c));
        prev_cased = is_cased_upper(c) || is_cased_lower(c);
        first = false;
      }
      return Value(out);
    });
  }
  if (name == "replace") {
    return m([s](Interpreter&, CallArgs& a) {
      std::string from = need_str(get_arg(a, 0, "old"), "replace()");
      std::string to = need_str(get_arg(a, 1, "new"), "replace()");
      int64_t count = need_int(get_arg(a, 2, "count", Value(-1)), "count");
      std::string out;
      if (from.empty()) {
        std::u32string cps = utf8_decode(s);
        int64_t done = 0;
        for (size_t i = 0; i <= cps.size(); ++i) {
          if (count < 0 || done < count) {
            out += to;
            ++done;
          }
          if (i < cps.size()) utf8_append(out, cps[i]);
        }
        return Value(out);
      }
      size_t start = 0;
      for (int64_t done = 0; count < 0 || done < count; ++done) {
        size_t p = s.find(from, start);
        if (p == std::string::npos) break;
        out += s.substr(start, p - start) + to;
        start = p + from.size();
      }
      return Value(out + s.substr(start));
    });
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    return m([s, name](Interpreter&, CallArgs& a) {
      std::u32string sub = utf8_decode(need_str(get_arg(a, 0, "sub"), name.c_str()));
      std::u32string all = utf8_decode(s);
      int64_t n = static_cast<int64_t>(all.size());
      Value sv = get_arg(a, 1, "", Value(nullptr));
      int64_t offset = sv.is_none() ? 0 : need_int(sv, "start");
      if (offset < 0) offset = std::max<int64_t>(0, offset + n);
      offset = std::min(offset, n);
      std::u32string hay = sub_range(all, a, 1);
      if (name == "count") {
        if (sub.empty()) return Value(static_cast<int64_t>(hay.size() + 1));
        int64_t c = 0;
        for (size_t p = hay.find(sub); p != std::u32string::npos; p = hay.find(sub, p + sub.size())) ++c;
        return Value(c);
      }
      size_t p = name[0] == 'r' ? hay.rfind(sub) : hay.find(sub);
      if (p == std::u32string::npos) {
        if (name == "index" || name == "rindex") fail("substring not found");
        return Value(int64_t{-1});
      }
      return Value(static_cast<int64_t>(p) + offset);
    });
  }
  if (name == "join") {
    return m([s](Interpreter&, CallArgs& a) {
      std::string out;
      ValueList items = get_arg(a, 0, "iterable").iterate();
      for (size_t i = 0; i < items.size(); ++i) {
        if (!items[i].is_string())
          fail("sequence item " + std::to_string(i) + ": expected str instance, " +
               items[i].type_name() + " found");
        if (i) out += s;
        out += items[i].str();
      }
      return Value(out);
    });
  }
  if (name == "format") return m([s](Interpreter&, CallArgs& a) { return Value(str_format(s, a)); });
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal" || name == "isalpha" ||
      name == "isalnum" || name == "isspace" || name == "isupper" || name == "islower") {
    return m([s, name](Interpreter&, CallArgs&) {
      std::u32string cps = utf8_decode(s);
      if (cps.empty()) return Value(false);
      if (name == "isupper" || name == "islower") {
        bool any = false;
        for (char32_t c : cps) {
          if (is_cased_upper(c)) {
            if (name == "islower") return Value(false);
            any = true;
          } else if (is_cased_lower(c)) {
            if (name == "isupper") return Value(false);
            any = true;
          }
        }
        return Value(any);
      }
      for (char32_t c : cps) {
        bool ok = name == "isdigit" || name == "isdecimal" ? is_decimal(c)
                  : name == "isnumeric"                    ? is_numeric(c)
                  : name == "isalpha"                      ? is_alpha(c)
                  : name == "isalnum"                      ? is_alpha(c) || is_numeric(c)
                                                           : is_py_space(c);
        if (!ok) return Value(false);
      }
      return Value(true);
    });
  }
  if (name == "center" || name == "ljust" || name == "rjust" || name == "zfill") {
    return m([s, name](Interpreter&, CallArgs& a) {
      int64_t width = need_int(get_arg(a, 0, "width"), "width");
      std::u32string cps = utf8_decode(s);
      std::u32string fill = name == "zfill" ? U"0" : utf8_decode(need_str(get_arg(a, 1, "fillchar", Value(" ")), name.c_str()));
      if (fill.size() != 1) fail("The fill character must be exactly one character long");
      int64_t pad = width - static_cast<int64_t>(cps.size());
      if (pad <= 0) return Value(s);
      auto rep = [&](int64_t k) { return std::u32string(static_cast<size_t>(k), fill[0]); };
      if (name == "ljust") return Value(utf8_encode(cps + rep(pad)));
      if (name == "rjust") return Value(utf8_encode(rep(pad) + cps));
      if (name == "zfill") {
        size_t sign = !cps.empty() && (cps[0] == '-' || cps[0] == '+') ? 1 : 0;
        return Value(utf8_encode(cps.substr(0, sign) + rep(pad) + cps.substr(sign)));
      }
      int64_t left = pad / 2 + (pad & width & 1);  // CPython's centering rule
      return Value(utf8_encode(rep(left) + cps + rep(pad - left)));
    });
  }
  if (name == "removeprefix" || name == "removesuffix") {
    return m([s, name](Interpreter&, CallArgs& a) {
      std::string x = need_str(get_arg(a, 0, "prefix"), name.c_str());
      if (name == "removeprefix" && s.rfind(x, 0) == 0) return Value(s.substr(x.size()));
      if (name == "removesuffix" && !x.empty() && s.size() >= x.size() &&
          s.compare(s.size() - x.size(), x.size(), x) == 0)
        return Value(s.substr(0, s.size() - x.size()));
      return Value(s);
    });
  }
  if (name == "partition" || name == "rpartition") {
    return m([s, name](Interpreter&, CallArgs& a) {
      std::string sep = need_str(get_arg(a, 0, "sep"), name.c_str());
      if (sep.empty()) fail("empty separator");
      size_t p = name == "partition" ? s.find(sep) : s.rfind(sep);
      if (p == std::string::npos) {
        return name == "partition" ? Value::tuple({Value(s), Value(""), Value("")})
                                   : Value::tuple({Value(""), Value(""), Value(s)});
      }
      return Value::tuple({Value(s.substr(0, p)), Value(sep), Value(s.substr(p + sep.size()))});
    });
  }
  return std::nullopt;
}

std::optional<Value> dict_method(const Value& self, const std::string& name) {
  auto m = [&](NativeFn fn) { return std::optional<Value>(native(name, std::move(fn))); };
  if (name == "get") {
    return m([self](Interpreter&, CallArgs& a) {
      const Value* v = self.dict().find(get_arg(a, 0, "key"));
      return v ? *v : get_arg(a, 1, "default", Value(nullptr));
    });
  }
  if (name == "items" || name == "keys" || name == "values") {
    return m([self, name](Interpreter&, CallArgs&) {
      ValueList out;
      for (const auto& [k, v] : self.dict().entries) {
        if (name == "items") out.push_back(Value::tuple({k, v}));
        else out.push_back(name == "keys" ? k : v);
      }
      return Value::list(std::move(out));
    });
  }
  if (name == "copy") return m([self](Interpreter&, CallArgs&) { return self; });
  if (name == "pop" || name == "popitem" || name == "setdefault" || name == "update" ||
      name == "clear")
    return unsafe(self, name);
  return std::nullopt;
}

std::optional<Value> list_method(const Value& self, const std::string& name) {
  auto m = [&](NativeFn fn) { return std::optional<Value>(native(name, std::move(fn))); };
  if (name == "index" || name == "count") {
    return m([self, name](Interpreter&, CallArgs& a) {
      Value x = get_arg(a, 0, "value");
      int64_t count = 0;
      const auto& xs = self.items();
      for (size_t i = 0; i < xs.size(); ++i) {
        if (!values_equal(xs[i], x)) continue;
        if (name == "index") return Value(static_cast<int64_t>(i));
        ++count;
      }
      if (name == "index") fail(x.repr() + " is not in list");
      return Value(count);
    });
  }
  if (name == "copy" && self.is_list()) return m([self](Interpreter&, CallArgs&) { return self; });
  if (self.is_list() && (name == "append" || name == "extend" || name == "insert" ||
                         name == "pop" || name == "remove" || name == "reverse" ||
                         name == "sort" || name == "clear"))
    return unsafe(self, name);
  return std::nullopt;
}

std::optional<Value> loop_method(const Value& self, const std::string& name) {
  auto m = [&](NativeFn fn) { return std::optional<Value>(native(name, std::move(fn))); };
  if (name == "cycle") {
    return m([self](Interpreter&, CallArgs& a) {
      if (a.positional.empty()) fail("no items for cycling given");
      return a.positional[self.loop_state().index0 % a.positional.size()];
    });
  }
  if (name == "changed") {
    return m([self](Interpreter&, CallArgs& a) {
      LoopState& st = self.loop_state();
      Value now = Value::tuple(a.positional);
      if (st.changed_called && values_equal(st.last_changed, now)) return Value(false);
      st.changed_called = true;
      st.last_changed = now;
      return Value(true);
    });
  }
  return std::nullopt;
}

}  // namespace

std::optional<Value> get_method(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::kString: return str_method(obj, name);
    case Value::Kind::kDict: return dict_method(obj, name);
    case Value::Kind::kList: case Value::Kind::kTuple: return list_method(obj, name);
    case Value::Kind::kLoop: return loop_method(obj, name);
    default: return std::nullopt;
  }
}

std::tm system_local_time() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  return tm;
}

std::string strftime_format(const std::string& fmt, const std::tm& tm) {
  if (fmt.empty()) return "";
  std::vector<char> buf(fmt.size() * 8 + 64);
  for (int attempt = 0; attempt < 6; ++attempt) {
    size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
    if (n > 0) return std::string(buf.data(), n);
    buf.resize(buf.size() * 4);
  }
  return "";
}

const std::vector<std::pair<std::string, Value>>& builtin_globals() {
  static const std::vector<std::pair<std::string, Value>> globals = [] {
    std::vector<std::pair<std::string, Value>> g;
    g.emplace_back("range", native("range", [](Interpreter&, CallArgs& a) {
      if (!a.keyword.empty()) fail("range() takes no keyword arguments");
      if (a.positional.empty() || a.positional.size() > 3)
        fail("range expected at most 3 arguments, got " + std::to_string(a.positional.size()));
      int64_t start = 0, stop, step = 1;
      if (a.positional.size() == 1) {
        stop = need_int(a.positional[0], "range");
      } else {
        start = need_int(a.positional[0], "range");
        stop = need_int(a.positional[1], "range");
        if (a.positional.size() == 3) step = need_int(a.positional[2], "range");
      }
      if (step == 0) fail("range() arg 3 must not be zero");
      int64_t n = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                           : (start > stop ? (start - stop - step - 1) / (-step) : 0);
      if (n > 100000)
        fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
      ValueList out;
      for (int64_t i = 0; i < n; ++i) out.emplace_back(start + i * step);
      return Value::list(std::move(out));
    }));
    g.emplace_back("namespace", native("namespace", [](Interpreter&, CallArgs& a) {
      Value ns = Value::new_namespace();
      for (const auto& p : a.positional) {
        if (!p.is_dict()) fail("namespace() positional argument must be a mapping");
        for (const auto& [k, v] : p.dict().entries) ns.ns().attrs.set(k, v);
      }
      for (const auto& [k, v] : a.keyword) ns.ns().attrs.set(Value(k), v);
      return ns;
    }));
    g.emplace_back("dict", native("dict", [](Interpreter&, CallArgs& a) {
      ValueDict d;
      if (a.positional.size() > 1) fail("dict expected at most 1 argument");
      if (!a.positional.empty()) {
        const Value& src = a.positional[0];
        if (src.is_dict()) {
          d = src.dict();
        } else {
          for (const auto& pair : src.iterate()) {
            ValueList kv = pair.iterate();
            if (kv.size() != 2) fail("dictionary update sequence element has wrong length");
            d.set(kv[0], kv[1]);
          }
        }
      }
      for (const auto& [k, v] : a.keyword) d.set(Value(k), v);
      return Value::dict(std::move(d));
    }));
    g.emplace_back("raise_exception", native("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
      fail(get_arg(a, 0, "message").to_str());
    }));
    g.emplace_back("strftime_now", native("strftime_now", [](Interpreter& in, CallArgs& a) {
      return Value(strftime_format(need_str(get_arg(a, 0, "format"), "strftime_now()"), in.clock()()));
    }));
    g.emplace_back("joiner", native("joiner", [](Interpreter&, CallArgs& a) {
      std::string sep = get_arg(a, 0, "sep", Value(", ")).to_str();
      auto used = std::make_shared<bool>(false);
      return native("joiner", [sep, used](Interpreter&, CallArgs&) {
        if (!*used) {
          *used = true;
          return Value("");
        }
        return Value(sep);
      });
    }));
    return g;
  }();
  return globals;
}

}  // namespace vela::jinja
