// Chat templates against real oracles: the conversations in chat_cases/conversations.json (Qwen3
// with tools / tool calls / tool responses / thinking on and off, the Llama 3 and 3.1 templates,
// and two templates written for these tests) rendered by vela must equal, byte for byte, what
// @huggingface/jinja 0.5.11 (node) and Python Jinja2 in transformers' setup render. Both oracles
// run at test time; a missing oracle or asset fails the test with the command to fix it.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/error.h"
#include "jinja_test_util.h"
#include "tokenizer/chat_template.h"

namespace vela {
namespace {

namespace fs = std::filesystem;

fs::path cases_path() { return test::repo_root() / "tests/tokenizer/chat_cases/conversations.json"; }

const json& spec() {
  static const json s = json::parse(test::read_text(cases_path()));
  return s;
}

// The tokenizer configs every oracle test renders with; a test skips unless all are there (a macro:
// a skip only takes effect in the test body).
#define REQUIRE_TEMPLATE_ASSETS()                                                     \
  do {                                                                                \
    for (const char* t : {"qwen3", "llama3_1", "llama3"})                             \
      VELA_SKIP_UNLESS_ASSET(test::assets_dir() / "tokenizers" / t / "tokenizer_config.json"); \
  } while (0)

std::map<std::string, ChatTemplate> load_templates() {
  std::map<std::string, ChatTemplate> out;
  for (const auto& [name, t] : spec()["templates"].items()) {
    if (t.contains("config")) {
      out.emplace(name, ChatTemplate::from_tokenizer_config(
                            (test::assets_dir() / "tokenizers" / t["config"].get<std::string>()).string()));
    } else {
      out.emplace(name, ChatTemplate(test::read_text(cases_path().parent_path() / t["file"].get<std::string>()),
                                     t.value("bos_token", ""), t.value("eos_token", "")));
    }
    out.at(name).set_clock(test::fixed_time);
  }
  return out;
}

// Renders every case with vela and compares it with the oracle's JSON output.
void compare_with_oracle(const std::string& oracle_name, const std::string& oracle_stdout) {
  json expected;
  try {
    expected = json::parse(oracle_stdout);
  } catch (const json::exception& e) {
    FAIL() << oracle_name << " printed no JSON: " << oracle_stdout.substr(0, 2000);
  }
  auto templates = load_templates();
  int n_match = 0, n_cases = 0;
  for (const auto& c : spec()["cases"]) {
    std::string name = c["name"];
    ++n_cases;
    SCOPED_TRACE("conversation " + name);
    ASSERT_TRUE(expected.contains(name)) << oracle_name << " did not render " << name;
    const json& want = expected[name];
    std::string got, err;
    try {
      got = templates.at(c["template"]).render(c["messages"], c["tools"], c["add_generation_prompt"],
                                               c.value("extra", json::object()));
    } catch (const InvalidArgument& e) {
      err = e.what();
    }
    if (want.is_object()) {  // the oracle raised: vela must raise the same message
      std::string msg = want["error"];
      bool ok = !err.empty() && err.find(msg) != std::string::npos;
      EXPECT_TRUE(ok) << oracle_name << " raised \"" << msg << "\"; vela: "
                      << (err.empty() ? "rendered " + got : err);
      n_match += ok;
    } else {
      EXPECT_EQ(err, "");
      EXPECT_EQ(got, want.get<std::string>());
      n_match += err.empty() && got == want.get<std::string>();
    }
  }
  std::printf("[%s] %d/%d conversations identical, %d mismatches\n", oracle_name.c_str(), n_match,
              n_cases, n_cases - n_match);
}

TEST(ChatTemplateOracle, HasEnoughConversations) {
  EXPECT_GE(spec()["cases"].size(), 30u);
  int qwen3_tools = 0, llama = 0;
  for (const auto& c : spec()["cases"]) {
    std::string t = c["template"];
    qwen3_tools += t == "qwen3" && !c["tools"].is_null();
    llama += t.rfind("llama3", 0) == 0;
  }
  EXPECT_GE(qwen3_tools, 8);
  EXPECT_GE(llama, 8);
}

TEST(ChatTemplateOracle, MatchesHuggingFaceJinja) {
  REQUIRE_TEMPLATE_ASSETS();
  fs::path node_modules = test::assets_dir() / "node_modules";
  VELA_SKIP_UNLESS_ASSET(node_modules / "@huggingface/jinja/package.json");
  ASSERT_EQ(test::run_command("node --version >/dev/null 2>&1").first, 0)
      << "node is missing: it runs the @huggingface/jinja oracle (scripts/setup.sh installs nodejs)";
  auto [rc, out] = test::run_command("NODE_PATH=" + test::quote(node_modules) + " node " +
                                     test::quote(test::repo_root() / "tools/jinja_oracle_hf.js") +
                                     " " + test::quote(cases_path()) + " " +
                                     test::quote(test::assets_dir()));
  ASSERT_EQ(rc, 0) << "the @huggingface/jinja oracle failed: " << out;
  compare_with_oracle("@huggingface/jinja", out);
}

TEST(ChatTemplateOracle, MatchesPythonJinja2) {
  REQUIRE_TEMPLATE_ASSETS();
  std::string py = test::python_with_jinja2();
  ASSERT_NE(py, "") << "Python jinja2 is missing: it is the second oracle (scripts/setup.sh installs "
                       "python3-jinja2)";
  auto [rc, out] = test::run_command(py + " " + test::quote(test::repo_root() / "tools/jinja_oracle.py") +
                                     " chat " + test::quote(cases_path()) + " " +
                                     test::quote(test::assets_dir()));
  ASSERT_EQ(rc, 0) << "the Python Jinja2 oracle failed: " << out;
  compare_with_oracle("python jinja2", out);
}

// The real Qwen3 template, checked by hand-written expectations too (independent of oracles).
TEST(ChatTemplateOracle, Qwen3ThinkingSwitch) {
  REQUIRE_TEMPLATE_ASSETS();
  ChatTemplate t = ChatTemplate::from_tokenizer_config((test::assets_dir() / "tokenizers/qwen3").string());
  json msgs = json::parse(R"([{"role": "user", "content": "Hi"}])");
  EXPECT_EQ(t.render(msgs, nullptr, true, {{"enable_thinking", false}}),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(t.render(msgs, nullptr, true), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

// GPT-4o's tokenizer_config.json ships no chat template: a clear error.
TEST(ChatTemplateOracle, Gpt4oHasNoTemplate) {
  fs::path p = test::assets_dir() / "tokenizers/gpt4o";
  VELA_SKIP_UNLESS_ASSET(p / "tokenizer_config.json");
  try {
    ChatTemplate::from_tokenizer_config(p.string());
    FAIL() << "expected an error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("has no chat_template"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vela
