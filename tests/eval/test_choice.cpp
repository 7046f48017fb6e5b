// `vela eval choice` on small files in the public MMLU / ARC / HellaSwag layouts: the prompts are
// written out here by hand (lm-evaluation-harness's formats), their log-likelihoods computed
// independently through Transformer::forward_dense, and acc / acc_norm derived from those; then
// few-shot selection, the chat template and the errors for malformed records.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "eval/choice_task.h"
#include "eval/few_shot.h"
#include "eval_test_util.h"
#include "tokenizer/tokenizer.h"

namespace vela::eval {
namespace {

using test::TempModelDir;

constexpr int64_t kContext = 64;  // the fixtures' max_position_embeddings

// The independent log-likelihood of `cont` after `context` (byte tokens; the context cut from the
// left to fit, as lm-eval does).
double expected_ll(const Transformer& m, const std::string& context, const std::string& cont) {
  auto ctx = test::bytes_of(context);
  auto c = test::bytes_of(cont);
  if (static_cast<int64_t>(ctx.size() + c.size()) > kContext)
    ctx.erase(ctx.begin(), ctx.end() - (kContext - static_cast<int64_t>(c.size())));
  const size_t first = ctx.size();
  ctx.insert(ctx.end(), c.begin(), c.end());
  return test::dense_loglikelihood(m, ctx, first);
}

struct Expected {
  std::string context;
  std::vector<std::string> choices;  // as scored, without the delimiter
  int32_t gold;
};

// Checks the result's per-document log-likelihoods and the metrics against `want`.
void check(const Transformer& m, const json& r, const std::vector<Expected>& want,
           const std::string& delimiter = " ") {
  ASSERT_EQ(r["samples"].size(), want.size());
  double acc = 0, acc_norm = 0;
  for (size_t d = 0; d < want.size(); ++d) {
    std::vector<double> ll;
    int32_t best = 0, best_norm = 0;
    for (size_t c = 0; c < want[d].choices.size(); ++c) {
      ll.push_back(expected_ll(m, want[d].context, delimiter + want[d].choices[c]));
      EXPECT_NEAR(r["samples"][d]["logprobs"][c].get<double>(), ll[c], 1e-4)
          << "document " << d << " choice " << c;
      auto norm = [&](size_t i) { return ll[i] / static_cast<double>(want[d].choices[i].size()); };
      if (ll[c] > ll[static_cast<size_t>(best)]) best = static_cast<int32_t>(c);
      if (norm(c) > norm(static_cast<size_t>(best_norm))) best_norm = static_cast<int32_t>(c);
    }
    EXPECT_EQ(r["samples"][d]["gold"], want[d].gold) << "document " << d;
    EXPECT_EQ(r["samples"][d]["pred"], best) << "document " << d;
    EXPECT_EQ(r["samples"][d]["pred_norm"], best_norm) << "document " << d;
    acc += best == want[d].gold;
    acc_norm += best_norm == want[d].gold;
  }
  const auto n = static_cast<double>(want.size());
  EXPECT_DOUBLE_EQ(r["metrics"]["acc"].get<double>(), acc / n);
  EXPECT_DOUBLE_EQ(r["metrics"]["acc_norm"].get<double>(), acc_norm / n);
}

class EvalChoice : public ::testing::Test {
 protected:
  TempModelDir dir{"qwen3_qknorm"};
  Transformer model = Transformer::load(dir.dir());
  Tokenizer tok = Tokenizer::from_file(dir.dir());
  json run(const std::string& file, const std::string& format = "auto",
           const ChatTemplate* chat = nullptr) {
    ChoiceOptions o;
    o.data = file;
    o.format = format;
    o.progress = false;
    return run_choice(model, tok, chat, o);
  }
};

TEST_F(EvalChoice, MmluLayout) {
  std::string f = dir.write(
      "mmlu.jsonl",
      {R"({"question": "2+2=?", "subject": "math", "choices": ["3", "4", "5", "6"], "answer": 1})",
       R"({"question": " Red+blue? ", "choices": ["pink", "purple", "gold", "teal"], "answer": "B"})",
       R"({"question": "1*0?", "choices": ["0", "1", "10", "none"], "answer": 0})"});
  json r = run(f);
  const std::string desc =
      "The following are multiple choice questions (with answers) about math.\n\n";
  check(model, r,
        {{desc + "2+2=?\nA. 3\nB. 4\nC. 5\nD. 6\nAnswer:", {"A", "B", "C", "D"}, 1},
         {"Red+blue?\nA. pink\nB. purple\nC. gold\nD. teal\nAnswer:", {"A", "B", "C", "D"}, 1},
         {"1*0?\nA. 0\nB. 1\nC. 10\nD. none\nAnswer:", {"A", "B", "C", "D"}, 0}});
  EXPECT_EQ(r["samples"][0]["format"], "mmlu");
  EXPECT_EQ(r["subjects"]["math"]["n"], 1);
}

TEST_F(EvalChoice, ArcLayout) {
  std::string f = dir.write(
      "arc.jsonl",
      {R"({"id": "Q1", "question": "Sky color?", "choices": {"text": ["blue", "green", "red"], "label": ["A", "B", "C"]}, "answerKey": "A"})",
       R"({"id": "Q2", "question": "Ice is?", "choices": {"text": ["hot", "cold", "loud", "soft"], "label": ["1", "2", "3", "4"]}, "answerKey": "2"})"});
  json r = run(f);
  check(model, r,
        {{"Question: Sky color?\nAnswer:", {"blue", "green", "red"}, 0},
         {"Question: Ice is?\nAnswer:", {"hot", "cold", "loud", "soft"}, 1}});
}

TEST_F(EvalChoice, HellaswagLayout) {
  std::string f = dir.write(
      "hs.jsonl",
      {R"({"ind": 4, "activity_label": "Cooking", "ctx_a": "A man cuts bread.", "ctx_b": "he THEN", "ctx": "unused", "endings": ["eats it.", "sings [title] loudly", "runs  away [step]", "sleeps."], "label": "0"})",
       R"({"ctx": "The dog", "endings": ["barks.", "meows loudly."], "label": 1})"});
  json r = run(f);
  check(model, r,
        {{"Cooking: A man cuts bread. He then",
          {"eats it.", "sings. loudly", "runs away ", "sleeps."},
          0},
         {"The dog", {"barks.", "meows loudly."}, 1}});
}

TEST_F(EvalChoice, FewShotIsSeededPerDocument) {
  std::string dev =
      dir.write("dev.jsonl", {R"({"question": "3-1?", "choices": ["2", "1"], "answer": 0})",
                              R"({"question": "5-5?", "choices": ["5", "0"], "answer": 1})",
                              R"({"question": "9/3?", "choices": ["3", "6"], "answer": "A"})"});
  std::string test =
      dir.write("test.jsonl", {R"({"question": "1+1?", "choices": ["2", "3"], "answer": 0})",
                               R"({"question": "2*3?", "choices": ["5", "6"], "answer": 1})"});
  const std::vector<std::string> shot_text = {"3-1?\nA. 2\nB. 1\nAnswer: A\n\n",
                                              "5-5?\nA. 5\nB. 0\nAnswer: B\n\n",
                                              "9/3?\nA. 3\nB. 6\nAnswer: A\n\n"};
  const std::vector<std::string> query = {"1+1?\nA. 2\nB. 3\nAnswer:", "2*3?\nA. 5\nB. 6\nAnswer:"};
  for (uint64_t seed : {1u, 2u}) {
    ChoiceOptions o;
    o.data = test;
    o.fewshot_file = dev;
    o.num_fewshot = 2;
    o.seed = seed;
    o.progress = false;
    json r = run_choice(model, tok, nullptr, o);
    std::vector<Expected> want;
    for (size_t d = 0; d < 2; ++d) {
      std::string ctx;
      for (size_t s : select_few_shot(3, 2, seed, d, -1)) ctx += shot_text[s];
      want.push_back({ctx + query[d], {"A", "B"}, static_cast<int32_t>(d)});
    }
    check(model, r, want);
    EXPECT_EQ(run_choice(model, tok, nullptr, o)["samples"], r["samples"]);  // reproducible
  }
  // The selection: k distinct indices, deterministic, the excluded one never drawn.
  auto a = select_few_shot(10, 4, 5, 3, 7);
  EXPECT_EQ(a, select_few_shot(10, 4, 5, 3, 7));
  EXPECT_EQ(std::set<size_t>(a.begin(), a.end()).size(), 4u);
  EXPECT_EQ(std::count(a.begin(), a.end(), 7u), 0);
  EXPECT_THROW(select_few_shot(3, 3, 0, 0, 1), InvalidArgument);
}

TEST_F(EvalChoice, ChatTemplateWrapsTheContext) {
  ChatTemplate chat(
      "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
      "{% if add_generation_prompt %}<bot>{% endif %}");
  std::string f = dir.write(
      "arc.jsonl",
      {R"({"question": "Sky?", "choices": {"text": ["blue", "red"], "label": ["A", "B"]}, "answerKey": "B"})"});
  json r = run(f, "arc", &chat);
  check(model, r, {{"<user>Question: Sky?\nAnswer:\n<bot>", {"blue", "red"}, 1}}, "");
  EXPECT_EQ(r["config"]["chat_template"], true);
}

TEST_F(EvalChoice, MalformedRecordsNameTheRecordAndField) {
  auto expect_error = [&](const std::string& line, const std::string& what,
                          const std::string& format = "auto") {
    std::string good = format == "hellaswag"
                           ? R"({"ctx": "c", "endings": ["a", "b"], "label": 0})"
                           : R"({"question": "ok?", "choices": ["a", "b"], "answer": 0})";
    std::string f = dir.write("bad.jsonl", {good, line});
    try {
      run(f, format);
      ADD_FAILURE() << "no error for " << line;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("bad.jsonl:2: " + what), std::string::npos) << e.what();
    }
  };
  expect_error(R"({"question": "q", "choices": ["a", "b", "c", "d"], "answer": 4})",
               "field 'answer': answer index 4 is out of range for 4 choices");
  expect_error(R"({"question": "q", "choices": ["a", "b", "c", "d"], "answer": "E"})",
               "field 'answer': answer letter 'E' is beyond the 4 choices (A-D)");
  expect_error(R"({"question": "q", "choices": ["a", "b"], "answer": "maybe"})",
               "field 'answer': unknown answer 'maybe'");
  expect_error(R"({"question": "q", "choices": ["a", "b"]})", "field 'answer': missing");
  expect_error(R"({"choices": ["a", "b"], "answer": 1})", "field 'question': missing");
  expect_error(R"({"question": "q", "choices": ["a", 3], "answer": 1})",
               "field 'choices': entry 1 is number, not a string");
  expect_error(
      R"({"question": "q", "choices": {"text": ["a", "b"], "label": ["A", "B"]}, "answerKey": "E"})",
      "field 'answerKey': 'E' is not one of the labels [A, B]");
  expect_error(R"({"question": "q", "choices": {"text": ["a", "b"]}, "answerKey": "A"})",
               "field 'choices.label': missing");
  expect_error(R"({"ctx": "c", "endings": ["a", "b"], "label": "7"})",
               "field 'label': answer index 7 is out of range for 2 choices");
  expect_error(R"({"ctx": "c", "label": "0"})", "field 'endings': missing", "hellaswag");
  expect_error(R"({"text": "what"})", "not a known multiple-choice layout");
  expect_error(R"({"question": "q", "choices": ["a", "b"], "answer": 1)", "invalid JSON");
  std::string empty = dir.write("empty.jsonl", {});
  EXPECT_THROW(run(empty), InvalidArgument);
  EXPECT_THROW(run(dir.file("nope.jsonl")), IoError);
  ChoiceOptions o;
  o.data = dir.write("one.jsonl", {R"({"question": "q", "choices": ["a", "b"], "answer": 1})"});
  o.num_fewshot = 1;
  o.progress = false;
  EXPECT_THROW(run_choice(model, tok, nullptr, o), InvalidArgument);  // no --fewshot-file
}

}  // namespace
}  // namespace vela::eval
