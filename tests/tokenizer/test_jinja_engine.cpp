// Engine-level tests of the Jinja engine: every statement, filter, test and method vela supports,
// each a tiny template with the exact output Python Jinja2 (transformers' environment) gives.
// The cases live in jinja_cases/engine.json; their expectations were produced by Python Jinja2
// 3.1 (tools/jinja_oracle.py fill) and JinjaEngineCases.ExpectationsAreJinja2Output re-checks
// them against Jinja2 on every run.
#include <gtest/gtest.h>

#include <unistd.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "jinja_test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja_interpreter.h"

namespace vela {
namespace {

const json& engine_cases() {
  static const json cases = json::parse(
      test::read_text(test::repo_root() / "tests/tokenizer/jinja_cases/engine.json"));
  return cases;
}

// Renders every case whose name starts with `prefix`; returns how many ran.
int run_cases(const std::string& prefix) {
  int n = 0;
  for (const auto& c : engine_cases()) {
    std::string name = c["name"];
    if (name.rfind(prefix, 0) != 0) continue;
    ++n;
    SCOPED_TRACE("case " + name + ": " + c["template"].get<std::string>());
    std::string out, err;
    try {
      out = jinja::render_string(c["template"], c.value("context", json::object()),
                                 test::fixed_time);
    } catch (const jinja::TemplateError& e) {
      err = "line " + std::to_string(e.line()) + ": " + e.message();
    }
    if (c.contains("error")) {
      EXPECT_NE(err, "") << "expected an error, rendered: " << out;
      EXPECT_NE(err.find(c["error"].get<std::string>()), std::string::npos) << "error: " << err;
    } else {
      EXPECT_EQ(err, "");
      EXPECT_EQ(out, c["expected"].get<std::string>());
    }
  }
  return n;
}

TEST(JinjaEngine, Whitespace) { EXPECT_GE(run_cases("ws_"), 15); }
TEST(JinjaEngine, LiteralsAndPrinting) { EXPECT_GE(run_cases("print_"), 10); }
TEST(JinjaEngine, Expressions) { EXPECT_GE(run_cases("expr_"), 15); }
TEST(JinjaEngine, Statements) { EXPECT_GE(run_cases("stmt_"), 25); }
TEST(JinjaEngine, Filters) { EXPECT_GE(run_cases("filter_"), 30); }
TEST(JinjaEngine, Tests) { EXPECT_GE(run_cases("test_"), 8); }
TEST(JinjaEngine, Methods) { EXPECT_GE(run_cases("method_") + run_cases("percent_"), 10); }
TEST(JinjaEngine, Errors) { EXPECT_GE(run_cases("error_"), 20); }

TEST(JinjaEngine, EveryCaseBelongsToAGroup) {
  for (const auto& c : engine_cases()) {
    std::string name = c["name"];
    bool grouped = false;
    for (const char* p : {"ws_", "print_", "expr_", "stmt_", "filter_", "test_", "method_",
                          "percent_", "error_"})
      grouped = grouped || name.rfind(p, 0) == 0;
    EXPECT_TRUE(grouped) << name;
  }
}

// The committed expectations are real Jinja2 output (and the error cases really fail there).
TEST(JinjaEngineCases, ExpectationsAreJinja2Output) {
  std::string py = test::python_with_jinja2();
  ASSERT_NE(py, "") << "Python jinja2 is missing: it is the oracle for these cases (scripts/setup.sh "
                       "installs python3-jinja2)";
  auto [rc, out] = test::run_command(py + " " + test::quote(test::repo_root() / "tools/jinja_oracle.py") +
                                     " check " +
                                     test::quote(test::repo_root() / "tests/tokenizer/jinja_cases/engine.json") +
                                     " 2>&1");
  EXPECT_EQ(rc, 0) << out;
  std::printf("[jinja2 oracle] %s", out.c_str());
}

// ---- ChatTemplate API ----------------------------------------------------------------------

std::string expect_invalid(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected InvalidArgument";
  return "";
}

TEST(ChatTemplate, SyntaxErrorNamesTheLine) {
  std::string msg = expect_invalid([] { ChatTemplate("a\nb\n{% if x %}\n{{ x + }}\n{% endif %}"); });
  EXPECT_NE(msg.find("syntax error (line 4)"), std::string::npos) << msg;
  msg = expect_invalid([] { ChatTemplate("{{ messages | no_such_filter }}"); });
  EXPECT_NE(msg.find("No filter named 'no_such_filter'"), std::string::npos) << msg;
  msg = expect_invalid([] { ChatTemplate("\n\n{% for m in messages %}"); });
  EXPECT_NE(msg.find("line 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("endfor"), std::string::npos) << msg;
}

TEST(ChatTemplate, RenderErrorsNameTheLine) {
  ChatTemplate t(
      "{% for m in messages %}\n{% if m.role not in ['user', 'assistant'] %}\n"
      "{{ raise_exception('Unsupported role: ' + m.role) }}\n{% endif %}{% endfor %}");
  json msgs = json::parse(R"([{"role": "user", "content": "x"}, {"role": "critic", "content": "y"}])");
  std::string msg = expect_invalid([&] { t.render(msgs, nullptr, false); });
  EXPECT_NE(msg.find("line 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Unsupported role: critic"), std::string::npos) << msg;

  ChatTemplate append("{% set l = [] %}{% for m in messages %}{% set _ = l.append(m) %}{% endfor %}");
  msg = expect_invalid([&] { append.render(msgs, nullptr, false); });
  EXPECT_NE(msg.find("access to attribute 'append' of 'list' object is unsafe"), std::string::npos)
      << msg;

  ChatTemplate method("{{ messages[0].content.no_such_method() }}");
  msg = expect_invalid([&] { method.render(msgs, nullptr, false); });
  EXPECT_NE(msg.find("'str object' has no attribute 'no_such_method'"), std::string::npos) << msg;
}

TEST(ChatTemplate, StandardVariables) {
  ChatTemplate t(
      "{{ messages | length }}|{{ tools is none }}|{{ add_generation_prompt }}|{{ bos_token }}|"
      "{{ eos_token is defined }}|{{ documents is none }}|{{ enable_thinking }}",
      "<s>");
  json msgs = json::parse(R"([{"role": "user", "content": "x"}])");
  EXPECT_EQ(t.render(msgs, nullptr, true, {{"enable_thinking", false}}),
            "1|True|True|<s>|False|True|False");
  json tools = json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  EXPECT_EQ(t.render(msgs, tools, false), "1|False|False|<s>|False|True|");
  expect_invalid([&] { t.render(json::object(), nullptr, false); });
  expect_invalid([&] { t.render(msgs, json::object(), false); });
}

TEST(ChatTemplate, StrftimeNowUsesTheClock) {
  ChatTemplate t("{{ strftime_now('%d %b %Y') }}");
  t.set_clock(test::fixed_time);
  EXPECT_EQ(t.render(json::array(), nullptr, false), "26 Jul 2024");
  ChatTemplate now("{{ strftime_now('%Y') | int > 2000 }}");
  EXPECT_EQ(now.render(json::array(), nullptr, false), "True");
}

TEST(ChatTemplate, ConcurrentRendersAgree) {
  ChatTemplate t(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
      "<{{ m.role }}>{{ m.content | trim }}{% endfor %}{{ ns.n }}");
  json msgs = json::array();
  for (int i = 0; i < 50; ++i) msgs.push_back({{"role", "user"}, {"content", " m" + std::to_string(i)}});
  const std::string expected = t.render(msgs, nullptr, false);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int i = 0; i < 200; ++i) mismatches[k] += t.render(msgs, nullptr, false) != expected;
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

TEST(ChatTemplate, MalformedTemplatesFailCleanly) {
  const char* bad[] = {"{{", "{%", "{% if %}", "{{ ) }}", "{% for %}{% endfor %}", "{{ a[ }}",
                       "{% set %}", "{% macro %}{% endmacro %}", "{{ 'unterminated }}",
                       "{% endif %}", "{% else %}", "{{ 1 + }}", "{{ a.. }}", "{# open",
                       "{% raw %} never closed", "{{ x | }}", "{{ x is }}", "{% call foo %}{% endcall %}",
                       "{% break %}", "{{ {1: } }}", "{{ '\\x4' }}", "{% set a.b.c = 1 %}"};
  for (const char* src : bad) {
    SCOPED_TRACE(src);
    std::string msg = expect_invalid([&] { ChatTemplate t(src); });
    EXPECT_NE(msg.find("line 1"), std::string::npos) << msg;
  }
  ChatTemplate deep("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  std::string msg = expect_invalid([&] { deep.render(json::array(), nullptr, false); });
  EXPECT_NE(msg.find("recursion"), std::string::npos) << msg;
}

TEST(ChatTemplate, FromTokenizerConfigVariants) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("vela_chat_template_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
  };
  write("tokenizer_config.json", R"({
    "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": false},
    "eos_token": "</s>",
    "chat_template": [{"name": "tool_use", "template": "tools"},
                      {"name": "default", "template": "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"}]})");
  json msgs = json::parse(R"([{"role": "user", "content": "hi"}])");
  ChatTemplate t = ChatTemplate::from_tokenizer_config(dir.string());
  EXPECT_EQ(t.render(msgs, nullptr, false), "<s>hi</s>");
  EXPECT_EQ(t.bos_token(), "<s>");
  EXPECT_EQ(ChatTemplate::from_tokenizer_config((dir / "tokenizer_config.json").string())
                .render(msgs, nullptr, false),
            "<s>hi</s>");
  write("chat_template.jinja", "jinja file: {{ messages[0].content }}\n");
  EXPECT_EQ(ChatTemplate::from_tokenizer_config(dir.string()).render(msgs, nullptr, false),
            "jinja file: hi");
  fs::remove(dir / "chat_template.jinja");

  write("tokenizer_config.json", R"({"chat_template": [{"name": "rag", "template": "x"}]})");
  std::string msg = expect_invalid([&] { ChatTemplate::from_tokenizer_config(dir.string()); });
  EXPECT_NE(msg.find("no \"default\" entry (has: rag)"), std::string::npos) << msg;
  write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  msg = expect_invalid([&] { ChatTemplate::from_tokenizer_config(dir.string()); });
  EXPECT_NE(msg.find("has no chat_template"), std::string::npos) << msg;
  write("tokenizer_config.json", R"({"chat_template": )");
  msg = expect_invalid([&] { ChatTemplate::from_tokenizer_config(dir.string()); });
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
  write("tokenizer_config.json", R"({"chat_template": "{% if %}"})");
  msg = expect_invalid([&] { ChatTemplate::from_tokenizer_config(dir.string()); });
  EXPECT_NE(msg.find("syntax error (line 1)"), std::string::npos) << msg;
  EXPECT_THROW(ChatTemplate::from_tokenizer_config((dir / "missing").string()), IoError);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace vela
