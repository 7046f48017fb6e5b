// preprocess() end to end with the real Qwen3 tokenizer: JSONL in, shards + index out; bad
// records counted by reason with file:line; truncation modes through the pipeline; chat SFT data
// read back through the sft dataset with the assistant parts as the only targets.
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "core/sha256.h"
#include "data_test_util.h"
#include "tokenizer/tokenizer.h"
#include "train/data/dataset.h"
#include "train/data/preprocess.h"
#include "train/data/shard_reader.h"

namespace vela {
namespace {

json read_json(const std::string& path) {
  std::ifstream f(path);
  return json::parse(f);
}

TEST(Preprocess, TextWithBadRecords) {
  VELA_REQUIRE_QWEN3();
  test::TempDir tmp;
  std::string a = test::write_lines(
      tmp / "a.jsonl", {
                           R"({"text": "In the beginning God created the heaven and the earth."})",
                           R"({"text": "And the earth was without form, and void."})",
                           "",
                           R"({"text": 42})",
                           R"(not json)",
                           R"({"body": "no text field"})",
                       });
  std::string b = test::write_lines(
      tmp / "b.jsonl", {
                           R"({"text": "And God said, Let there be light: and there was light."})",
                           R"({"text": ""})",
                       });
  PreprocessConfig c = PreprocessConfig::from_json({{"tokenizer", test::qwen3_dir()},
                                                    {"eos_token", "<|endoftext|>"},
                                                    {"seq_len", 64},
                                                    {"threads", 2}});
  std::string out = tmp / "out";
  PreprocessOptions o;
  o.block_records = 2;  // several parallel blocks: order must still be input order
  PreprocessStats st = preprocess(c, {a, b}, out, o);
  EXPECT_EQ(st.n_records, 7);
  EXPECT_EQ(st.n_ok, 3);
  EXPECT_EQ(st.n_bad, 4);
  EXPECT_EQ(st.bad_by_reason["wrong_type"], 1);
  EXPECT_EQ(st.bad_by_reason["invalid_json"], 1);
  EXPECT_EQ(st.bad_by_reason["missing_field"], 1);
  EXPECT_EQ(st.bad_by_reason["no_trained_tokens"], 1);  // "" -> just EOS: nothing to predict
  ASSERT_FALSE(st.bad_examples.empty());
  EXPECT_NE(st.bad_examples[0].find("a.jsonl:4: wrong_type"), std::string::npos)
      << st.bad_examples[0];
  EXPECT_EQ(st.n_docs, 3);
  EXPECT_EQ(st.n_sequences, 1);  // all three documents packed into one 64-token row

  json ix = read_json(out + "/index.json");
  EXPECT_EQ(ix["format"], "vela-token-shards");
  EXPECT_EQ(ix["n_docs"], 3);
  EXPECT_EQ(ix["records"]["n_bad"], 4);
  EXPECT_EQ(ix["config"]["seq_len"], 64);
  EXPECT_EQ(ix["tokenizer"]["sha256"], sha256_file(test::qwen3_dir() + "/tokenizer.json"));

  Tokenizer tok = Tokenizer::from_file(test::qwen3_dir());
  auto set = ShardSet::open(out);
  set->verify_checksums();
  SequenceView v = set->sequence(0);
  std::vector<int32_t> ids(v.tokens, v.tokens + v.n_tokens);
  EXPECT_EQ(tok.decode(ids),
            "In the beginning God created the heaven and the earth.<|endoftext|>"
            "And the earth was without form, and void.<|endoftext|>"
            "And God said, Let there be light: and there was light.<|endoftext|>");
}

TEST(Preprocess, TruncationThroughThePipeline) {
  VELA_REQUIRE_QWEN3();
  test::TempDir tmp;
  // 3 + 1 (EOS) tokens and 13 + 1 tokens.
  std::string in = test::write_lines(
      tmp / "in.jsonl",
      {
          R"({"text": "one two three"})",
          R"({"text": "one two three four five six seven eight nine ten eleven twelve thirteen"})",
      });
  auto run = [&](const char* mode, bool packing) {
    PreprocessConfig c = PreprocessConfig::from_json({{"tokenizer", test::qwen3_dir()},
                                                      {"eos_token", "<|endoftext|>"},
                                                      {"seq_len", 8},
                                                      {"truncation", mode},
                                                      {"packing", packing}});
    return preprocess(c, {in}, tmp / mode);
  };
  PreprocessStats drop = run("drop", true);
  EXPECT_EQ(drop.n_ok, 1);
  EXPECT_EQ(drop.bad_by_reason["too_long"], 1);
  PreprocessStats right = run("truncate_right", false);
  EXPECT_EQ(right.n_ok, 2);
  EXPECT_EQ(right.n_truncated, 1);
  EXPECT_EQ(right.n_tokens, 4 + 8);
  PreprocessStats split = run("split", false);
  EXPECT_EQ(split.n_docs, 1 + 2);  // 14 tokens -> 8 + 6
  EXPECT_EQ(split.n_tokens, 4 + 14);
  PreprocessStats left = run("truncate_left", true);
  EXPECT_EQ(left.n_sequences, 2);  // 4 + 8 > 8; the full one is written first
  auto set = ShardSet::open(tmp / "truncate_left");
  Tokenizer tok = Tokenizer::from_file(test::qwen3_dir());
  SequenceView v = set->sequence(0);
  std::vector<int32_t> ids(v.tokens, v.tokens + v.n_tokens);
  EXPECT_EQ(tok.decode(ids), " seven eight nine ten eleven twelve thirteen<|endoftext|>");
}

TEST(Preprocess, ChatSftEndToEnd) {
  VELA_REQUIRE_QWEN3();
  test::TempDir tmp;
  std::string in = test::write_lines(
      tmp / "sft.jsonl",
      {
          R"({"instruction": "Answer briefly.", "input": "Capital of France?", "output": "Paris."})",
          R"({"instruction": "", "input": "2+2?", "output": "4"})",
          R"({"instruction": "x", "input": "y"})",
      });
  PreprocessConfig c =
      PreprocessConfig::from_json({{"tokenizer", test::qwen3_dir()},
                                   {"format", "chat"},
                                   {"chat",
                                    {{"instruction_field", "instruction"},
                                     {"input_field", "input"},
                                     {"output_field", "output"},
                                     {"template_vars", {{"enable_thinking", false}}}}},
                                   {"seq_len", 128},
                                   {"packing", false}});
  PreprocessStats st = preprocess(c, {in}, tmp / "out");
  EXPECT_EQ(st.n_ok, 2);
  EXPECT_EQ(st.bad_by_reason["missing_field"], 1);
  DatasetConfig d;
  d.kind = "sft";
  d.path = tmp / "out";
  d.batch_size = 2;
  d.shuffle = false;
  auto ds = make_datasets(d).train;
  TrainBatch b = ds->next_batch();
  Tokenizer tok = Tokenizer::from_file(test::qwen3_dir());
  auto targets = b.targets.to_vector<int32_t>();
  for (int r = 0; r < 2; ++r) {
    std::vector<int32_t> t;
    for (int64_t i = 0; i < 128; ++i)
      if (targets[static_cast<size_t>(r * 128 + i)] != kIgnoreIndex)
        t.push_back(targets[static_cast<size_t>(r * 128 + i)]);
    EXPECT_EQ(tok.decode(t), r == 0 ? "Paris.<|im_end|>\n" : "4<|im_end|>\n");
  }
}

TEST(Preprocess, NothingUsableIsAnError) {
  VELA_REQUIRE_QWEN3();
  test::TempDir tmp;
  std::string in = test::write_lines(tmp / "in.jsonl", {"nope", "{}"});
  PreprocessConfig c = PreprocessConfig::from_json(
      {{"tokenizer", test::qwen3_dir()}, {"eos_token", "<|endoftext|>"}});
  try {
    preprocess(c, {in}, tmp / "out");
    FAIL() << "expected an error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("no usable records"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(tmp / "out/index.json"));
  // A failed rerun into a good directory removes its index instead of leaving a stale one.
  std::string good = test::write_lines(tmp / "good.jsonl", {R"({"text": "Hello there."})"});
  preprocess(c, {good}, tmp / "out");
  EXPECT_TRUE(std::filesystem::exists(tmp / "out/index.json"));
  EXPECT_THROW(preprocess(c, {in}, tmp / "out"), InvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(tmp / "out/index.json"));
  EXPECT_THROW(preprocess(c, {tmp / "missing.jsonl"}, tmp / "out"), IoError);
}

}  // namespace
}  // namespace vela
