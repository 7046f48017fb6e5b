// Tool-call dialects: the Llama 3 JSON parser (whole text, 1-byte pieces, random-size pieces and
// Llama 3.1 tokens, as the engine streams; the deltas must add up to the one-shot result and
// unparseable text must come back as content), dialect detection on the real Qwen3 / Llama 3.1
// tokenizer configs and the repository's Llama 3.1-style tool template, the prefills, and the
// llama3_json tool-call grammars (strict / forced outputs sampled from the grammar must parse
// as calls whose arguments match the schema).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>

#include "core/error.h"
#include "core/json.h"
#include "engine/constrain/grammar_compiler.h"
#include "engine/constrain/token_vocab.h"
#include "server/chat_output.h"
#include "server/chat_prompt.h"
#include "server/llama3_json_tool_call_parser.h"
#include "server/server_config.h"
#include "server/tool_call_dialect.h"
#include "server_test_util.h"
#include "tokenizer/chat_template.h"

namespace vela {
namespace {

using test::Collected;

ChatOutputOptions llama3_options(std::string forced_prefix = "") {
  ChatOutputOptions o;
  o.tools = true;
  o.dialect = ToolCallDialect::kLlama3Json;
  o.forced_prefix = std::move(forced_prefix);
  return o;
}

Collected collect(const ChatOutputOptions& opts, const std::vector<std::string>& pieces) {
  ChatOutputParser p(opts);
  Collected c = test::collect_deltas(p, pieces);
  EXPECT_EQ(c.reasoning, "");  // no delta carries reasoning
  return c;
}

// Whole, byte by byte, 20 random splits into 1..9-byte pieces, and Llama 3.1 token pieces.
std::vector<std::vector<std::string>> splits(const std::string& text) {
  std::vector<std::vector<std::string>> all = {{text}};
  std::vector<std::string> bytes;
  for (char ch : text) bytes.emplace_back(1, ch);
  all.push_back(bytes);
  std::mt19937 rng(static_cast<uint32_t>(text.size()));
  for (int r = 0; r < 20; ++r) {
    std::vector<std::string> v;
    for (size_t i = 0; i < text.size();) {
      size_t n = 1 + rng() % 9;
      v.push_back(text.substr(i, n));
      i += n;
    }
    all.push_back(v);
  }
  if (const Tokenizer* tok = test::llama3_1_tokenizer())
    all.push_back(test::token_pieces(*tok, text));
  return all;
}

// The same result for every split.
Collected collect_all(const ChatOutputOptions& opts, const std::string& text) {
  Collected first;
  bool have = false;
  for (const auto& pieces : splits(text)) {
    Collected c = collect(opts, pieces);
    if (!have) {
      first = c;
      have = true;
      continue;
    }
    EXPECT_EQ(c.content, first.content) << text;
    EXPECT_EQ(c.calls.size(), first.calls.size()) << text;
    for (size_t i = 0; i < c.calls.size() && i < first.calls.size(); ++i) {
      EXPECT_EQ(c.calls[i].name, first.calls[i].name);
      EXPECT_EQ(c.calls[i].arguments, first.calls[i].arguments);
    }
  }
  return first;
}

TEST(Llama3JsonToolCallParser, SingleCall) {
  Collected c = collect_all(
      llama3_options(),
      R"({"name": "get_weather", "parameters": {"city": "Paris", "units": {"t": "C}"}, "days": [1, 2]}})");
  EXPECT_EQ(c.content, "");
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_EQ(c.calls[0].name, "get_weather");
  // The arguments are the model's own text, byte for byte.
  EXPECT_EQ(c.calls[0].arguments, R"({"city": "Paris", "units": {"t": "C}"}, "days": [1, 2]})");
  EXPECT_EQ(c.calls[0].id.rfind("call_", 0), 0u);
}

TEST(Llama3JsonToolCallParser, PythonTagAndArgumentsKey) {
  Collected c =
      collect_all(llama3_options(), "<|python_tag|>{\"name\": \"f\", \"arguments\": {\"x\": 1}}");
  EXPECT_EQ(c.content, "");
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_EQ(c.calls[0].name, "f");
  EXPECT_EQ(c.calls[0].arguments, "{\"x\": 1}");
  // Leading whitespace, compact JSON, parameters as a JSON string, then a trailing newline.
  Collected s =
      collect_all(llama3_options(), "\n {\"name\":\"g\",\"parameters\":\"{\\\"y\\\": 2}\"}\n");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].arguments, "{\"y\": 2}");
  EXPECT_EQ(s.content, "");
}

TEST(Llama3JsonToolCallParser, SemicolonSeparatedCalls) {
  Collected c = collect_all(
      llama3_options(),
      R"({"name": "a", "parameters": {"q": "x; y"}}; {"name": "b", "parameters": {}};{"name": "c", "parameters": {"n": [1]}})");
  EXPECT_EQ(c.content, "");
  ASSERT_EQ(c.calls.size(), 3u);
  EXPECT_EQ(c.calls[0].name, "a");
  EXPECT_EQ(c.calls[0].arguments, "{\"q\": \"x; y\"}");
  EXPECT_EQ(c.calls[1].name, "b");
  EXPECT_EQ(c.calls[1].arguments, "{}");
  EXPECT_EQ(c.calls[2].arguments, "{\"n\": [1]}");
  EXPECT_NE(c.calls[0].id, c.calls[1].id);
  // A newline instead of ';', and a trailing separator.
  Collected n =
      collect_all(llama3_options(),
                  "{\"name\": \"a\", \"parameters\": {}}\n{\"name\": \"b\", \"parameters\": {}}; ");
  EXPECT_EQ(n.calls.size(), 2u);
  EXPECT_EQ(n.content, "");
}

TEST(Llama3JsonToolCallParser, TextAnswersAreContent) {
  for (const std::string text :
       {"The weather in Paris is sunny.", "  Sure: {\"name\": \"f\", \"parameters\": {}}", "<|eot",
        "<html>", "", " \n", "x"}) {
    Collected c = collect_all(llama3_options(), text);
    EXPECT_TRUE(c.calls.empty()) << text;
    EXPECT_EQ(c.content, text);
  }
  // Text is released at once, not held to the end.
  Llama3JsonToolCallParser p;
  EXPECT_EQ(p.push("Hel").content, "Hel");
  EXPECT_EQ(p.push("lo {").content, "lo {");
}

TEST(Llama3JsonToolCallParser, InvalidJsonIsContent) {
  for (const std::string text :
       {"{not json}", "{\"name\": \"f\"}", "{\"city\": \"Paris\"}",
        "{\"name\": \"\", \"parameters\": {}}", "{\"name\": \"f\", \"param", "[1, 2]", "{"}) {
    Collected c = collect_all(llama3_options(), text);
    EXPECT_TRUE(c.calls.empty()) << text;
    EXPECT_EQ(c.content, text);
  }
  // A valid call then text: the call stays, the text is content.
  Collected t = collect_all(llama3_options(), "{\"name\": \"f\", \"parameters\": {}} Done.");
  ASSERT_EQ(t.calls.size(), 1u);
  EXPECT_EQ(t.content, " Done.");
  // A valid call, then a broken one: the second is content with its separator.
  Collected b = collect_all(llama3_options(), "{\"name\": \"f\", \"parameters\": {}}; {oops}");
  ASSERT_EQ(b.calls.size(), 1u);
  EXPECT_EQ(b.content, "; {oops}");
  // Announced (name and "parameters" read), then broken: the call stays with what was written.
  Collected bad = collect_all(llama3_options(), "{\"name\": \"f\", \"parameters\": {\"a\": 1,}}");
  ASSERT_EQ(bad.calls.size(), 1u);
  EXPECT_EQ(bad.calls[0].arguments, "{\"a\": 1,}");
  EXPECT_EQ(bad.content, "");
  // Announced, then cut off by max_tokens: the call stays with what was written.
  Collected cut = collect_all(llama3_options(), "{\"name\": \"f\", \"parameters\": {\"x\": 1");
  ASSERT_EQ(cut.calls.size(), 1u);
  EXPECT_EQ(cut.calls[0].name, "f");
  EXPECT_EQ(cut.calls[0].arguments, "{\"x\": 1");
}

TEST(Llama3JsonToolCallParser, ArgumentsStreamIncrementally) {
  Llama3JsonToolCallParser p;
  EXPECT_TRUE(p.push("{\"name\": \"f\", ").empty());  // not announced before "parameters"
  auto d1 = p.push("\"parameters\": {\"x\": ");
  ASSERT_EQ(d1.calls.size(), 2u);
  EXPECT_TRUE(d1.calls[0].start);
  EXPECT_EQ(d1.calls[0].name, "f");
  EXPECT_EQ(d1.calls[1].arguments, "{\"x\": ");
  auto d2 = p.push("1}");  // depth tracking: this '}' closes the arguments, not the call
  ASSERT_EQ(d2.calls.size(), 1u);
  EXPECT_EQ(d2.calls[0].arguments, "1}");
  EXPECT_TRUE(p.push("}").empty());
  ASSERT_EQ(p.calls().size(), 1u);
  EXPECT_EQ(p.calls()[0].arguments, "{\"x\": 1}");
  EXPECT_TRUE(p.finish().empty());
}

TEST(Llama3JsonToolCallParser, ForcedPrefixes) {
  const std::string named = tool_call_forced_prefix(ToolCallDialect::kLlama3Json, "get_weather");
  EXPECT_EQ(named, "{\"name\": \"get_weather\", \"parameters\": ");
  Collected c = collect(llama3_options(named), {"{\"city\":", " \"Oslo\"}", "}"});
  EXPECT_EQ(c.content, "");
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_EQ(c.calls[0].name, "get_weather");
  EXPECT_EQ(c.calls[0].arguments, "{\"city\": \"Oslo\"}");
  const std::string required = tool_call_forced_prefix(ToolCallDialect::kLlama3Json, "");
  EXPECT_EQ(required, "{\"name\": \"");
  Collected r = collect(llama3_options(required), {"add\", \"parameters\": {\"a\": 1}}"});
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "add");
  // A forced call that never parses: the prompt's part is not content.
  Collected bad = collect(llama3_options(required), {"oops"});
  EXPECT_TRUE(bad.calls.empty());
  EXPECT_EQ(bad.content, "oops");
  // Hermes prefixes are what they always were.
  EXPECT_EQ(tool_call_forced_prefix(ToolCallDialect::kHermes, ""), "<tool_call>\n{\"name\": \"");
  EXPECT_EQ(tool_call_forced_prefix(ToolCallDialect::kHermes, "f\"x"),
            "<tool_call>\n{\"name\": \"f\\\"x\", \"arguments\": ");
}

// Random replies built from call-shaped fragments: any split gives the one-shot result, and a reply
// without calls comes back as content byte for byte.
TEST(Llama3JsonToolCallParser, RandomRepliesStreamLikeOneShot) {
  const std::vector<std::string> frags = {
      "{", "}", "\"name\"", ": ", "\"f\"", ", ", "\"parameters\"", "\"arguments\"", "{\"a\": 1}",
      "[", "]", ";", " ", "\n", "\"", "\\", "x", "<|python_tag|>", "<|py", "\"}\"", "{\"name\": \"g\", "};
  std::mt19937 rng(5);
  int n_with_calls = 0;
  for (int r = 0; r < 400; ++r) {
    std::string text = r % 3 == 0 ? "{\"name\": \"f\", \"parameters\": " : "";
    for (int k = 0, n = 1 + static_cast<int>(rng() % 12); k < n; ++k) text += frags[rng() % frags.size()];
    Collected c = collect_all(llama3_options(), text);
    if (c.calls.empty()) {
      EXPECT_EQ(c.content, text);
    }
    n_with_calls += !c.calls.empty();
  }
  EXPECT_GE(n_with_calls, 20);
}

// --- dialect names and detection ---

TEST(ToolCallDialect, NamesAndConfig) {
  EXPECT_EQ(parse_tool_call_dialect("hermes"), ToolCallDialect::kHermes);
  EXPECT_EQ(parse_tool_call_dialect("llama3_json"), ToolCallDialect::kLlama3Json);
  EXPECT_STREQ(tool_call_dialect_name(ToolCallDialect::kLlama3Json), "llama3_json");
  try {
    parse_tool_call_dialect("mistral");
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown tool-call parser 'mistral' (expected hermes or "
                                         "llama3_json)"),
              std::string::npos)
        << e.what();
  }
  ServerConfig sc;
  sc.apply_json({{"tool_call_parser", "llama3_json"}});
  EXPECT_EQ(sc.tool_call_parser, "llama3_json");
  EXPECT_NO_THROW(sc.validate());
  sc.tool_call_parser = "pythonic";
  EXPECT_THROW(sc.validate(), InvalidArgument);
  EXPECT_THROW(sc.apply_json({{"tool_call_parser", 3}}), InvalidArgument);
  // The configured name wins over the template.
  const std::string hermes_src = "{{ '<tool_call>' }}";
  EXPECT_EQ(choose_tool_call_dialect("llama3_json", &hermes_src), ToolCallDialect::kLlama3Json);
  EXPECT_EQ(choose_tool_call_dialect("", &hermes_src), ToolCallDialect::kHermes);
  EXPECT_EQ(choose_tool_call_dialect("", nullptr), ToolCallDialect::kHermes);
}

TEST(ToolCallDialect, DetectedFromRealTemplates) {
  namespace fs = std::filesystem;
  const fs::path tok = test::assets_dir() / "tokenizers";
  VELA_SKIP_UNLESS_ASSET(tok / "qwen3" / "tokenizer_config.json");
  VELA_SKIP_UNLESS_ASSET(tok / "llama3_1" / "tokenizer_config.json");
  ChatTemplate qwen3 = ChatTemplate::from_tokenizer_config((tok / "qwen3").string());
  EXPECT_EQ(detect_tool_call_dialect(qwen3.source()), ToolCallDialect::kHermes);
  // The packaged Llama 3.1 tokenizer config carries the short chat template, which renders no
  // tools: no known tool syntax, so the default (hermes) stays.
  ChatTemplate llama31 = ChatTemplate::from_tokenizer_config((tok / "llama3_1").string());
  ASSERT_NE(llama31.source().find("<|start_header_id|>"), std::string::npos);
  EXPECT_EQ(detect_tool_call_dialect(llama31.source()), ToolCallDialect::kHermes);
  // Tool-calling Llama 3.1 templates: the repository's Llama 3.1-style one (renders past calls
  // as {"name": ..., "parameters": ...}) and one using <|python_tag|> for built-in tools.
  std::ifstream in(test::repo_root() /
                   "tests/tokenizer/chat_cases/templates/llama31_style_tools.jinja");
  const std::string style((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(style.empty());
  EXPECT_EQ(detect_tool_call_dialect(style), ToolCallDialect::kLlama3Json);
  EXPECT_EQ(detect_tool_call_dialect("{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}"
                                     "{{- \"<|python_tag|>\" + tool_call.name + \".call(\" }}"),
            ToolCallDialect::kLlama3Json);
  // <tool_call> wins over Llama 3 header tokens; nothing known means hermes.
  EXPECT_EQ(detect_tool_call_dialect("<|start_header_id|> \"parameters\" <tool_call>"),
            ToolCallDialect::kHermes);
  EXPECT_EQ(detect_tool_call_dialect("{{ messages }}"), ToolCallDialect::kHermes);
}

// --- llama3_json grammars ---

json weather_tools(bool strict) {
  return json::parse(std::string(R"([
    {"type":"function","function":{"name":"forecast","strict":)") +
                     (strict ? "true" : "false") +
                     R"(,"parameters":{"type":"object","properties":{
                        "unit":{"enum":["c","f"]},"days":{"type":"integer","minimum":1,"maximum":14},
                        "hourly":{"type":"boolean"}},
                       "required":["unit","days","hourly"],"additionalProperties":false}}},
    {"type":"function","function":{"name":"pick","strict":true,"parameters":{"type":"object",
       "properties":{"ids":{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3}},
       "required":["ids"],"additionalProperties":false}}}])");
}

// The two schemas above, checked by hand.
bool valid_arguments(const std::string& name, const json& a) {
  if (!a.is_object()) return false;
  if (name == "forecast") {
    if (a.size() != 3 || !a.contains("unit") || !a.contains("days") || !a.contains("hourly"))
      return false;
    return (a["unit"] == "c" || a["unit"] == "f") && a["days"].is_number_integer() &&
           a["days"].get<int64_t>() >= 1 && a["days"].get<int64_t>() <= 14 &&
           a["hourly"].is_boolean();
  }
  if (name == "pick") {
    if (a.size() != 1 || !a.contains("ids") || !a["ids"].is_array()) return false;
    if (a["ids"].empty() || a["ids"].size() > 3) return false;
    for (const json& x : a["ids"])
      if (!x.is_number_integer()) return false;
    return true;
  }
  return false;
}

std::shared_ptr<const constrain::TokenVocab> byte_vocab() {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  bytes.push_back("");
  return std::make_shared<constrain::TokenVocab>(bytes, std::vector<int32_t>{256});
}

bool grammar_matches(const Constraint& c, const std::string& text) {
  constrain::GrammarMatcher m(constrain::GrammarCompiler(byte_vocab()).compile(c));
  return m.accept_bytes(text) && m.can_terminate();
}

// A random walk through the grammar over single bytes (quotes and closing brackets favoured so
// outputs stay short, `favour_brace` makes '{' likely at the start), until it may end.
std::string sample(const Constraint& c, uint32_t seed, bool favour_brace = false) {
  constrain::GrammarMatcher m(constrain::GrammarCompiler(byte_vocab()).compile(c));
  std::mt19937 rng(seed);
  std::vector<uint32_t> bits(static_cast<size_t>((257 + 31) / 32));
  std::string out;
  for (int step = 0; step < 3000; ++step) {
    m.fill_next_token_bitmask(bits.data());
    std::vector<std::pair<int, double>> allowed;
    double total = 0;
    for (int id = 0; id <= 256; ++id) {
      if (!(bits[id / 32] >> (id % 32) & 1)) continue;
      double w = 1;
      if (id == 256) w = step > 200 ? 1e6 : 40;
      if (id == '"' || id == '}' || id == ']') w = 60;
      if (id == '{' && favour_brace && out.empty()) w = 1e5;
      allowed.push_back({id, w});
      total += w;
    }
    EXPECT_FALSE(allowed.empty()) << out;
    if (allowed.empty()) break;
    double r = std::uniform_real_distribution<double>(0, total)(rng);
    int pick = allowed.back().first;
    for (auto [id, w] : allowed) {
      if (r < w) {
        pick = id;
        break;
      }
      r -= w;
    }
    if (pick == 256) return out;
    EXPECT_TRUE(m.accept_token(pick));
    out += static_cast<char>(pick);
  }
  ADD_FAILURE() << "the walk did not end: " << out;
  return out;
}

RenderedPrompt llama3_rendered(const ChatPrompt& p) {
  RenderedPrompt rp;
  rp.output.tools = true;
  rp.output.dialect = ToolCallDialect::kLlama3Json;
  if (p.tool_choice == "required")
    rp.output.forced_prefix = tool_call_forced_prefix(ToolCallDialect::kLlama3Json, "");
  if (p.tool_choice == "function")
    rp.output.forced_prefix = tool_call_forced_prefix(ToolCallDialect::kLlama3Json, p.forced_tool);
  return rp;
}

// Parses a sampled reply (after the prefill) as the server does; every call must be valid.
int check_calls(const RenderedPrompt& rp, const std::string& text, const std::string& forced) {
  Collected c = collect(rp.output, {text});
  EXPECT_EQ(c.content, "") << text;
  for (const ToolCall& tc : c.calls) {
    if (!forced.empty()) {
      EXPECT_EQ(tc.name, forced);
    }
    json a = json::parse(tc.arguments, nullptr, false);
    EXPECT_TRUE(valid_arguments(tc.name, a)) << tc.name << " " << tc.arguments << " in " << text;
  }
  return static_cast<int>(c.calls.size());
}

TEST(Llama3JsonToolGrammar, RequiredAndNamedOutputsParseAndMatchTheSchema) {
  ChatPrompt p;
  p.tools = weather_tools(false);  // forced calls are constrained, strict or not
  p.tool_choice = "required";
  RenderedPrompt rp = llama3_rendered(p);
  Constraint c = tool_call_constraint(p, rp, {});
  ASSERT_EQ(c.kind, Constraint::Kind::kToolCalls);
  EXPECT_TRUE(grammar_matches(c,
                              "forecast\", \"parameters\": {\"unit\": \"c\", \"days\": 3, "
                              "\"hourly\": false}}"));
  EXPECT_FALSE(grammar_matches(c,
                               "forecast\", \"arguments\": {\"unit\": \"c\", \"days\": 3, "
                               "\"hourly\": false}}"));  // hermes' key
  EXPECT_FALSE(grammar_matches(c,
                               "forecast\", \"parameters\": {\"unit\": \"k\", \"days\": 3, "
                               "\"hourly\": false}}"));
  EXPECT_FALSE(grammar_matches(c, "pick\", \"parameters\": {\"ids\": []}}"));
  EXPECT_FALSE(grammar_matches(c,
                               "pick\", \"parameters\": {\"ids\": [1]}}; {\"name\": \"pick\", "
                               "\"parameters\": {\"ids\": [2]}}"));  // one call
  int n = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) n += check_calls(rp, sample(c, seed), "");
  EXPECT_EQ(n, 40);
  p.tool_choice = "function";
  p.forced_tool = "pick";
  rp = llama3_rendered(p);
  Constraint named = tool_call_constraint(p, rp, {});
  EXPECT_TRUE(grammar_matches(named, "{\"ids\": [4, 5]}}"));
  EXPECT_FALSE(grammar_matches(named, "{\"ids\": [4, 5]}}\n</tool_call>"));
  n = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) n += check_calls(rp, sample(named, seed), "pick");
  EXPECT_EQ(n, 40);
}

// tool_choice auto with a strict tool: the Llama 3 call is the whole reply, so the lazy grammar
// allows either text whose first non-whitespace byte is not '{', or calls joined by "; ".
TEST(Llama3JsonToolGrammar, StrictToolsUnderAuto) {
  ChatPrompt p;
  p.tools = weather_tools(true);
  RenderedPrompt rp = llama3_rendered(p);
  Constraint c = tool_call_constraint(p, rp, {});
  ASSERT_EQ(c.kind, Constraint::Kind::kToolCalls);
  const std::string call =
      "{\"name\": \"forecast\", \"parameters\": {\"unit\": \"f\", \"days\": 14, \"hourly\": true}}";
  EXPECT_TRUE(grammar_matches(c, "It is sunny."));
  EXPECT_TRUE(grammar_matches(c, "  ok {\"x\": 1}"));
  EXPECT_TRUE(grammar_matches(c, ""));
  EXPECT_TRUE(grammar_matches(c, call));
  EXPECT_TRUE(grammar_matches(c, call + "; {\"name\": \"pick\", \"parameters\": {\"ids\": [1]}}"));
  EXPECT_FALSE(grammar_matches(c, "{\"answer\": 1}"));  // '{' starts a call
  EXPECT_FALSE(grammar_matches(c, " " + call));
  EXPECT_FALSE(grammar_matches(c, "{\"name\": \"forecast\", \"parameters\": {}}"));
  p.parallel_tool_calls = false;
  Constraint single = tool_call_constraint(p, rp, {});
  EXPECT_TRUE(grammar_matches(single, call));
  EXPECT_FALSE(grammar_matches(single, call + "; " + call));
  p.parallel_tool_calls = true;
  // Sampled replies: calls parse and validate; text is content that does not open with '{'.
  int n_calls = 0, n_text = 0;
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    const std::string out = sample(c, seed, /*favour_brace=*/seed % 2 == 0);
    Collected got = collect(rp.output, {out});
    if (got.calls.empty()) {
      ++n_text;
      EXPECT_EQ(got.content, out);
      size_t i = out.find_first_not_of(" \t\n\r");
      EXPECT_TRUE(i == std::string::npos || out[i] != '{') << out;
    } else {
      n_calls += check_calls(rp, out, "");
    }
  }
  std::printf("[llama3_json auto] 60 sampled replies: %d calls (all valid), %d text replies\n",
              n_calls, n_text);
  EXPECT_GE(n_calls, 20);
  EXPECT_GE(n_text, 20);
  // A response_format beside strict tools: the JSON value or the calls.
  Constraint with_format = tool_call_constraint(p, rp, Constraint::json_object());
  EXPECT_TRUE(grammar_matches(with_format, "{\"k\": 1}"));
  EXPECT_FALSE(grammar_matches(with_format, "some text"));
  EXPECT_TRUE(grammar_matches(with_format, call));
}

}  // namespace
}  // namespace vela
