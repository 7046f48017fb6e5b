// Output parsers: <think> reasoning and Hermes <tool_call> blocks, in one piece, byte by byte, and
// token by token through the real Qwen3 tokenizer (as the engine streams); streamed deltas must
// add up to the one-shot result, and malformed calls must come back as content.
#include <gtest/gtest.h>

#include "core/json.h"
#include "server/chat_output.h"
#include "server/hermes_tool_call_parser.h"
#include "server/reasoning_parser.h"
#include "server_test_util.h"

namespace vela {
namespace {

using test::Collected;

Collected collect(const ChatOutputOptions& opts, const std::vector<std::string>& pieces) {
  ChatOutputParser p(opts);
  Collected c = test::collect_deltas(p, pieces);
  // The accumulated view agrees with the deltas.
  EXPECT_EQ(p.reasoning(), c.reasoning);
  return c;
}

std::vector<std::string> bytes(const std::string& s) {
  std::vector<std::string> v;
  for (char ch : s) v.emplace_back(1, ch);
  return v;
}

// Every way of splitting a text must give the same result.
std::vector<std::vector<std::string>> splits(const std::string& text) {
  std::vector<std::vector<std::string>> all = {{text}, bytes(text)};
  if (const Tokenizer* tok = test::qwen3_tokenizer()) all.push_back(test::token_pieces(*tok, text));
  return all;
}

TEST(ReasoningParser, SplitsThinkSection) {
  const std::string text = "<think>\nLet me think.\n</think>\n\nThe answer is 4.";
  for (const auto& pieces : splits(text)) {
    ChatOutputOptions o;
    o.reasoning = true;
    Collected c = collect(o, pieces);
    EXPECT_EQ(c.reasoning, "\nLet me think.\n");
    EXPECT_EQ(c.content, "The answer is 4.");
  }
}

TEST(ReasoningParser, NoThinkIsContentAndUnterminatedIsReasoning) {
  ChatOutputOptions o;
  o.reasoning = true;
  for (const auto& pieces : splits("Just an answer < with a bracket")) {
    Collected c = collect(o, pieces);
    EXPECT_EQ(c.reasoning, "");
    EXPECT_EQ(c.content, "Just an answer < with a bracket");
  }
  for (const auto& pieces : splits("<think>still thinking </thi")) {
    Collected c = collect(o, pieces);
    EXPECT_EQ(c.reasoning, "still thinking </thi");
    EXPECT_EQ(c.content, "");
  }
  o.reasoning_open = true;  // the prompt opened <think>
  for (const auto& pieces : splits("hmm</think>ok")) {
    Collected c = collect(o, pieces);
    EXPECT_EQ(c.reasoning, "hmm");
    EXPECT_EQ(c.content, "ok");
  }
}

TEST(ToolCallParser, QwenToolCallsStreamedEqualOneShot) {
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\", \"units\": {\"temp\": \"C\"}, \"days\": [1, 2]}}\n</tool_call>\n<tool_call>\n"
      "{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  for (const auto& pieces : splits(text)) {
    ChatOutputOptions o;
    o.tools = true;
    Collected c = collect(o, pieces);
    EXPECT_EQ(c.content, "Let me check.\n\n");
    ASSERT_EQ(c.calls.size(), 2u);
    EXPECT_EQ(c.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(c.calls[0].arguments),
              json::parse(R"({"city": "Paris", "units": {"temp": "C"}, "days": [1, 2]})"));
    EXPECT_EQ(c.calls[1].name, "get_time");
    EXPECT_EQ(c.calls[1].arguments, "{}");
    EXPECT_EQ(c.calls[0].id.rfind("call_", 0), 0u);
    EXPECT_NE(c.calls[0].id, c.calls[1].id);
  }
}

TEST(ToolCallParser, ArgumentsStreamIncrementally) {
  // The name is announced before the arguments are complete, and arguments arrive in pieces.
  HermesToolCallParser p;
  auto d1 = p.push("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": ");
  ASSERT_EQ(d1.calls.size(), 2u);
  EXPECT_TRUE(d1.calls[0].start);
  EXPECT_EQ(d1.calls[0].name, "f");
  EXPECT_EQ(d1.calls[1].arguments, "{\"x\":");  // trailing space held back
  auto d2 = p.push("1}");
  ASSERT_EQ(d2.calls.size(), 1u);
  EXPECT_EQ(d2.calls[0].arguments, " 1");  // the '}' may close the outer object: held
  auto d3 = p.push("}\n</tool_call>");
  ASSERT_EQ(d3.calls.size(), 1u);
  EXPECT_EQ(d3.calls[0].arguments, "}");
  ASSERT_EQ(p.calls().size(), 1u);
  EXPECT_EQ(p.calls()[0].arguments, "{\"x\": 1}");
}

TEST(ToolCallParser, OtherShapes) {
  ChatOutputOptions o;
  o.tools = true;
  // Arguments as a JSON string, "parameters" instead of "arguments", arguments before the name.
  for (const auto& pieces :
       splits("<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>")) {
    Collected c = collect(o, pieces);
    ASSERT_EQ(c.calls.size(), 1u);
    EXPECT_EQ(c.calls[0].arguments, "{\"a\": 1}");
  }
  for (const auto& pieces :
       splits("<tool_call>{\"arguments\": {\"a\": 2}, \"name\": \"g\"}</tool_call>")) {
    Collected c = collect(o, pieces);
    ASSERT_EQ(c.calls.size(), 1u);
    EXPECT_EQ(c.calls[0].name, "g");
    EXPECT_EQ(json::parse(c.calls[0].arguments), json::parse(R"({"a": 2})"));
  }
  for (const auto& pieces :
       splits("<tool_call>{\"name\": \"h\", \"parameters\": {\"b\": 3}}</tool_call>")) {
    Collected c = collect(o, pieces);
    ASSERT_EQ(c.calls.size(), 1u);
    EXPECT_EQ(json::parse(c.calls[0].arguments), json::parse(R"({"b": 3})"));
  }
}

TEST(ToolCallParser, MalformedBlocksAreContent) {
  ChatOutputOptions o;
  o.tools = true;
  for (const std::string& text : {std::string("a <tool_call>not json</tool_call> b"),
                                  std::string("<tool_call>{\"nam"), std::string("x <tool_ca")}) {
    for (const auto& pieces : splits(text)) {
      Collected c = collect(o, pieces);
      EXPECT_TRUE(c.calls.empty()) << text;
      EXPECT_EQ(c.content, text);
    }
  }
  // Announced, then cut off by max_tokens: the call stays, with what was written.
  for (const auto& pieces : splits("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1")) {
    Collected c = collect(o, pieces);
    ASSERT_EQ(c.calls.size(), 1u);
    EXPECT_EQ(c.calls[0].name, "f");
    EXPECT_EQ(c.calls[0].arguments, "{\"x\": 1");
  }
}

TEST(ChatOutputParser, ReasoningThenToolCall) {
  const std::string text =
      "<think>\nneed weather\n</think>\n\n<tool_call>\n{\"name\": \"w\", \"arguments\": "
      "{\"c\": \"P\"}}\n</tool_call>";
  for (const auto& pieces : splits(text)) {
    ChatOutputOptions o;
    o.tools = o.reasoning = true;
    Collected c = collect(o, pieces);
    EXPECT_EQ(c.reasoning, "\nneed weather\n");
    EXPECT_EQ(c.content, "");
    ASSERT_EQ(c.calls.size(), 1u);
    EXPECT_EQ(c.calls[0].arguments, "{\"c\": \"P\"}");
  }
}

TEST(ChatOutputParser, ForcedPrefixAnnouncesTheNamedCall) {
  ChatOutputOptions o;
  o.tools = true;
  o.forced_prefix = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ";
  Collected c = collect(o, {"{\"city\":", " \"Oslo\"}}", "\n</tool_call>"});
  EXPECT_EQ(c.content, "");
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_EQ(c.calls[0].name, "get_weather");
  EXPECT_EQ(c.calls[0].arguments, "{\"city\": \"Oslo\"}");
  // tool_choice "required" whose output never names a tool: the prompt's part is not content.
  o.forced_prefix = "<tool_call>\n{\"name\": \"";
  Collected bad = collect(o, {"oops"});
  EXPECT_TRUE(bad.calls.empty());
  EXPECT_EQ(bad.content, "oops");
}

TEST(ToolCallParser, NoToolsMeansPlainText) {
  ChatOutputOptions o;
  Collected c = collect(o, {"<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"});
  EXPECT_TRUE(c.calls.empty());
  EXPECT_EQ(c.content, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
}

TEST(PartialTagSuffix, Basics) {
  EXPECT_EQ(partial_tag_suffix("abc<thi", "<think>"), 4u);
  EXPECT_EQ(partial_tag_suffix("abc", "<think>"), 0u);
  EXPECT_EQ(partial_tag_suffix("<think>", "<think>"), 0u);  // complete tags are not partial
  EXPECT_EQ(partial_tag_suffix("", "<think>"), 0u);
}

}  // namespace
}  // namespace vela

#include "engine/constrain/grammar_compiler.h"
#include "engine/constrain/token_vocab.h"
#include "server/chat_prompt.h"

namespace vela {
namespace {

json two_tools(bool strict_first) {
  return json::parse(std::string(R"([
    {"type":"function","function":{"name":"a","strict":)") + (strict_first ? "true" : "false") +
                     R"(,"parameters":{"type":"object","properties":{"x":{"type":"integer"}},
                       "required":["x"],"additionalProperties":false}}},
    {"type":"function","function":{"name":"b","parameters":{"type":"object","properties":{"y":{"type":"string"}},"required":["y"]}}}])");
}

bool grammar_matches(const Constraint& c, const std::string& text) {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  bytes.push_back("");
  auto vocab = std::make_shared<constrain::TokenVocab>(bytes, std::vector<int32_t>{256});
  constrain::GrammarMatcher m(constrain::GrammarCompiler(vocab).compile(c));
  return m.accept_bytes(text) && m.can_terminate();
}

// tool_choice auto: constrained lazily when a tool is strict (the strict one by its schema, the
// others as any object), unconstrained otherwise; response_format becomes the text alternative.
TEST(ToolCallConstraint, StrictToolsUnderAutoAreLazy) {
  ChatPrompt p;
  p.tools = two_tools(true);
  RenderedPrompt rp;
  rp.output.tools = true;
  Constraint c = tool_call_constraint(p, rp, {});
  ASSERT_EQ(c.kind, Constraint::Kind::kToolCalls);
  const json spec = json::parse(c.text);
  EXPECT_TRUE(spec["lazy"].get<bool>());
  EXPECT_TRUE(spec["parallel"].get<bool>());
  const std::string call_a = "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>";
  EXPECT_TRUE(grammar_matches(c, "some text"));
  EXPECT_TRUE(grammar_matches(c, "ok " + call_a));
  EXPECT_FALSE(grammar_matches(c, "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_TRUE(grammar_matches(c, "<tool_call>\n{\"name\": \"b\", \"arguments\": {\"z\": 2}}\n</tool_call>"));
  Constraint with_format = tool_call_constraint(p, rp, Constraint::json_object());
  EXPECT_TRUE(grammar_matches(with_format, "{\"k\": 1}"));
  EXPECT_FALSE(grammar_matches(with_format, "some text"));
  EXPECT_TRUE(grammar_matches(with_format, call_a));
  EXPECT_EQ(tool_call_constraint(p, rp, Constraint::regex("a+")).kind, Constraint::Kind::kRegex);
  p.parallel_tool_calls = false;
  EXPECT_FALSE(grammar_matches(tool_call_constraint(p, rp, {}), call_a + "\n" + call_a));
  p.tools = two_tools(false);  // nothing strict: auto stays free
  EXPECT_FALSE(tool_call_constraint(p, rp, {}).active());
  p.tool_choice = "none";
  rp.output.tools = false;
  p.tools = two_tools(true);
  EXPECT_FALSE(tool_call_constraint(p, rp, {}).active());
}

}  // namespace
}  // namespace vela
