// Grammar IR helpers and the code point -> UTF-8 byte range expansion (the classic split of a
// range into pieces whose encodings differ only in independent per-byte ranges).
#include "engine/constrain/grammar.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace vela::constrain {

Expr Expr::byte_set(const ByteSet& s) {
  Expr e;
  e.kind = Kind::kBytes;
  e.bytes = s;
  return e;
}

Expr Expr::byte(uint8_t b) {
  ByteSet s;
  s.set(b);
  return byte_set(s);
}

Expr Expr::literal(std::string_view bytes) {
  if (bytes.size() == 1) return byte(static_cast<uint8_t>(bytes[0]));
  std::vector<Expr> items;
  items.reserve(bytes.size());
  for (char c : bytes) items.push_back(byte(static_cast<uint8_t>(c)));
  return seq(std::move(items));
}

Expr Expr::ref(int32_t rule) {
  Expr e;
  e.kind = Kind::kRef;
  e.rule = rule;
  return e;
}

Expr Expr::seq(std::vector<Expr> items) {
  if (items.size() == 1) return std::move(items[0]);
  Expr e;
  e.kind = items.empty() ? Kind::kEmpty : Kind::kSeq;
  e.children = std::move(items);
  return e;
}

Expr Expr::alt(std::vector<Expr> items) {
  if (items.size() == 1) return std::move(items[0]);
  Expr e;
  e.kind = Kind::kAlt;
  e.children = std::move(items);
  return e;
}

Expr Expr::repeat(Expr item, int32_t min, int32_t max) {
  VELA_CHECK(min >= 0 && min <= kMaxRepeat && (max == -1 || (max >= min && max <= kMaxRepeat)),
             "grammar: repetition {", min, ",", max, "} is outside the supported bounds 0..",
             kMaxRepeat);
  if (min == 1 && max == 1) return item;
  Expr e;
  e.kind = Kind::kRepeat;
  e.min = min;
  e.max = max;
  e.children.push_back(std::move(item));
  return e;
}

Expr text_without(std::string_view t) {
  VELA_CHECK(!t.empty() && t.find(t[0], 1) == std::string_view::npos,
             "grammar: the trigger '", t, "' must not repeat its first character");
  const auto c0 = static_cast<uint8_t>(t[0]);
  ByteSet not_c0;
  not_c0.set();
  not_c0.reset(c0);
  // Segments of text: a byte other than c0 (N); a proper prefix of the trigger followed by a byte
  // that neither continues it nor is c0 (Q); a proper prefix followed by c0 or the end (P). With
  // c0 unique in the trigger, ( N | P* Q )* P* is exactly the text without the trigger.
  std::vector<Expr> prefixes, mismatches;
  for (size_t k = 1; k < t.size(); ++k) {
    prefixes.push_back(Expr::literal(t.substr(0, k)));
    ByteSet other = not_c0;
    other.reset(static_cast<uint8_t>(t[k]));
    mismatches.push_back(Expr::seq({Expr::literal(t.substr(0, k)), Expr::byte_set(other)}));
  }
  Expr p_star = Expr::star(Expr::alt(prefixes));
  Expr q = Expr::seq({p_star, Expr::alt(std::move(mismatches))});
  return Expr::seq(
      {Expr::star(Expr::alt({Expr::byte_set(not_c0), std::move(q)})), std::move(p_star)});
}

namespace {

int utf8_len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// [lo, hi] of one encoded length: split until each piece's encodings are a product of byte ranges.
void split_same_length(uint32_t lo, uint32_t hi, std::vector<Expr>& out) {
  const int n = utf8_len(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_same_length(lo, lo | m, out);
        split_same_length((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_same_length(lo, (hi & ~m) - 1, out);
        split_same_length(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  unicode::append_utf8(a, lo);
  unicode::append_utf8(b, hi);
  std::vector<Expr> bytes;
  for (size_t k = 0; k < a.size(); ++k) {
    ByteSet s;
    for (int v = static_cast<uint8_t>(a[k]); v <= static_cast<uint8_t>(b[k]); ++v) s.set(v);
    bytes.push_back(Expr::byte_set(s));
  }
  out.push_back(Expr::seq(std::move(bytes)));
}

}  // namespace

Expr utf8_class(std::vector<CodepointRange> ranges, bool negated) {
  for (auto& [lo, hi] : ranges) {
    VELA_CHECK(lo <= hi && hi <= 0x10FFFF, "grammar: character range ", lo, "-", hi,
               " is not a valid code point range");
  }
  std::sort(ranges.begin(), ranges.end());
  std::vector<CodepointRange> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  if (negated) {
    std::vector<CodepointRange> inv;
    uint32_t next = 0;
    for (const auto& [lo, hi] : merged) {
      if (lo > next) inv.push_back({next, lo - 1});
      next = hi + 1;
    }
    if (next <= 0x10FFFF) inv.push_back({next, 0x10FFFF});
    merged = std::move(inv);
  }
  // Surrogates are not scalar values: cut them out.
  std::vector<CodepointRange> scalar;
  for (const auto& [lo, hi] : merged) {
    if (hi < 0xD800 || lo > 0xDFFF) {
      scalar.push_back({lo, hi});
      continue;
    }
    if (lo < 0xD800) scalar.push_back({lo, 0xD7FF});
    if (hi > 0xDFFF) scalar.push_back({0xE000, hi});
  }
  std::vector<Expr> alts;
  ByteSet ascii;  // single-byte code points merge into one set
  for (auto [lo, hi] : scalar) {
    static constexpr uint32_t kBounds[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    for (uint32_t bound : kBounds) {
      if (lo > hi) break;
      if (lo > bound) continue;
      const uint32_t end = std::min(hi, bound);
      if (bound == 0x7F) {
        for (uint32_t c = lo; c <= end; ++c) ascii.set(c);
      } else {
        split_same_length(lo, end, alts);
      }
      lo = end + 1;
    }
  }
  if (ascii.any()) alts.insert(alts.begin(), Expr::byte_set(ascii));
  if (alts.size() == 1) return std::move(alts[0]);
  Expr e;
  e.kind = Expr::Kind::kAlt;  // possibly empty: matches nothing
  e.children = std::move(alts);
  return e;
}

int32_t Grammar::find(const std::string& name) const {
  auto it = index.find(name);
  return it == index.end() ? -1 : it->second;
}

int32_t Grammar::rule_id(const std::string& name) {
  int32_t id = find(name);
  if (id >= 0) return id;
  names.push_back(name);
  bodies.push_back(Expr::empty());
  index[name] = n_rules() - 1;
  return n_rules() - 1;
}

int32_t Grammar::add_rule(const std::string& hint, Expr body) {
  std::string name = hint;
  for (int k = 1; find(name) >= 0; ++k) name = hint + "-" + std::to_string(k);
  names.push_back(name);
  bodies.push_back(std::move(body));
  index[name] = n_rules() - 1;
  return n_rules() - 1;
}

}  // namespace vela::constrain
