// RecordEncoder with the real Qwen3 tokenizer and chat template: text sections and their masks,
// BOS/EOS, chat masks (messages and the instruction/input/output role mapping) equal to rendering
// and tokenizing the assistant parts, whole-text tokenization equality, and bad records.
#include <gtest/gtest.h>

#include <memory>

#include "core/error.h"
#include "data_test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "train/data/record_encoder.h"

namespace vela {
namespace {

const Tokenizer& qwen3() {
  static std::unique_ptr<Tokenizer> t =
      std::make_unique<Tokenizer>(Tokenizer::from_file(test::qwen3_dir()));
  return *t;
}
const ChatTemplate& qwen3_template() {
  static std::unique_ptr<ChatTemplate> t =
      std::make_unique<ChatTemplate>(ChatTemplate::from_tokenizer_config(test::qwen3_dir()));
  return *t;
}

std::vector<int32_t> enc(const std::string& s) { return qwen3().encode(s); }

// The maximal runs of trained tokens, decoded.
std::vector<std::string> trained_runs(const EncodedDoc& d) {
  std::vector<std::string> runs;
  std::vector<int32_t> cur;
  for (size_t i = 0; i <= d.tokens.size(); ++i) {
    if (i < d.tokens.size() && d.mask[i]) {
      cur.push_back(d.tokens[i]);
    } else if (!cur.empty()) {
      runs.push_back(qwen3().decode(cur));
      cur.clear();
    }
  }
  return runs;
}

TEST(RecordEncoder, TextSectionsMaskAndEos) {
  VELA_REQUIRE_QWEN3();
  PreprocessConfig c = PreprocessConfig::from_json(
      {{"tokenizer", test::qwen3_dir()},
       {"sections",
        {{{"field", "title"}, {"train", false}, {"prefix", "# "}, {"suffix", "\n\n"}},
         {{"field", "body"}}}},
       {"eos_token", "<|endoftext|>"}});
  RecordEncoder e(c, qwen3(), nullptr);
  EncodeResult r = e.encode(R"({"title": "Genesis 1", "body": "In the beginning God created."})");
  ASSERT_TRUE(r.ok()) << r.bad_reason << " " << r.detail;
  std::vector<int32_t> title = enc("# Genesis 1\n\n"), body = enc("In the beginning God created.");
  std::vector<int32_t> want = title;
  want.insert(want.end(), body.begin(), body.end());
  want.push_back(*qwen3().token_to_id("<|endoftext|>"));
  EXPECT_EQ(r.doc.tokens, want);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(r.doc.mask[i], i >= title.size() ? 1 : 0) << i;
}

TEST(RecordEncoder, BosAndOptionalSections) {
  VELA_REQUIRE_QWEN3();
  PreprocessConfig c = PreprocessConfig::from_json(
      {{"tokenizer", test::qwen3_dir()},
       {"sections", {{{"field", "note"}, {"optional", true}}, {{"field", "text"}}}},
       {"add_bos", true},
       {"bos_token", "<|endoftext|>"},
       {"add_eos", false}});
  RecordEncoder e(c, qwen3(), nullptr);
  EncodeResult r = e.encode(R"({"text": "Hello, world!"})");
  ASSERT_TRUE(r.ok()) << r.bad_reason;
  std::vector<int32_t> want = {*qwen3().token_to_id("<|endoftext|>"), 9707, 11, 1879, 0};
  EXPECT_EQ(r.doc.tokens, want);
  EXPECT_EQ(r.doc.mask, (std::vector<uint8_t>{0, 1, 1, 1, 1}));
}

TEST(RecordEncoder, BadTextRecords) {
  VELA_REQUIRE_QWEN3();
  PreprocessConfig c = PreprocessConfig::from_json(
      {{"tokenizer", test::qwen3_dir()}, {"eos_token", "<|endoftext|>"}});
  RecordEncoder e(c, qwen3(), nullptr);
  EXPECT_EQ(e.encode("{\"text\": \"unterminated").bad_reason, "invalid_json");
  EXPECT_EQ(e.encode("[1, 2]").bad_reason, "not_an_object");
  EXPECT_EQ(e.encode(R"({"body": "x"})").bad_reason, "missing_field");
  EXPECT_EQ(e.encode(R"({"text": 5})").bad_reason, "wrong_type");
  EXPECT_EQ(e.encode(R"({"text": "\ud800"})").bad_reason, "invalid_json");
}

TEST(RecordEncoder, ConfigNeedsKnownSpecialTokens) {
  VELA_REQUIRE_QWEN3();
  PreprocessConfig d =
      PreprocessConfig::from_json({{"tokenizer", test::qwen3_dir()}, {"eos_token", "<|nope|>"}});
  EXPECT_THROW(RecordEncoder(d, qwen3(), nullptr), InvalidArgument);
  PreprocessConfig b = PreprocessConfig::from_json(
      {{"tokenizer", test::qwen3_dir()}, {"add_bos", true}, {"bos_token", "<|nope|>"}});
  EXPECT_THROW(RecordEncoder(b, qwen3(), nullptr), InvalidArgument);
  PreprocessConfig chat =
      PreprocessConfig::from_json({{"tokenizer", test::qwen3_dir()}, {"format", "chat"}});
  EXPECT_THROW(RecordEncoder(chat, qwen3(), nullptr), InvalidArgument);  // no template
}

// Qwen3, one turn: the trained part is exactly what follows the generation prompt.
TEST(RecordEncoder, ChatSingleTurnMaskMatchesRenderedAssistantPart) {
  VELA_REQUIRE_QWEN3();
  PreprocessConfig c =
      PreprocessConfig::from_json({{"tokenizer", test::qwen3_dir()}, {"format", "chat"}});
  RecordEncoder e(c, qwen3(), &qwen3_template());
  json messages = json::array({{{"role", "system"}, {"content", "You are terse."}},
                               {{"role", "user"}, {"content", "What is 2+2?"}},
                               {{"role", "assistant"}, {"content", "4."}}});
  EncodeResult r = e.encode_record({{"messages", messages}});
  ASSERT_TRUE(r.ok()) << r.bad_reason << " " << r.detail;
  const ChatTemplate& t = qwen3_template();
  std::string full = t.render(messages, nullptr, false);
  std::string prompt = t.render(json::array({messages[0], messages[1]}), nullptr, true);
  ASSERT_EQ(full.compare(0, prompt.size(), prompt), 0);
  std::string answer = full.substr(prompt.size());
  EXPECT_EQ(answer, "<think>\n\n</think>\n\n4.<|im_end|>\n");
  std::vector<int32_t> p = enc(prompt), a = enc(answer);
  std::vector<int32_t> want = p;
  want.insert(want.end(), a.begin(), a.end());
  EXPECT_EQ(r.doc.tokens, want);
  EXPECT_EQ(r.doc.tokens, enc(full));  // piecewise == whole-text tokenization
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(r.doc.mask[i], i >= p.size() ? 1 : 0) << i;
}

// Qwen3, several turns: history turns render without the think block, the last with it; every
// assistant turn (and its <|im_end|>) is trained, nothing else.
TEST(RecordEncoder, ChatMultiTurnMasks) {
  VELA_REQUIRE_QWEN3();
  PreprocessConfig c =
      PreprocessConfig::from_json({{"tokenizer", test::qwen3_dir()}, {"format", "chat"}});
  RecordEncoder e(c, qwen3(), &qwen3_template());
  json messages = json::array({{{"role", "user"}, {"content", "Hi!"}},
                               {{"role", "assistant"}, {"content", "Hello. How can I help?"}},
                               {{"role", "user"}, {"content", "Name a colour."}},
                               {{"role", "assistant"}, {"content", "Blue."}}});
  EncodeResult r = e.encode_record({{"messages", messages}});
  ASSERT_TRUE(r.ok()) << r.bad_reason << " " << r.detail;
  std::string full = qwen3_template().render(messages, nullptr, false);
  EXPECT_EQ(r.doc.tokens, enc(full));
  EXPECT_EQ(trained_runs(r.doc),
            (std::vector<std::string>{"Hello. How can I help?<|im_end|>\n",
                                      "<think>\n\n</think>\n\nBlue.<|im_end|>\n"}));
  // Every trained run equals tokenizing that assistant part on its own.
  std::vector<int32_t> trained;
  for (size_t i = 0; i < r.doc.tokens.size(); ++i)
    if (r.doc.mask[i]) trained.push_back(r.doc.tokens[i]);
  std::vector<int32_t> want = enc("Hello. How can I help?<|im_end|>\n");
  std::vector<int32_t> w2 = enc("<think>\n\n</think>\n\nBlue.<|im_end|>\n");
  want.insert(want.end(), w2.begin(), w2.end());
  EXPECT_EQ(trained, want);
}

// instruction -> system, input -> user, output -> assistant (the seeds' role mapping); empty
// input is left out; enable_thinking=false moves the think block into the (masked) prompt.
TEST(RecordEncoder, ChatRoleMapping) {
  VELA_REQUIRE_QWEN3();
  PreprocessConfig c =
      PreprocessConfig::from_json({{"tokenizer", test::qwen3_dir()},
                                   {"format", "chat"},
                                   {"chat",
                                    {{"instruction_field", "instruction"},
                                     {"input_field", "input"},
                                     {"output_field", "output"},
                                     {"template_vars", {{"enable_thinking", false}}}}}});
  RecordEncoder e(c, qwen3(), &qwen3_template());
  EncodeResult r =
      e.encode(R"({"instruction": "Translate to French.", "input": "cat", "output": "chat"})");
  ASSERT_TRUE(r.ok()) << r.bad_reason << " " << r.detail;
  json messages = json::array({{{"role", "system"}, {"content", "Translate to French."}},
                               {{"role", "user"}, {"content", "cat"}},
                               {{"role", "assistant"}, {"content", "chat"}}});
  json vars = {{"enable_thinking", false}};
  std::string full = qwen3_template().render(messages, nullptr, false, vars);
  std::string prompt =
      qwen3_template().render(json::array({messages[0], messages[1]}), nullptr, true, vars);
  EXPECT_EQ(r.doc.tokens, enc(full));
  EXPECT_EQ(trained_runs(r.doc), std::vector<std::string>{full.substr(prompt.size())});
  EXPECT_EQ(full.substr(prompt.size()), "chat<|im_end|>\n");

  // No user turn: Qwen3 renders the answer without the think block its generation prompt has;
  // the turn starts after the shared "<|im_start|>assistant\n".
  EncodeResult no_input = e.encode(R"({"instruction": "Say hi.", "input": "", "output": "hi"})");
  ASSERT_TRUE(no_input.ok()) << no_input.bad_reason << " " << no_input.detail;
  EXPECT_EQ(trained_runs(no_input.doc), std::vector<std::string>{"hi<|im_end|>\n"});
  EXPECT_EQ(qwen3().decode(no_input.doc.tokens),
            "<|im_start|>system\nSay hi.<|im_end|>\n<|im_start|>assistant\nhi<|im_end|>\n");
}

// A record's tools reach the template (Qwen3 lists them in the system turn, masked).
TEST(RecordEncoder, ChatWithTools) {
  VELA_REQUIRE_QWEN3();
  PreprocessConfig c =
      PreprocessConfig::from_json({{"tokenizer", test::qwen3_dir()}, {"format", "chat"}});
  RecordEncoder e(c, qwen3(), &qwen3_template());
  json rec = json::parse(R"({"tools": [{"type": "function", "function": {"name": "get_time",
      "description": "Current time", "parameters": {"type": "object", "properties": {}}}}],
      "messages": [{"role": "user", "content": "Time?"}, {"role": "assistant", "content": "Noon."}]})");
  EncodeResult r = e.encode_record(rec);
  ASSERT_TRUE(r.ok()) << r.bad_reason << " " << r.detail;
  std::string full = qwen3_template().render(rec["messages"], rec["tools"], false);
  EXPECT_NE(full.find("get_time"), std::string::npos);
  EXPECT_EQ(r.doc.tokens, enc(full));
  EXPECT_EQ(trained_runs(r.doc),
            std::vector<std::string>{"<think>\n\n</think>\n\nNoon.<|im_end|>\n"});
  rec["tools"] = "get_time";
  EXPECT_EQ(e.encode_record(rec).bad_reason, "wrong_type");
}

// Llama 3.1's template: BOS from the template, turns end in <|eot_id|>; the same prefix-rendering
// masks, and piecewise tokenization equals whole-text tokenization here too.
TEST(RecordEncoder, ChatLlama3Masks) {
  std::string dir = (test::assets_dir() / "tokenizers" / "llama3_1").string();
  VELA_SKIP_UNLESS_ASSET(dir + "/tokenizer.json");
  Tokenizer tok = Tokenizer::from_file(dir);
  ChatTemplate tpl = ChatTemplate::from_tokenizer_config(dir);
  PreprocessConfig c = PreprocessConfig::from_json({{"tokenizer", dir}, {"format", "chat"}});
  RecordEncoder e(c, tok, &tpl);
  json messages = json::array({{{"role", "system"}, {"content", "Be brief."}},
                               {{"role", "user"}, {"content", "Hi!"}},
                               {{"role", "assistant"}, {"content", "Hello there."}},
                               {{"role", "user"}, {"content", "Name a colour."}},
                               {{"role", "assistant"}, {"content", "Blue."}}});
  EncodeResult r = e.encode_record({{"messages", messages}});
  ASSERT_TRUE(r.ok()) << r.bad_reason << " " << r.detail;
  std::string full = tpl.render(messages, nullptr, false);
  EXPECT_EQ(full.rfind("<|begin_of_text|>", 0), 0u);
  EXPECT_EQ(r.doc.tokens, tok.encode(full));
  std::vector<std::string> runs;
  std::vector<int32_t> cur;
  for (size_t i = 0; i <= r.doc.tokens.size(); ++i) {
    if (i < r.doc.tokens.size() && r.doc.mask[i]) {
      cur.push_back(r.doc.tokens[i]);
    } else if (!cur.empty()) {
      runs.push_back(tok.decode(cur));
      cur.clear();
    }
  }
  EXPECT_EQ(runs, (std::vector<std::string>{"Hello there.<|eot_id|>", "Blue.<|eot_id|>"}));
}

TEST(RecordEncoder, BadChatRecords) {
  VELA_REQUIRE_QWEN3();
  PreprocessConfig c =
      PreprocessConfig::from_json({{"tokenizer", test::qwen3_dir()}, {"format", "chat"}});
  RecordEncoder e(c, qwen3(), &qwen3_template());
  EXPECT_EQ(e.encode(R"({"text": "x"})").bad_reason, "missing_field");
  EXPECT_EQ(e.encode(R"({"messages": "x"})").bad_reason, "wrong_type");
  EXPECT_EQ(e.encode(R"({"messages": [{"role": "user"}]})").bad_reason, "wrong_type");
  EXPECT_EQ(e.encode(R"({"messages": [{"role": "user", "content": "hi"}]})").bad_reason,
            "no_assistant_turn");
  PreprocessConfig m =
      PreprocessConfig::from_json({{"tokenizer", test::qwen3_dir()},
                                   {"format", "chat"},
                                   {"chat", {{"input_field", "q"}, {"output_field", "a"}}}});
  RecordEncoder em(m, qwen3(), &qwen3_template());
  EXPECT_EQ(em.encode(R"({"q": "hi"})").bad_reason, "missing_field");
  EXPECT_EQ(em.encode(R"({"q": "hi", "a": ""})").bad_reason, "empty");
  EXPECT_EQ(em.encode(R"({"q": "hi", "a": 3})").bad_reason, "wrong_type");
  // A template that raises is a counted bad record, not a crash.
  ChatTemplate raising("{{ raise_exception('no') }}");
  RecordEncoder er(c, qwen3(), &raising);
  EXPECT_EQ(
      er.encode(
            R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]})")
          .bad_reason,
      "template_error");
}

}  // namespace
}  // namespace vela
