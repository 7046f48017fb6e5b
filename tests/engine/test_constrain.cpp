// Constrained decoding core: EBNF / regex / JSON Schema front ends, the matcher (bytes, tokens,
// rollback, termination) and the token mask against a brute-force oracle (every token tried).
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <regex>

#include "core/error.h"
#include "engine/constrain/automaton.h"
#include "engine/constrain/ebnf.h"
#include "engine/constrain/grammar_compiler.h"
#include "engine/constrain/json_schema.h"
#include "engine/constrain/matcher.h"
#include "engine/constrain/regex.h"
#include "engine/constrain/tool_call_grammar.h"
#include "test_assets.h"
#include "tokenizer/tokenizer.h"

namespace vela::constrain {
namespace {

// 256 single bytes, then some multi-byte tokens, then an "EOS" with no bytes (id = size - 1).
std::shared_ptr<const TokenVocab> small_vocab() {
  std::vector<std::string> t;
  for (int b = 0; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
  for (const char* s : {"{\"", "\":", "\",",  "\"}",    "true", "false",    "null",  "  ",  "\n  ",
                        "ab",  "abc", "abc",  "12",     "123",  "-1",       "\":\"", "[\"", "\"]",
                        "},{", "é",   "\xC3", "\xA9\"", "name", "\"name\"", "ing",   "aaaa"})
    t.push_back(s);
  t.push_back("");  // EOS
  const int32_t eos = static_cast<int32_t>(t.size()) - 1;
  return std::make_shared<TokenVocab>(std::move(t), std::vector<int32_t>{eos});
}

std::shared_ptr<const CompiledGrammar> compile(const Grammar& g) {
  static auto vocab = small_vocab();
  return std::make_shared<CompiledGrammar>(compile_automaton(g), vocab);
}

bool full_match(const std::shared_ptr<const CompiledGrammar>& cg, const std::string& s) {
  GrammarMatcher m(cg);
  return m.accept_bytes(s) && m.can_terminate();
}

TEST(ConstrainEbnf, AcceptsAndRejects) {
  auto g = compile(parse_ebnf(R"G(
    # arithmetic
    root ::= expr
    expr ::= term (("+" | "-") term)*
    term ::= num | "(" expr ")"
    num  ::= [0-9]+
  )G"));
  EXPECT_TRUE(full_match(g, "1+2"));
  EXPECT_TRUE(full_match(g, "(1+(22-3))-4"));
  EXPECT_FALSE(full_match(g, "1+"));
  EXPECT_FALSE(full_match(g, "(1"));
  EXPECT_FALSE(full_match(g, "a"));
  GrammarMatcher m(g);
  EXPECT_TRUE(m.accept_bytes("(1"));
  EXPECT_FALSE(m.can_terminate());
  EXPECT_FALSE(m.accept_bytes(")("));  // rejected as a whole: state unchanged
  EXPECT_TRUE(m.accept_bytes(")"));
  EXPECT_TRUE(m.can_terminate());
}

TEST(ConstrainEbnf, RepetitionClassesAndUnicode) {
  auto g = compile(parse_ebnf(R"(root ::= [a-c]{2,3} "-" [^0-9\n]? "é" x
x ::= "\x41" | "\u00e9" | . )"));
  EXPECT_TRUE(full_match(g, "ab-éA"));
  EXPECT_TRUE(full_match(g, "abc-zéé"));
  EXPECT_TRUE(full_match(g, "abc-€é\xF0\x9F\x98\x80"));  // . is any scalar value (4 bytes)
  EXPECT_FALSE(full_match(g, "a-éA"));
  EXPECT_FALSE(full_match(g, "abcc-éA"));
  EXPECT_FALSE(full_match(g, "ab-5éA"));
  EXPECT_FALSE(full_match(g, "ab-é\xC3"));  // half a character
}

TEST(ConstrainEbnf, ErrorsNameTheProblem) {
  auto err = [](const std::string& text) {
    try {
      compile(parse_ebnf(text));
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(err("root ::= foo").find("'foo' is used but never defined"), std::string::npos);
  EXPECT_NE(err("start ::= \"a\"").find("no 'root' rule"), std::string::npos);
  EXPECT_NE(err("root ::= \"abc").find("unterminated string"), std::string::npos);
  EXPECT_NE(err("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(err("root ::= x\nx ::= y? x \"a\"\ny ::= \"b\"").find("left-recursive"),
            std::string::npos);
  EXPECT_NE(err("root ::= \"a\"{3,1}").find("n < m"), std::string::npos);
  EXPECT_NE(err("root ::= \"a\"{99999}").find("repetition bound"), std::string::npos);
  EXPECT_NE(err("root ::= [a-").find("unterminated character class"), std::string::npos);
}

TEST(ConstrainRegex, AgreesWithStdRegex) {
  const char* patterns[] = {R"(\d{3}-\d{4})",
                            R"([a-z]+@[a-z]+\.(com|org))",
                            R"((ab|a)(bc|c)?)",
                            R"(x*y+z?)",
                            R"([^abc]{2})",
                            R"(\w+\s\W)",
                            R"(a.c)",
                            R"((?:ab){2,3})",
                            R"(colou?r)",
                            R"(-?(0|[1-9]\d*))",
                            R"([\-+]?[0-9]*\.?[0-9]+)",
                            R"(a{2}b{1,}c{0,2})",
                            R"(^start|end$)"};
  const char* inputs[] = {
      "555-1234", "55-1234",  "bob@site.com", "bob@site.net", "abc",     "ac",
      "a",        "ab",       "xyz",          "yy",           "z",       "de",
      "ad",       "foo a",    "foo  ",        "abc",          "a\nc",    "abab",
      "ababab",   "abababab", "color",        "colour",       "colouur", "0",
      "-12",      "012",      "+.5",          "3.14",         "1.",      "aabccc",
      "aabbcc",   "start",    "end",          "startend",     ""};
  for (const char* p : patterns) {
    auto g = compile(regex_grammar(p));
    std::regex re(p);
    for (const char* in : inputs) {
      EXPECT_EQ(full_match(g, in), std::regex_match(std::string(in), re))
          << "pattern /" << p << "/ on '" << in << "'";
    }
  }
}

TEST(ConstrainRegex, UnsupportedConstructsThrow) {
  for (const char* p : {"(a)\\1", "(?=a)b", "\\bword", "a^b", "(?i)abc", "a++", "[[:alpha:]]"}) {
    try {
      regex_grammar(p);
      ADD_FAILURE() << "no error for /" << p << "/";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("regex:"), std::string::npos) << e.what();
    }
  }
}

TEST(ConstrainJsonSchema, ObjectsRequiredOptionalAndNesting) {
  json schema = json::parse(R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "minLength": 1},
      "age": {"type": "integer", "minimum": 0, "maximum": 150},
      "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
      "address": {"type": "object", "properties": {"city": {"type": "string"}},
                  "required": ["city"], "additionalProperties": false},
      "kind": {"const": "person"},
      "score": {"type": ["number", "null"]}
    },
    "required": ["name", "kind"],
    "additionalProperties": false
  })");
  auto g = compile(json_schema_grammar(schema));
  EXPECT_TRUE(full_match(g, R"({"name":"x","kind":"person"})"));
  EXPECT_TRUE(full_match(g, R"({ "name": "Al", "age": 150, "kind": "person" })"));
  EXPECT_TRUE(full_match(
      g,
      R"({"name":"x","age":7,"tags":["a","b"],"address":{"city":"P"},"kind":"person","score":null})"));
  EXPECT_TRUE(full_match(g, R"({"name":"x","kind":"person","score":-1.5e10})"));
  EXPECT_TRUE(full_match(g, R"({"name":"a\"\u00e9","kind":"person"})"));
  EXPECT_FALSE(full_match(g, R"({"kind":"person"})"));                       // name required
  EXPECT_FALSE(full_match(g, R"({"name":"","kind":"person"})"));             // minLength
  EXPECT_FALSE(full_match(g, R"({"name":"x","age":151,"kind":"person"})"));  // maximum
  EXPECT_FALSE(full_match(g, R"({"name":"x","age":-1,"kind":"person"})"));   // minimum
  EXPECT_FALSE(full_match(g, R"({"name":"x","tags":["a","b","a"],"kind":"person"})"));
  EXPECT_FALSE(full_match(g, R"({"name":"x","kind":"person","extra":1})"));
  EXPECT_FALSE(full_match(g, R"({"name":"x","kind":"other"})"));
  EXPECT_FALSE(full_match(g, R"({"name":"x","address":{},"kind":"person"})"));
  EXPECT_FALSE(full_match(g, R"({"name":"x","kind":"person"} )"));  // nothing after the root? ws
}

TEST(ConstrainJsonSchema, RefsAnyOfPrefixItemsAndRecursion) {
  json schema = json::parse(R"({
    "$defs": {
      "node": {"type": "object",
               "properties": {"v": {"type": "integer"},
                              "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
               "required": ["v"], "additionalProperties": false}
    },
    "anyOf": [{"$ref": "#/$defs/node"},
              {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}],
               "items": false, "minItems": 1}]
  })");
  auto g = compile(json_schema_grammar(schema));
  EXPECT_TRUE(full_match(g, R"({"v":1})"));
  EXPECT_TRUE(full_match(g, R"({"v":1,"kids":[{"v":2,"kids":[{"v":3}]},{"v":4}]})"));
  EXPECT_TRUE(full_match(g, R"(["s"])"));
  EXPECT_TRUE(full_match(g, R"(["s",true])"));
  EXPECT_FALSE(full_match(g, R"([])"));
  EXPECT_FALSE(full_match(g, R"(["s",true,1])"));
  EXPECT_FALSE(full_match(g, R"({"v":1,"kids":[{}]})"));
}

TEST(ConstrainJsonSchema, IntegerRangesAreExact) {
  for (auto [lo, hi] :
       std::vector<std::pair<int, int>>{{0, 0}, {3, 17}, {-20, 5}, {-99, -7}, {95, 1234}}) {
    json schema = {{"type", "integer"}, {"minimum", lo}, {"maximum", hi}};
    auto g = compile(json_schema_grammar(schema));
    for (int v = -1300; v <= 1300; ++v)
      ASSERT_EQ(full_match(g, std::to_string(v)), v >= lo && v <= hi)
          << v << " in [" << lo << "," << hi << "]";
    EXPECT_FALSE(full_match(g, "007"));
  }
}

TEST(ConstrainJsonSchema, UnsupportedKeywordsNameThemselves) {
  auto err = [](const char* s) {
    try {
      json_schema_grammar(json::parse(s));
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(err(R"({"type":"object","properties":{"a":{"not":{"type":"string"}}}})")
                .find("unsupported keyword 'not' at #/properties/a"),
            std::string::npos);
  EXPECT_NE(err(R"({"type":"string","format":"hostname"})").find("format 'hostname'"),
            std::string::npos);
  EXPECT_NE(err(R"({"$ref":"http://x/y"})").find("only local $ref"), std::string::npos);
  EXPECT_NE(err(R"({"$ref":"#/$defs/missing"})").find("does not resolve"), std::string::npos);
  EXPECT_NE(err(R"({"type":"integer","multipleOf":3})").find("multipleOf"), std::string::npos);
  EXPECT_NE(err(R"({"type":"widget"})").find("unknown type 'widget'"), std::string::npos);
}

TEST(ConstrainJsonSchema, GenericJsonObject) {
  auto g = compile(json_object_grammar());
  EXPECT_TRUE(full_match(g, R"({"a":[1,{"b":null}],"c":"d"})"));
  EXPECT_TRUE(full_match(g, "{}"));
  EXPECT_FALSE(full_match(g, "[1]"));
  EXPECT_FALSE(full_match(g, R"({"a":})"));
}

// The mask must equal "every token whose accept_token succeeds", in random reachable states.
void check_masks_against_brute_force(const std::shared_ptr<const CompiledGrammar>& cg, int n_walks,
                                     int max_steps, uint32_t seed,
                                     const std::string& prefix = "") {
  const TokenVocab& v = cg->vocab();
  std::mt19937 rng(seed);
  std::vector<uint32_t> bits(static_cast<size_t>(v.n_words()));
  for (int walk = 0; walk < n_walks; ++walk) {
    GrammarMatcher m(cg);
    ASSERT_TRUE(m.accept_bytes(prefix));
    for (int step = 0; step < max_steps && !m.is_terminated(); ++step) {
      m.fill_next_token_bitmask(bits.data());
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < v.size(); ++id) {
        const bool in_mask = (bits[static_cast<size_t>(id >> 5)] >> (id & 31)) & 1u;
        const bool ok = m.accept_token(id);
        if (ok) m.rollback(1);
        ASSERT_EQ(in_mask, ok) << "token " << id << " '" << v.bytes(id) << "' at step " << step;
        if (ok) allowed.push_back(id);
      }
      ASSERT_FALSE(allowed.empty());
      int32_t pick = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.accept_token(pick));
      if (m.is_finished()) break;
    }
  }
}

TEST(ConstrainMatcher, MaskEqualsBruteForce) {
  json schema = json::parse(R"({"type":"object","properties":{
      "name":{"type":"string"},"n":{"type":"integer"},"ok":{"type":"boolean"},
      "list":{"type":"array","items":{"type":"string","enum":["abc","ab"]}}},
      "required":["name"],"additionalProperties":false})");
  check_masks_against_brute_force(compile(json_schema_grammar(schema)), 6, 40, 1);
  check_masks_against_brute_force(compile(json_object_grammar()), 6, 40, 2);
  check_masks_against_brute_force(compile(regex_grammar("(abc|ab)+[0-9]{1,3}")), 6, 20, 3);
}

TEST(ConstrainMatcher, RollbackRestoresStateAndTermination) {
  auto g = compile(parse_ebnf(R"(root ::= "{" ("\"name\"" | "\"n\"") ":" [0-9]+ "}")"));
  const TokenVocab& v = g->vocab();
  GrammarMatcher m(g);
  std::vector<uint32_t> before(static_cast<size_t>(v.n_words())), after(before.size());
  ASSERT_TRUE(m.accept_token('{'));
  m.fill_next_token_bitmask(before.data());
  int32_t name_tok = -1;
  for (int32_t id = 0; id < v.size(); ++id)
    if (v.bytes(id) == "\"name\"") name_tok = id;
  ASSERT_GE(name_tok, 0);
  ASSERT_TRUE(m.accept_token(name_tok));
  ASSERT_TRUE(m.accept_token(':'));
  ASSERT_TRUE(m.accept_token('7'));
  ASSERT_FALSE(m.accept_token('x'));
  ASSERT_TRUE(m.accept_token('}'));
  EXPECT_TRUE(m.can_terminate());
  EXPECT_TRUE(m.is_terminated());
  const int32_t eos = v.end_ids()[0];
  std::vector<uint32_t> end_mask(before.size());
  m.fill_next_token_bitmask(end_mask.data());
  for (int32_t id = 0; id < v.size(); ++id)
    EXPECT_EQ((end_mask[static_cast<size_t>(id >> 5)] >> (id & 31)) & 1u, id == eos ? 1u : 0u);
  ASSERT_TRUE(m.accept_token(eos));
  EXPECT_TRUE(m.is_finished());
  EXPECT_FALSE(m.accept_token('1'));
  m.rollback(5);  // eos, }, 7, :, "name"
  EXPECT_EQ(m.n_steps(), 1);
  m.fill_next_token_bitmask(after.data());
  EXPECT_EQ(before, after);
  EXPECT_FALSE(m.accept_token(eos));
  m.reset();
  EXPECT_EQ(m.n_steps(), 0);
  EXPECT_TRUE(m.accept_token('{'));
}

TEST(ConstrainCompiler, CachesBySchemaTextAndRejectsBadInput) {
  GrammarCompiler c(small_vocab());
  json schema = {{"type", "object"}, {"properties", {{"a", {{"type", "string"}}}}}};
  auto g1 = c.compile(Constraint::json_schema(schema));
  auto g2 = c.compile(Constraint::json_schema(schema));
  EXPECT_EQ(g1.get(), g2.get());
  EXPECT_EQ(c.n_compiles(), 1);
  auto g3 = c.compile(Constraint::regex("a+"));
  EXPECT_NE(g1.get(), g3.get());
  EXPECT_THROW(c.compile(Constraint{Constraint::Kind::kJsonSchema, "{not json"}), InvalidArgument);
  EXPECT_THROW(c.compile(Constraint::grammar("root ::= root")), InvalidArgument);
  EXPECT_THROW(c.compile(Constraint::choice(json::array())), InvalidArgument);
  auto ch = c.compile(Constraint::choice(json::array({"yes", "no"})));
  EXPECT_TRUE(full_match(ch, "yes"));
  EXPECT_FALSE(full_match(ch, "maybe"));
}

// Never a hang: huge or deeply nested inputs fail fast with an error.
TEST(ConstrainCompiler, BoundedOnHostileInput) {
  std::string deep = "root ::= ";
  for (int i = 0; i < 5000; ++i) deep += "(";
  EXPECT_THROW(parse_ebnf(deep), InvalidArgument);
  json nested = {{"type", "string"}};
  for (int i = 0; i < 300; ++i) nested = {{"type", "array"}, {"items", nested}};
  EXPECT_THROW(json_schema_grammar(nested), InvalidArgument);
  EXPECT_THROW(compile(regex_grammar("(a{1000}){1000}")), InvalidArgument);
}

// The real 151k-token Qwen vocabulary: compile time of a typical tool schema, first (uncached)
// and cached mask times, and the mask against brute force in a few states.
TEST(ConstrainQwen, ToolSchemaCompileAndMaskTimes) {
  const auto dir = test::assets_dir() / "tokenizers" / "qwen3";
  VELA_SKIP_UNLESS_ASSET(dir / "tokenizer.json");
  Tokenizer tok = Tokenizer::from_file(dir.string());
  auto t0 = std::chrono::steady_clock::now();
  auto vocab = TokenVocab::from_tokenizer(tok, tok.vocab_size(), {*tok.token_to_id("<|im_end|>")});
  auto t1 = std::chrono::steady_clock::now();
  json schema = json::parse(R"({"type":"object","properties":{
      "location":{"type":"string","description":"City and country"},
      "unit":{"type":"string","enum":["celsius","fahrenheit"]},
      "days":{"type":"integer","minimum":1,"maximum":14},
      "include_hourly":{"type":"boolean"}},
      "required":["location","unit"],"additionalProperties":false})");
  GrammarCompiler compiler(vocab);
  auto t2 = std::chrono::steady_clock::now();
  auto cg = compiler.compile(Constraint::json_schema(schema));
  auto t3 = std::chrono::steady_clock::now();
  GrammarMatcher m(cg);
  std::vector<uint32_t> bits(static_cast<size_t>(vocab->n_words()));
  m.fill_next_token_bitmask(bits.data());
  ASSERT_TRUE(m.accept_bytes("{\"location\": \"Par"));
  auto t4 = std::chrono::steady_clock::now();
  m.fill_next_token_bitmask(bits.data());  // inside a string: most of the vocabulary
  auto t5 = std::chrono::steady_clock::now();
  m.fill_next_token_bitmask(bits.data());
  auto t6 = std::chrono::steady_clock::now();
  auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  // Uncached again on fresh copies of the grammar (the first walk also pays page faults).
  double best_uncached = ms(t4, t5);
  for (int rep = 0; rep < 3; ++rep) {
    auto fresh =
        std::make_shared<CompiledGrammar>(compile_automaton(json_schema_grammar(schema)), vocab);
    GrammarMatcher f(fresh);
    ASSERT_TRUE(f.accept_bytes("{\"location\": \"Par"));
    auto a = std::chrono::steady_clock::now();
    f.fill_next_token_bitmask(bits.data());
    best_uncached = std::min(best_uncached, ms(a, std::chrono::steady_clock::now()));
  }
  std::printf("[constrain] best uncached string-state mask %.2f ms\n", best_uncached);
  int64_t n_allowed = 0;
  for (uint32_t w : bits) n_allowed += __builtin_popcount(w);
  std::printf(
      "[constrain] qwen3 vocab %lld: vocab build %.1f ms, schema compile %.2f ms, "
      "string-state mask %.2f ms uncached / %.3f ms cached (%lld allowed)\n",
      static_cast<long long>(vocab->size()), ms(t0, t1), ms(t2, t3), ms(t4, t5), ms(t5, t6),
      static_cast<long long>(n_allowed));
  EXPECT_LT(ms(t2, t3), 50.0);
  EXPECT_GT(n_allowed, 100000);
  // Brute force in the string state: every token tried.
  for (int32_t id = 0; id < vocab->size(); ++id) {
    const bool in_mask = (bits[static_cast<size_t>(id >> 5)] >> (id & 31)) & 1u;
    const bool ok = m.accept_token(id);
    if (ok) m.rollback(1);
    ASSERT_EQ(in_mask, ok) << "token " << id;
  }
}

}  // namespace
}  // namespace vela::constrain

namespace vela::constrain {
namespace {

TEST(ConstrainToolCalls, NamesAndArgumentsFollowTheToolSchemas) {
  json spec = json::parse(R"({"tools":[
      {"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},
                                          "required":["city"],"additionalProperties":false}},
      {"name":"noop","parameters":{}}],"parallel":true})");
  auto g = compile(tool_call_grammar(spec));
  EXPECT_TRUE(full_match(g, "get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_call>"));
  EXPECT_TRUE(full_match(g,
                         "noop\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": "
                         "\"noop\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(full_match(g, "other\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(full_match(g, "get_weather\", \"arguments\": {}}\n</tool_call>"));  // city required
  spec["forced"] = "get_weather";
  auto forced = compile(tool_call_grammar(spec));
  EXPECT_TRUE(full_match(forced, "{\"city\": \"x\"}}\n</tool_call>"));
  EXPECT_FALSE(full_match(forced, "{}}\n</tool_call>"));
  spec["forced"] = "missing";
  EXPECT_THROW(tool_call_grammar(spec), InvalidArgument);
  json bad = json::parse(
      R"({"tools":[{"name":"t","parameters":{"type":"object","properties":{"a":{"not":{}}}}}]})");
  try {
    tool_call_grammar(bad);
    ADD_FAILURE();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("tool 't' parameters"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vela::constrain

namespace vela::constrain {
namespace {

// text_without: exactly the strings that do not contain the trigger (all strings over a small
// alphabet up to length 7 against std::string::find).
TEST(ConstrainLazy, TextWithoutTriggerIsExact) {
  for (std::string trigger : {"<ab>", "<a", "x"}) {
    Grammar g;
    g.root = g.add_rule("root", text_without(trigger));
    auto cg = compile(g);
    const std::string alphabet = "<ab>c";
    std::vector<std::string> all{""};
    for (int len = 1; len <= 7; ++len) {
      std::vector<std::string> next;
      for (const std::string& s : all)
        if (static_cast<int>(s.size()) == len - 1)
          for (char c : alphabet) next.push_back(s + c);
      all.insert(all.end(), next.begin(), next.end());
    }
    for (const std::string& s : all)
      ASSERT_EQ(full_match(cg, s), s.find(trigger) == std::string::npos) << trigger << " / " << s;
  }
  EXPECT_THROW(text_without("<a<"), InvalidArgument);
}

json lazy_spec(bool parallel) {
  return json::parse(R"({"tools":[
      {"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},
                                          "required":["city"],"additionalProperties":false}},
      {"name":"free","parameters":{"type":"object"}}],"lazy":true,"parallel":)" +
                     std::string(parallel ? "true" : "false") + "}");
}

// Lazy (tool_choice auto, strict tools): free text, or free text then constrained calls.
TEST(ConstrainLazy, FreeTextThenConstrainedCalls) {
  auto g = compile(tool_call_grammar(lazy_spec(false)));
  const std::string call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\"}}\n</tool_call>";
  EXPECT_TRUE(full_match(g, ""));
  EXPECT_TRUE(full_match(g, "Hello <tool <b> any text é"));
  EXPECT_TRUE(full_match(g, "<think>\nhm\n</think>\n\n" + call));
  EXPECT_TRUE(full_match(g, call));
  EXPECT_TRUE(full_match(g, "<tool_call>\n{\"name\": \"free\", \"arguments\": {\"x\": [1]}}\n</tool_call>"));
  EXPECT_FALSE(full_match(g, "text <tool_call>"));                      // an unfinished call
  EXPECT_FALSE(full_match(g, call + "\n" + call));                       // not parallel
  EXPECT_FALSE(full_match(g, call + " and more text"));                  // nothing after the calls
  EXPECT_FALSE(full_match(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(full_match(g, "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>"));
  auto par = compile(tool_call_grammar(lazy_spec(true)));
  EXPECT_TRUE(full_match(par, "x" + call + "\n" + call));
  check_masks_against_brute_force(g, 6, 40, 5);
  check_masks_against_brute_force(par, 6, 40, 6);
  check_masks_against_brute_force(g, 6, 40, 7, "ab <tool_call>");
  check_masks_against_brute_force(par, 6, 60, 8, call + "\n<tool_c");
  // With a content schema the text must be a JSON value of it.
  json spec = lazy_spec(false);
  spec["content"] = json::parse(R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]})");
  auto c = compile(tool_call_grammar(spec));
  EXPECT_TRUE(full_match(c, "{\"a\": 1}"));
  EXPECT_FALSE(full_match(c, "free text"));
  EXPECT_TRUE(full_match(c, call));
}

}  // namespace
}  // namespace vela::constrain

namespace vela::constrain {
namespace {

// The lazy tool-call grammar on the real Qwen3 vocabulary: free text allows nearly everything (the
// <tool_call> token included), the call after it is constrained; masks equal brute force.
TEST(ConstrainQwen, LazyToolCallsMaskEqualsBruteForce) {
  const auto dir = test::assets_dir() / "tokenizers" / "qwen3";
  VELA_SKIP_UNLESS_ASSET(dir / "tokenizer.json");
  Tokenizer tok = Tokenizer::from_file(dir.string());
  auto vocab = TokenVocab::from_tokenizer(tok, tok.vocab_size(), {*tok.token_to_id("<|im_end|>")});
  auto cg = std::make_shared<CompiledGrammar>(compile_automaton(tool_call_grammar(lazy_spec(false))), vocab);
  GrammarMatcher m(cg);
  std::vector<uint32_t> bits(static_cast<size_t>(vocab->n_words()));
  auto brute = [&](const char* where) {
    m.fill_next_token_bitmask(bits.data());
    int64_t n_allowed = 0;
    for (int32_t id = 0; id < vocab->size(); ++id) {
      const bool in_mask = (bits[static_cast<size_t>(id >> 5)] >> (id & 31)) & 1u;
      const bool ok = m.accept_token(id);
      if (ok) m.rollback(1);
      ASSERT_EQ(in_mask, ok) << where << ": token " << id;
      n_allowed += ok;
    }
    std::printf("[constrain] lazy tool calls, %s: %lld tokens allowed\n", where,
                static_cast<long long>(n_allowed));
  };
  brute("free text");
  const int32_t open = *tok.token_to_id("<tool_call>");
  EXPECT_TRUE((bits[static_cast<size_t>(open >> 5)] >> (open & 31)) & 1u);
  ASSERT_TRUE(m.accept_bytes("I will call <tool"));
  brute("after a partial trigger");
  m.reset();
  ASSERT_TRUE(m.accept_token(open));
  brute("after <tool_call>");
  ASSERT_TRUE(m.accept_bytes("\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P"));
  brute("inside the arguments");
}

}  // namespace
}  // namespace vela::constrain
