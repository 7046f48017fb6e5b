// `vela eval generate` through the Engine on a fixture model: the outputs equal an independent
// greedy decode (Transformer::forward_dense recomputed per token), stop strings cut them, and the
// exact-match / GSM8K / regex / ROUGE-L scores follow from those outputs; few-shot prompts, and the
// errors for malformed records.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/engine.h"
#include "eval/few_shot.h"
#include "eval/generate_task.h"
#include "eval/scorers.h"
#include "eval_test_util.h"

namespace vela::eval {
namespace {

using test::TempModelDir;

constexpr int32_t kMaxTokens = 8;

// Greedy continuation of `prompt` (bytes) until EOS (id 2) or kMaxTokens, decoded.
std::string greedy_text(const Transformer& m, const Tokenizer& tok, const std::string& prompt) {
  std::vector<int32_t> ids = test::bytes_of(prompt), out;
  for (int32_t i = 0; i < kMaxTokens; ++i) {
    const auto t = static_cast<int64_t>(ids.size());
    Tensor logits = m.forward_dense(Tensor::from_vector(ids, {1, t}));  // [1, T, V]
    const int64_t v = logits.size(2);
    const float* last = logits.data<float>() + (t - 1) * v;
    auto next = static_cast<int32_t>(std::max_element(last, last + v) - last);
    if (next == 2) break;
    out.push_back(next);
    ids.push_back(next);
  }
  return tok.decode(out);
}

class EvalGenerate : public ::testing::Test {
 protected:
  TempModelDir dir{"llama_gqa"};
  std::unique_ptr<Engine> engine = Engine::load(dir.dir());
  Transformer model = Transformer::load(dir.dir());
  GenerateOptions options(const std::string& data) {
    GenerateOptions o;
    o.data = data;
    o.max_tokens = kMaxTokens;
    o.stop_given = true;  // no stop strings unless a test sets them
    o.progress = false;
    return o;
  }
};

TEST_F(EvalGenerate, OutputsAreGreedyAndScored) {
  const std::string p0 = "Question: What is 2+2?\nAnswer:", p1 = "Question: Name a color.\nAnswer:";
  const std::string g0 = greedy_text(model, *engine->tokenizer(), p0);
  const std::string g1 = greedy_text(model, *engine->tokenizer(), p1);
  ASSERT_FALSE(g0.empty());
  json ref0 = g0;  // exact match by construction
  std::string f =
      dir.write("qa.jsonl", {json({{"question", "What is 2+2?"}, {"answer", ref0}}).dump(),
                             R"({"question": "Name a color.", "answer": ["zzz", "qqq"]})"});
  json r = run_generate(*engine, nullptr, options(f));
  ASSERT_EQ(r["samples"].size(), 2u);
  EXPECT_EQ(r["samples"][0]["output"], g0);
  EXPECT_EQ(r["samples"][1]["output"], g1);
  EXPECT_EQ(r["samples"][0]["prompt_tokens"], p0.size());
  EXPECT_EQ(r["config"]["scorer"], "exact_match");
  EXPECT_DOUBLE_EQ(r["samples"][0]["score"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(r["samples"][1]["score"].get<double>(),
                   scoring::exact_match(g1, "zzz") || scoring::exact_match(g1, "qqq") ? 1.0 : 0.0);
  EXPECT_DOUBLE_EQ(r["metrics"]["exact_match"].get<double>(),
                   (1.0 + r["samples"][1]["score"].get<double>()) / 2);
  EXPECT_EQ(run_generate(*engine, nullptr, options(f))["samples"], r["samples"]);  // reproducible

  // GSM8K answers ("#### N") pick the gsm8k scorer; the extraction is of the same output.
  std::string gsm =
      dir.write("gsm.jsonl", {R"({"question": "What is 2+2?", "answer": "2+2=4\n#### 4"})"});
  json rg = run_generate(*engine, nullptr, options(gsm));
  EXPECT_EQ(rg["config"]["scorer"], "gsm8k");
  auto extracted = scoring::extract_gsm8k_answer(g0);
  EXPECT_EQ(rg["samples"][0]["extracted"], extracted ? json(*extracted) : json(nullptr));
  EXPECT_DOUBLE_EQ(rg["metrics"]["exact_match"].get<double>(), extracted == "4" ? 1.0 : 0.0);

  // Regex: the first character of the output, against a reference that is that character.
  std::string rx = dir.write(
      "rx.jsonl", {json({{"question", "What is 2+2?"}, {"answer", g0.substr(0, 1)}}).dump()});
  GenerateOptions o = options(rx);
  o.scorer = "regex";
  o.regex = "(?s)^(.)";
  json rr = run_generate(*engine, nullptr, o);
  EXPECT_EQ(rr["samples"][0]["extracted"], g0.substr(0, 1));
  EXPECT_DOUBLE_EQ(rr["metrics"]["exact_match"].get<double>(),
                   scoring::exact_match(g0.substr(0, 1), g0.substr(0, 1)) ? 1.0 : 0.0);

  // ROUGE-L against a fixed reference.
  o = options(f);
  o.scorer = "rouge_l";
  json rl = run_generate(*engine, nullptr, o);
  double want = (scoring::rouge_l_f1(g0, g0) +
                 std::max(scoring::rouge_l_f1(g1, "zzz"), scoring::rouge_l_f1(g1, "qqq"))) /
                2;
  EXPECT_NEAR(rl["metrics"]["rouge_l"].get<double>(), want, 1e-12);
}

TEST_F(EvalGenerate, StopStringsCutTheOutput) {
  const std::string p0 = "Question: What is 2+2?\nAnswer:";
  const std::string g0 = greedy_text(model, *engine->tokenizer(), p0);
  ASSERT_GE(g0.size(), 4u);
  const std::string stop = g0.substr(2, 2);
  std::string f = dir.write("qa.jsonl", {R"({"question": "What is 2+2?", "answer": "4"})"});
  GenerateOptions o = options(f);
  o.stop = {stop};
  json r = run_generate(*engine, nullptr, o);
  EXPECT_EQ(r["samples"][0]["output"], g0.substr(0, g0.find(stop)));
  EXPECT_EQ(r["samples"][0]["finish_reason"], "stop");
}

TEST_F(EvalGenerate, FewShotPromptAndTemplate) {
  std::string dev =
      dir.write("dev.jsonl", {R"({"q": "1+1", "a": "2"})", R"({"q": "2+5", "a": "7"})"});
  std::string f = dir.write("t.jsonl", {R"({"q": "3+3", "a": "6"})"});
  GenerateOptions o = options(f);
  o.prompt_template = "Q: {q}\nA:";
  o.target_field = "a";
  o.fewshot_file = dev;
  o.num_fewshot = 1;
  o.seed = 11;
  json r = run_generate(*engine, nullptr, o);
  const std::vector<std::string> shots = {"Q: 1+1\nA: 2\n\n", "Q: 2+5\nA: 7\n\n"};
  const std::string prompt = shots[select_few_shot(2, 1, 11, 0, -1)[0]] + "Q: 3+3\nA:";
  EXPECT_EQ(r["samples"][0]["prompt_tokens"], prompt.size());
  EXPECT_EQ(r["samples"][0]["output"], greedy_text(model, *engine->tokenizer(), prompt));
  EXPECT_EQ(r["samples"][0]["references"], json::array({"6"}));
}

TEST_F(EvalGenerate, MalformedRecordsNameTheRecord) {
  auto expect_error = [&](const std::vector<std::string>& lines, const std::string& what) {
    std::string f = dir.write("bad.jsonl", lines);
    try {
      run_generate(*engine, nullptr, options(f));
      ADD_FAILURE() << "no error for " << what;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_error({R"({"question": "a", "answer": "b"})", R"({"question": "c"})"},
               "bad.jsonl:2: no reference field");
  expect_error({R"({"answer": "b"})"}, "bad.jsonl:1: no prompt field");
  expect_error({R"({"question": "a", "answer": {"x": 1}})"},
               "bad.jsonl:1: field 'answer': expected a string, number or list");
  expect_error({R"({"question": "a", "answer": []})"},
               "bad.jsonl:1: field 'answer': the list of references is empty");
  expect_error({R"({"question": "a", "answer": "b"}  x)"}, "bad.jsonl:1: invalid JSON");
  GenerateOptions o = options(dir.write("ok.jsonl", {R"({"question": "a", "answer": "b"})"}));
  o.prompt_template = "{missing}";
  EXPECT_THROW(run_generate(*engine, nullptr, o), InvalidArgument);
  o = options(o.data);
  o.scorer = "bleu";
  EXPECT_THROW(run_generate(*engine, nullptr, o), InvalidArgument);
  o.scorer = "regex";
  o.regex = "(unclosed";
  EXPECT_THROW(run_generate(*engine, nullptr, o), InvalidArgument);
}

}  // namespace
}  // namespace vela::eval
