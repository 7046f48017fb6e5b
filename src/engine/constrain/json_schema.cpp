// JSON Schema -> Grammar. Each schema node becomes an Expr; $ref targets become rules (created
// before their body, so recursive schemas work); terminal pieces (strings, numbers) stay inline so
// the automaton matches them without stack operations.
#include "engine/constrain/json_schema.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/constrain/regex.h"

namespace vela::constrain {
namespace {

Expr lit(const std::string& s) { return Expr::literal(s); }
Expr digits(int32_t lo, int32_t hi) {
  ByteSet d;
  for (int c = '0'; c <= '9'; ++c) d.set(static_cast<size_t>(c));
  return Expr::repeat(Expr::byte_set(d), lo, hi);
}
Expr digit_range(char lo, char hi) {
  ByteSet d;
  for (int c = lo; c <= hi; ++c) d.set(static_cast<size_t>(c));
  return Expr::byte_set(d);
}

// Decimal integers in [a, b], 0 <= a <= b, without leading zeros.
Expr uint_range(int64_t a, int64_t b) {
  std::vector<Expr> alts;
  std::string sa = std::to_string(a), sb = std::to_string(b);
  if (sa.size() != sb.size()) {
    int64_t top = 1;
    for (size_t k = 0; k < sa.size(); ++k) top *= 10;
    alts.push_back(uint_range(a, top - 1));
    alts.push_back(uint_range(top, b));
    return Expr::alt(std::move(alts));
  }
  // Same length: recursive split on the first digit.
  struct Rec {
    static Expr go(const std::string& x, const std::string& y) {
      if (x.size() == 1) return digit_range(x[0], y[0]);
      // 0...0 to 9...9: every digit string (keeps the split linear in the digit count).
      if (x.find_first_not_of('0') == std::string::npos &&
          y.find_first_not_of('9') == std::string::npos)
        return digits(static_cast<int32_t>(x.size()), static_cast<int32_t>(x.size()));
      const std::string xr = x.substr(1), yr = y.substr(1);
      if (x[0] == y[0]) return Expr::seq({digit_range(x[0], x[0]), go(xr, yr)});
      std::vector<Expr> alts;
      const std::string nines(xr.size(), '9'), zeros(xr.size(), '0');
      alts.push_back(Expr::seq({digit_range(x[0], x[0]), go(xr, nines)}));
      if (y[0] - x[0] > 1)
        alts.push_back(
            Expr::seq({digit_range(static_cast<char>(x[0] + 1), static_cast<char>(y[0] - 1)),
                       digits(static_cast<int32_t>(xr.size()), static_cast<int32_t>(xr.size()))}));
      alts.push_back(Expr::seq({digit_range(y[0], y[0]), go(zeros, yr)}));
      return Expr::alt(std::move(alts));
    }
  };
  return Rec::go(sa, sb);
}

constexpr int64_t kMaxInt = 9999999999999999;  // 16 digits

Expr int_range(int64_t lo, int64_t hi) {
  std::vector<Expr> alts;
  if (lo < 0) {
    int64_t nlo = hi < 0 ? -hi : 1, nhi = -lo;
    alts.push_back(Expr::seq({lit("-"), uint_range(nlo, nhi)}));
  }
  if (hi >= 0) alts.push_back(uint_range(std::max<int64_t>(lo, 0), hi));
  return Expr::alt(std::move(alts));
}

class SchemaCompiler {
 public:
  SchemaCompiler(Grammar& g, const json& root, const JsonGrammarOptions& opt)
      : root_(root), opt_(opt), g_(g) {
    ByteSet w;
    for (char c : {' ', '\t', '\n', '\r'}) w.set(static_cast<uint8_t>(c));
    ws_ = opt.max_whitespace > 0 ? Expr::repeat(Expr::byte_set(w), 0, opt.max_whitespace)
                                 : Expr::empty();
  }

  // The schema as a rule of g_ (its id).
  int32_t run() {
    int32_t root = g_.add_rule("schema", Expr::empty());
    g_.bodies[static_cast<size_t>(root)] = schema(root_, "#", 0);
    return root;
  }
  int32_t run_object() { return g_.add_rule("object", generic_object()); }

 private:
  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    VELA_THROW(InvalidArgument, "json_schema: ", what, " at ", path);
  }

  Expr string_char() {
    // Any scalar value but " \ and controls, or an escape.
    Expr plain = utf8_class({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}, true);
    ByteSet esc;
    for (char c : {'"', '\\', '/', 'b', 'f', 'n', 'r', 't'}) esc.set(static_cast<uint8_t>(c));
    ByteSet hex;
    for (const char* r : {"09", "af", "AF"})
      for (int c = r[0]; c <= r[1]; ++c) hex.set(static_cast<size_t>(c));
    // \uXXXX outside the surrogates (a pair would count as two characters here, one for a
    // validator; a lone one is not a character at all).
    ByteSet first_plain = hex, d_second;
    first_plain.reset('d'), first_plain.reset('D');
    for (char c = '0'; c <= '7'; ++c) d_second.set(static_cast<uint8_t>(c));
    ByteSet d;
    d.set('d'), d.set('D');
    Expr hex4 = Expr::alt(
        {Expr::seq({Expr::byte_set(first_plain), Expr::repeat(Expr::byte_set(hex), 3, 3)}),
         Expr::seq({Expr::byte_set(d), Expr::byte_set(d_second),
                    Expr::repeat(Expr::byte_set(hex), 2, 2)})});
    Expr u = Expr::seq({lit("u"), std::move(hex4)});
    return Expr::alt({plain, Expr::seq({lit("\\"), Expr::alt({Expr::byte_set(esc), u})})});
  }
  Expr string_body(int32_t min_len, int32_t max_len) {
    return Expr::seq({lit("\""), Expr::repeat(string_char(), min_len, max_len), lit("\"")});
  }
  Expr number() {
    Expr intpart = Expr::alt({lit("0"), Expr::seq({digit_range('1', '9'), digits(0, 15)})});
    ByteSet e, sign;
    e.set('e'), e.set('E'), sign.set('+'), sign.set('-');
    return Expr::seq(
        {Expr::optional(lit("-")), intpart, Expr::optional(Expr::seq({lit("."), digits(1, 16)})),
         Expr::optional(
             Expr::seq({Expr::byte_set(e), Expr::optional(Expr::byte_set(sign)), digits(1, 2)}))});
  }
  Expr integer() {
    return Expr::seq({Expr::optional(lit("-")),
                      Expr::alt({lit("0"), Expr::seq({digit_range('1', '9'), digits(0, 15)})})});
  }

  // Generic JSON value / object / array as rules (they recurse).
  int32_t value_rule() {
    if (value_rule_ >= 0) return value_rule_;
    value_rule_ = g_.add_rule("json-value", Expr::empty());
    int32_t obj = g_.add_rule("json-object", Expr::empty());
    int32_t arr = g_.add_rule("json-array", Expr::empty());
    object_rule_ = obj;
    g_.bodies[static_cast<size_t>(value_rule_)] =
        Expr::alt({Expr::ref(obj), Expr::ref(arr), string_body(0, -1), number(), lit("true"),
                   lit("false"), lit("null")});
    Expr member = Expr::seq({string_body(0, -1), ws_, lit(":"), ws_, Expr::ref(value_rule_)});
    g_.bodies[static_cast<size_t>(obj)] =
        Expr::seq({lit("{"), ws_,
                   Expr::optional(Expr::seq(
                       {member, ws_, Expr::star(Expr::seq({lit(","), ws_, member, ws_}))})),
                   lit("}")});
    Expr item = Expr::ref(value_rule_);
    g_.bodies[static_cast<size_t>(arr)] = Expr::seq(
        {lit("["), ws_,
         Expr::optional(Expr::seq({item, ws_, Expr::star(Expr::seq({lit(","), ws_, item, ws_}))})),
         lit("]")});
    return value_rule_;
  }
  Expr generic_value() { return Expr::ref(value_rule()); }
  Expr generic_object() {
    value_rule();
    return Expr::ref(object_rule_);
  }

  const json& resolve(const std::string& ref, const std::string& path) const {
    if (ref.empty() || ref[0] != '#')
      fail(path, "only local $ref ('#...') is supported, got '" + ref + "'");
    if (ref == "#") return root_;
    if (ref.size() < 2 || ref[1] != '/') fail(path, "bad $ref '" + ref + "'");
    try {
      return root_.at(json::json_pointer(ref.substr(1)));
    } catch (const std::exception&) {
      fail(path, "$ref '" + ref + "' does not resolve");
    }
  }

  Expr ref_expr(const std::string& ref, const std::string& path, int depth) {
    auto it = refs_.find(ref);
    if (it != refs_.end()) return Expr::ref(it->second);
    const json& target = resolve(ref, path);
    int32_t id = g_.add_rule("ref" + ref, Expr::empty());
    refs_[ref] = id;
    g_.bodies[static_cast<size_t>(id)] = schema(target, ref, depth + 1);
    return Expr::ref(id);
  }

  Expr schema(const json& s, const std::string& path, int depth) {
    if (depth > kMaxNestingDepth) fail(path, "schema nests too deeply");
    if (s.is_boolean()) {
      if (s.get<bool>()) return generic_value();
      fail(path, "the schema 'false' accepts nothing");
    }
    if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
    static const std::set<std::string> kIgnored = {
        "title",           "description",   "default",    "examples", "$comment",
        "$schema",         "$id",           "deprecated", "readOnly", "writeOnly",
        "$defs",           "definitions",   "strict",     "name",     "contentMediaType",
        "contentEncoding", "discriminator", "x-"};
    static const std::set<std::string> kKnown = {"type",
                                                 "properties",
                                                 "required",
                                                 "additionalProperties",
                                                 "enum",
                                                 "const",
                                                 "anyOf",
                                                 "oneOf",
                                                 "allOf",
                                                 "items",
                                                 "prefixItems",
                                                 "minItems",
                                                 "maxItems",
                                                 "minLength",
                                                 "maxLength",
                                                 "pattern",
                                                 "format",
                                                 "minimum",
                                                 "maximum",
                                                 "exclusiveMinimum",
                                                 "exclusiveMaximum",
                                                 "nullable",
                                                 "$ref"};
    for (const auto& [k, v] : s.items()) {
      if (kKnown.count(k) || kIgnored.count(k) || k.rfind("x-", 0) == 0) continue;
      fail(path, "unsupported keyword '" + k + "'");
    }
    if (s.contains("uniqueItems") && s["uniqueItems"] == true)
      fail(path, "unsupported keyword 'uniqueItems'");
    Expr e = schema_inner(s, path, depth);
    if (s.value("nullable", false)) return Expr::alt({std::move(e), lit("null")});
    return e;
  }

  Expr schema_inner(const json& s, const std::string& path, int depth) {
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) fail(path, "$ref must be a string");
      return ref_expr(s["$ref"].get<std::string>(), path, depth);
    }
    if (s.contains("const")) return lit(s["const"].dump());
    if (s.contains("enum")) {
      const json& en = s["enum"];
      if (!en.is_array() || en.empty()) fail(path, "enum must be a non-empty array");
      std::vector<Expr> alts;
      for (const json& v : en) alts.push_back(lit(v.dump()));
      return Expr::alt(std::move(alts));
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      const json& list = s[key];
      if (!list.is_array() || list.empty())
        fail(path, std::string(key) + " must be a non-empty array");
      std::vector<Expr> alts;
      for (size_t i = 0; i < list.size(); ++i) {
        // Sibling keywords (e.g. a shared "type") apply to each branch.
        json branch = list[i];
        if (branch.is_object())
          for (const auto& [k, v] : s.items())
            if (k != key && k != "$defs" && k != "definitions" && !branch.contains(k))
              branch[k] = v;
        alts.push_back(schema(branch, path + "/" + key + "/" + std::to_string(i), depth + 1));
      }
      return Expr::alt(std::move(alts));
    }
    if (s.contains("allOf")) {
      const json& list = s["allOf"];
      if (!list.is_array() || list.size() != 1)
        fail(path, "allOf is supported with exactly one schema");
      return schema(list[0], path + "/allOf/0", depth + 1);
    }
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_array()) {
        std::vector<Expr> alts;
        for (const json& one : t) {
          if (!one.is_string()) fail(path, "type entries must be strings");
          alts.push_back(typed(one.get<std::string>(), s, path, depth));
        }
        if (alts.empty()) fail(path, "type must not be an empty list");
        return Expr::alt(std::move(alts));
      }
      if (!t.is_string()) fail(path, "type must be a string or a list of strings");
      return typed(t.get<std::string>(), s, path, depth);
    }
    if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties"))
      return typed("object", s, path, depth);
    if (s.contains("items") || s.contains("prefixItems")) return typed("array", s, path, depth);
    return generic_value();
  }

  Expr typed(const std::string& t, const json& s, const std::string& path, int depth) {
    if (t == "string") return string_schema(s, path);
    if (t == "integer") return integer_schema(s, path);
    if (t == "number") return number_schema(s, path);
    if (t == "boolean") return Expr::alt({lit("true"), lit("false")});
    if (t == "null") return lit("null");
    if (t == "object") return object_schema(s, path, depth);
    if (t == "array") return array_schema(s, path, depth);
    fail(path, "unknown type '" + t + "'");
  }

  static int32_t get_count(const json& s, const char* key, int32_t dflt, const std::string& path,
                           const SchemaCompiler* self) {
    if (!s.contains(key)) return dflt;
    const json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxRepeat)
      self->fail(path,
                 std::string(key) + " must be an integer in 0.." + std::to_string(kMaxRepeat));
    return static_cast<int32_t>(v.get<int64_t>());
  }

  Expr string_schema(const json& s, const std::string& path) {
    const int32_t lo = get_count(s, "minLength", 0, path, this);
    const int32_t hi = get_count(s, "maxLength", -1, path, this);
    if (hi >= 0 && hi < lo) fail(path, "maxLength is below minLength");
    if (s.contains("pattern")) {
      if (s.contains("minLength") || s.contains("maxLength"))
        fail(path, "pattern together with minLength/maxLength is not supported");
      std::string pat = s["pattern"].get<std::string>();
      RegexOptions ro;
      ro.json_string = true;
      Expr any = Expr::star(string_char());
      bool start = !pat.empty() && pat[0] == '^';
      bool end =
          !pat.empty() && pat.back() == '$' && (pat.size() < 2 || pat[pat.size() - 2] != '\\');
      std::vector<Expr> parts{lit("\"")};
      if (!start) parts.push_back(any);
      parts.push_back(regex_to_expr(pat, ro));
      if (!end) parts.push_back(any);
      parts.push_back(lit("\""));
      return Expr::seq(std::move(parts));
    }
    if (s.contains("format")) {
      const std::string f = s["format"].get<std::string>();
      static const std::pair<const char*, const char*> kFormats[] = {
          {"date", R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))"},
          {"time", R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))"},
          {"date-time",
           R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))"},
          {"uuid", R"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"},
          {"email", R"([a-zA-Z0-9._%+\-]{1,64}@[a-zA-Z0-9\-]{1,63}(\.[a-zA-Z0-9\-]{1,63}){1,4})"},
      };
      for (const auto& [name, re] : kFormats)
        if (f == name) return Expr::seq({lit("\""), regex_to_expr(re), lit("\"")});
      fail(path, "unsupported string format '" + f + "'");
    }
    return string_body(lo, hi);
  }

  // Integer bounds from minimum / maximum / exclusive*; false when unbounded on both sides.
  bool int_bounds(const json& s, const std::string& path, int64_t* lo, int64_t* hi, bool integral) {
    *lo = -kMaxInt;
    *hi = kMaxInt;
    bool any = false;
    auto num = [&](const char* key, double* out) {
      if (!s.contains(key)) return false;
      if (!s[key].is_number()) fail(path, std::string(key) + " must be a number");
      *out = s[key].get<double>();
      return true;
    };
    double v;
    if (num("minimum", &v)) {
      if (!integral && v != std::floor(v))
        fail(path, "fractional minimum on a number is not supported");
      *lo = std::max<int64_t>(*lo, static_cast<int64_t>(std::ceil(v)));
      any = true;
    }
    if (num("exclusiveMinimum", &v)) {
      if (!integral) fail(path, "exclusiveMinimum on a number is not supported");
      *lo = std::max<int64_t>(*lo, static_cast<int64_t>(std::floor(v)) + 1);
      any = true;
    }
    if (num("maximum", &v)) {
      if (!integral && v != std::floor(v))
        fail(path, "fractional maximum on a number is not supported");
      *hi = std::min<int64_t>(*hi, static_cast<int64_t>(std::floor(v)));
      any = true;
    }
    if (num("exclusiveMaximum", &v)) {
      if (!integral) fail(path, "exclusiveMaximum on a number is not supported");
      *hi = std::min<int64_t>(*hi, static_cast<int64_t>(std::ceil(v)) - 1);
      any = true;
    }
    if (*lo > *hi) fail(path, "minimum is above maximum: no integer fits");
    if (s.contains("multipleOf")) fail(path, "unsupported keyword 'multipleOf'");
    return any;
  }

  Expr integer_schema(const json& s, const std::string& path) {
    int64_t lo, hi;
    if (!int_bounds(s, path, &lo, &hi, true)) return integer();
    return int_range(lo, hi);
  }

  Expr number_schema(const json& s, const std::string& path) {
    int64_t lo, hi;
    if (!int_bounds(s, path, &lo, &hi, false)) return number();
    if (lo < 0)
      fail(path, "number bounds below 0 are not supported (use integer, or minimum >= 0)");
    // Non-negative decimals in [lo, hi]: an integer part in [lo, hi - 1] with any fraction, or
    // hi itself with an all-zero fraction.
    Expr frac = Expr::optional(Expr::seq({lit("."), digits(1, 16)}));
    std::vector<Expr> alts;
    if (hi > lo) alts.push_back(Expr::seq({uint_range(lo, hi - 1), frac}));
    ByteSet zero;
    zero.set('0');
    alts.push_back(Expr::seq(
        {lit(std::to_string(hi)),
         Expr::optional(Expr::seq({lit("."), Expr::repeat(Expr::byte_set(zero), 1, 16)}))}));
    return Expr::alt(std::move(alts));
  }

  Expr object_schema(const json& s, const std::string& path, int depth) {
    const json empty_obj = json::object();
    const json& props = s.contains("properties") ? s["properties"] : empty_obj;
    if (!props.is_object()) fail(path, "properties must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail(path, "required must be an array");
      for (const json& r : s["required"]) {
        if (!r.is_string()) fail(path, "required entries must be strings");
        if (!props.contains(r.get<std::string>()))
          fail(path, "required property '" + r.get<std::string>() + "' is not in properties");
        required.insert(r.get<std::string>());
      }
    }
    // Extra keys: only when additionalProperties is true or a schema (strict by default), or for a
    // bare {"type": "object"}.
    std::optional<Expr> extra_value;
    if (s.contains("additionalProperties")) {
      const json& ap = s["additionalProperties"];
      if (ap.is_boolean()) {
        if (ap.get<bool>()) extra_value = generic_value();
      } else {
        extra_value = schema(ap, path + "/additionalProperties", depth + 1);
      }
    } else if (!s.contains("properties")) {
      extra_value = generic_value();
    }
    if (s.contains("minProperties") || s.contains("maxProperties"))
      fail(path, "unsupported keyword 'minProperties'/'maxProperties'");

    struct Prop {
      Expr kv;
      bool required;
    };
    std::vector<Prop> list;
    for (const auto& [name, sub] : props.items()) {
      Expr value = schema(sub, path + "/properties/" + name, depth + 1);
      list.push_back({Expr::seq({lit(json(name).dump()), ws_, lit(":"), ws_, std::move(value)}),
                      required.count(name) > 0});
    }
    const size_t n = list.size();
    // tail[i]: properties i.. after at least one was written (each preceded by a comma).
    std::vector<Expr> tail(n + 1);
    tail[n] = Expr::empty();
    for (size_t i = n; i-- > 0;) {
      Expr item = Expr::seq({lit(","), ws_, list[i].kv});
      tail[i] = Expr::seq(
          {list[i].required ? std::move(item) : Expr::optional(std::move(item)), tail[i + 1]});
    }
    // first[i]: properties i.. when none was written yet; nonempty variant excludes "nothing".
    Expr first_ne;  // alternatives: property k is the first one written (k from i while optional)
    {
      std::vector<Expr> alts;
      for (size_t k = 0; k < n; ++k) {
        alts.push_back(Expr::seq({list[k].kv, tail[k + 1]}));
        if (list[k].required) break;
      }
      first_ne = alts.empty() ? Expr::alt({}) : Expr::alt(std::move(alts));
    }
    bool all_optional = required.empty();
    Expr body;
    if (extra_value) {
      Expr extra = Expr::seq({string_body(0, -1), ws_, lit(":"), ws_, *extra_value});
      Expr more = Expr::star(Expr::seq({ws_, lit(","), ws_, extra}));
      if (!all_optional) {
        body = Expr::seq({first_ne, more});
      } else {
        std::vector<Expr> alts;
        if (n > 0) alts.push_back(Expr::seq({first_ne, more}));
        alts.push_back(Expr::seq({extra, more}));
        body = Expr::optional(Expr::alt(std::move(alts)));
      }
    } else {
      body = all_optional ? Expr::optional(std::move(first_ne)) : std::move(first_ne);
    }
    return Expr::seq({lit("{"), ws_, std::move(body), ws_, lit("}")});
  }

  Expr array_schema(const json& s, const std::string& path, int depth) {
    const int32_t lo = get_count(s, "minItems", 0, path, this);
    const int32_t hi = get_count(s, "maxItems", -1, path, this);
    if (hi >= 0 && hi < lo) fail(path, "maxItems is below minItems");
    if (s.contains("contains")) fail(path, "unsupported keyword 'contains'");
    std::vector<Expr> prefix;
    if (s.contains("prefixItems")) {
      const json& p = s["prefixItems"];
      if (!p.is_array()) fail(path, "prefixItems must be an array");
      for (size_t i = 0; i < p.size(); ++i)
        prefix.push_back(schema(p[i], path + "/prefixItems/" + std::to_string(i), depth + 1));
    }
    bool more_allowed = true;
    Expr item;
    if (s.contains("items")) {
      const json& it = s["items"];
      if (it.is_boolean() && !it.get<bool>()) {
        more_allowed = false;
      } else {
        item = schema(it, path + "/items", depth + 1);
      }
    } else {
      item = generic_value();
    }
    // Elements: prefix items in order (each may be the last), then items.
    const int32_t n_prefix = static_cast<int32_t>(prefix.size());
    if (lo > n_prefix && !more_allowed) fail(path, "minItems exceeds prefixItems with items false");
    // Items after the prefix: count in [max(0, lo - n_prefix), hi - n_prefix].
    const int32_t rest_lo = std::max(0, lo - n_prefix);
    const int32_t rest_hi = !more_allowed ? 0 : hi < 0 ? -1 : std::max(0, hi - n_prefix);
    Expr sep = Expr::seq({ws_, lit(","), ws_});
    // Build from the back: seq(k) = elements k.. given element k is to be written.
    // Simple form for no prefix: [ (item (sep item){lo-1, hi-1})? ].
    Expr elements;
    if (n_prefix == 0) {
      if (rest_hi == 0) {
        elements = Expr::empty();
      } else {
        Expr rep = Expr::repeat(Expr::seq({sep, item}), std::max(0, rest_lo - 1),
                                rest_hi < 0 ? -1 : rest_hi - 1);
        Expr nonempty = Expr::seq({item, std::move(rep)});
        elements = rest_lo == 0 ? Expr::optional(std::move(nonempty)) : std::move(nonempty);
      }
    } else {
      // prefix[0] (sep prefix[1] (... (sep item){rest})?)?: elements from index lo on may stop.
      Expr acc =
          rest_hi == 0 ? Expr::empty() : Expr::repeat(Expr::seq({sep, item}), rest_lo, rest_hi);
      for (int32_t i = n_prefix - 1; i >= 0; --i) {
        const Expr& p = prefix[static_cast<size_t>(i)];
        acc = Expr::seq({i == 0 ? p : Expr::seq({sep, p}), std::move(acc)});
        if (i >= lo) acc = Expr::optional(std::move(acc));
      }
      elements = std::move(acc);
    }
    return Expr::seq({lit("["), ws_, std::move(elements), ws_, lit("]")});
  }

  const json& root_;
  JsonGrammarOptions opt_;
  Grammar& g_;
  Expr ws_;
  int32_t value_rule_ = -1, object_rule_ = -1;
  std::map<std::string, int32_t> refs_;
};

}  // namespace

int32_t add_json_schema_rule(Grammar& g, const json& schema, const JsonGrammarOptions& opt) {
  return SchemaCompiler(g, schema, opt).run();
}

Grammar json_schema_grammar(const json& schema, const JsonGrammarOptions& opt) {
  Grammar g;
  g.root = add_json_schema_rule(g, schema, opt);
  return g;
}

Grammar json_object_grammar(const JsonGrammarOptions& opt) {
  static const json kEmpty = json::object();
  Grammar g;
  g.root = SchemaCompiler(g, kEmpty, opt).run_object();
  return g;
}

Grammar choice_grammar(const std::vector<std::string>& choices) {
  VELA_CHECK(!choices.empty(), "guided_choice: needs at least one choice");
  std::vector<Expr> alts;
  for (const std::string& c : choices) alts.push_back(Expr::literal(c));
  Grammar g;
  g.root = g.add_rule("root", Expr::alt(std::move(alts)));
  return g;
}

}  // namespace vela::constrain
