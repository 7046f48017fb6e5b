// `vela eval ppl` against the transformers golden (tools/make_eval_fixtures.py): per-document token
// counts, scored tokens and summed NLL of the sliding window over two fixture models and four
// (max_length, stride) settings, then the window arithmetic against an independent dense forward,
// batching invariance, the text format and the errors for bad data.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "core/error.h"
#include "eval/ppl_task.h"
#include "eval_test_util.h"
#include "tokenizer/tokenizer.h"

namespace vela::eval {
namespace {

using test::TempModelDir;

json load_golden() {
  std::ifstream f("fixtures/eval/ppl_golden.json");
  EXPECT_TRUE(f.good()) << "missing tests/fixtures/eval/ppl_golden.json (run from tests/)";
  return json::parse(f);
}

// Tolerance: vela's f32 forward vs torch's f32 forward differ by ~1e-6 per logit; over a few
// hundred scored tokens the summed NLL agrees to a relative 1e-5 (measured: ~1e-7).
constexpr double kRelTol = 1e-5;

TEST(EvalPpl, MatchesTransformersGolden) {
  json golden = load_golden();
  double max_rel = 0;
  for (const auto& [name, settings] : golden["models"].items()) {
    TempModelDir dir(name);
    Transformer model = Transformer::load(dir.dir());
    Tokenizer tok = Tokenizer::from_file(dir.dir());
    for (const json& s : settings) {
      // Automatic batching, and (once per model) one window per forward: the same numbers.
      std::vector<int64_t> budgets = {0};
      if (s["stride"] == 32) budgets.push_back(70);
      for (int64_t batch_tokens : budgets) {
        PplOptions o;
        o.data = "fixtures/eval/ppl_docs.jsonl";
        o.max_length = s["max_length"];
        o.stride = s["stride"];
        o.batch_tokens = batch_tokens;
        o.progress = false;
        json r = run_ppl(model, tok, o);
        SCOPED_TRACE(name + " max_length " + s["max_length"].dump() + " stride " +
                     s["stride"].dump() + " batch_tokens " + std::to_string(batch_tokens));
        ASSERT_EQ(r["documents"].size(), s["docs"].size());
        for (size_t d = 0; d < s["docs"].size(); ++d) {
          EXPECT_EQ(r["documents"][d]["n_tokens"], s["docs"][d]["n_tokens"]);
          EXPECT_EQ(r["documents"][d]["n_scored"], s["docs"][d]["n_scored"]);
          double want = s["docs"][d]["nll"], got = r["documents"][d]["nll"];
          EXPECT_NEAR(got, want, kRelTol * want) << "document " << d;
          max_rel = std::max(max_rel, std::abs(got - want) / want);
        }
        EXPECT_EQ(r["counts"]["n_scored"], s["n_scored"]);
        EXPECT_EQ(r["counts"]["n_bytes"], s["n_bytes"]);
        double ppl = s["perplexity"], bpb = s["bits_per_byte"];
        EXPECT_NEAR(r["metrics"]["perplexity"].get<double>(), ppl, kRelTol * ppl);
        EXPECT_NEAR(r["metrics"]["bits_per_byte"].get<double>(), bpb, kRelTol * bpb);
      }
    }
  }
  std::printf("ppl vs transformers: max relative NLL error %.2e (tolerance %.0e)\n", max_rel,
              kRelTol);
}

TEST(EvalPpl, WindowsScoreOnlyNewTokens) {
  // A 30-byte text, max_length 12, stride 5: windows [0,12) scores 1..11, [5,17) scores 12..16,
  // [10,22) 17..21, [15,27) 22..26, [20,30) 27..29: 29 tokens, each with the context of its window.
  TempModelDir dir("qwen3_qknorm");
  Transformer model = Transformer::load(dir.dir());
  Tokenizer tok = Tokenizer::from_file(dir.dir());
  const std::string text = "abcdefghij klmnopqrst uvwxyz12";
  std::string path = dir.write("doc.txt", {});
  std::ofstream(path, std::ios::binary) << text;
  PplOptions o;
  o.data = path;
  o.max_length = 12;
  o.stride = 5;
  o.progress = false;
  json r = run_ppl(model, tok, o);
  auto ids = test::bytes_of(text);
  double nll = 0;
  struct W {
    size_t begin, end, first;
  };
  for (W w : {W{0, 12, 1}, W{5, 17, 7}, W{10, 22, 7}, W{15, 27, 7}, W{20, 30, 7}}) {
    std::vector<int32_t> win(ids.begin() + w.begin, ids.begin() + w.end);
    nll -= test::dense_loglikelihood(model, win, w.first);
  }
  EXPECT_EQ(r["config"]["format"], "text");
  EXPECT_EQ(r["counts"]["n_scored"], 29);
  EXPECT_EQ(r["counts"]["n_windows"], 5);
  EXPECT_EQ(r["counts"]["n_words"], 3);
  EXPECT_NEAR(r["counts"]["nll"].get<double>(), nll, 1e-4);
  // The nll bound carried over: |d ppl| = ppl * |d nll| / 29 (the paged and dense attention sum
  // in other fp32 orders; an absolute 1e-3 on a perplexity of ~2400 asked 30x more than 1e-4 nll).
  EXPECT_NEAR(r["metrics"]["perplexity"].get<double>(), std::exp(nll / 29),
              std::exp(nll / 29) * 1e-4 / 29);
  EXPECT_NEAR(r["metrics"]["bits_per_byte"].get<double>(), nll / (std::log(2.0) * 30), 1e-6);
  EXPECT_NEAR(r["metrics"]["word_perplexity"].get<double>(), std::exp(nll / 3),
              1e-3 * std::exp(nll / 3));
}

TEST(EvalPpl, BadDataNamesTheRecord) {
  TempModelDir dir("llama_gqa");
  Transformer model = Transformer::load(dir.dir());
  Tokenizer tok = Tokenizer::from_file(dir.dir());
  auto run = [&](const std::vector<std::string>& lines, const std::string& field = "text") {
    PplOptions o;
    o.data = dir.write("d.jsonl", lines);
    o.field = field;
    o.progress = false;
    return run_ppl(model, tok, o);
  };
  auto expect_error = [&](const std::vector<std::string>& lines, const std::string& what,
                          const std::string& field = "text") {
    try {
      run(lines, field);
      ADD_FAILURE() << "no error for " << what;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_error({R"({"text": "fine"})", R"({"txt": "oops"})"}, "d.jsonl:2: field 'text': missing");
  expect_error({R"({"text": "fine"})", "", R"({"text": 5})"},
               "d.jsonl:3: field 'text': expected a string");
  expect_error({R"({"text": "fine"})", R"({"text": "x")"}, "d.jsonl:2: invalid JSON");
  expect_error({"[1, 2]"}, "d.jsonl:1: each line must be a JSON object");
  expect_error({}, "d.jsonl: no records");
  expect_error({R"({"text": ""})"}, "d.jsonl:1: field 'text': the text is empty");
  expect_error({R"({"body": "hello there"})"}, "d.jsonl:1: field 'content': missing", "content");
  PplOptions o;
  o.data = dir.write("ok.jsonl", {R"({"text": "hello there"})"});
  o.progress = false;
  o.stride = 100;
  o.max_length = 10;
  EXPECT_THROW(run_ppl(model, tok, o), InvalidArgument);  // stride > max_length
  o.stride = 0;
  o.max_length = 65;
  EXPECT_THROW(run_ppl(model, tok, o), InvalidArgument);  // beyond max_position_embeddings
  o.data = dir.file("missing.jsonl");
  o.max_length = 0;
  EXPECT_THROW(run_ppl(model, tok, o), IoError);
}

}  // namespace
}  // namespace vela::eval
