// PreprocessConfig: strict parsing (unknown keys, wrong types, inconsistent values are errors
// naming the key) and the normalized round trip index.json records.
#include <gtest/gtest.h>

#include "core/error.h"
#include "train/data/preprocess_config.h"

namespace vela {
namespace {

void expect_error(const json& j, const std::string& needle) {
  try {
    PreprocessConfig::from_json(j);
    FAIL() << "expected an error containing '" << needle << "' for " << j.dump();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(PreprocessConfig, DefaultsForText) {
  PreprocessConfig c = PreprocessConfig::from_json({{"tokenizer", "tok"}});
  EXPECT_EQ(c.format, RecordFormat::kText);
  ASSERT_EQ(c.sections.size(), 1u);
  EXPECT_EQ(c.sections[0].field, "text");
  EXPECT_TRUE(c.effective_add_eos());
  EXPECT_EQ(c.effective_max_length(), c.seq_len);
  EXPECT_TRUE(c.packing);
}

TEST(PreprocessConfig, ChatDefaults) {
  PreprocessConfig c = PreprocessConfig::from_json({{"tokenizer", "tok"}, {"format", "chat"}});
  EXPECT_EQ(c.chat.messages_field, "messages");
  EXPECT_FALSE(c.effective_add_eos());
  PreprocessConfig m = PreprocessConfig::from_json({{"tokenizer", "tok"},
                                                    {"format", "chat"},
                                                    {"chat",
                                                     {{"instruction_field", "instruction"},
                                                      {"input_field", "input"},
                                                      {"output_field", "output"}}}});
  EXPECT_TRUE(m.chat.uses_role_mapping());
  EXPECT_TRUE(m.chat.messages_field.empty());
}

TEST(PreprocessConfig, Errors) {
  expect_error({{"tokenizer", "t"}, {"seqlen", 5}}, "unknown key 'seqlen'");
  expect_error(json::object(), "config.tokenizer is required");
  expect_error({{"tokenizer", "t"}, {"format", "csv"}}, "config.format");
  expect_error({{"tokenizer", "t"}, {"seq_len", "1024"}}, "config.seq_len must be an integer");
  expect_error({{"tokenizer", "t"}, {"seq_len", 1}}, "config.seq_len must be >= 2");
  expect_error({{"tokenizer", "t"}, {"seq_len", 64}, {"max_length", 128}}, "cannot exceed seq_len");
  expect_error({{"tokenizer", "t"}, {"truncation", "middle"}}, "config.truncation");
  expect_error({{"tokenizer", "t"}, {"packing", 1}}, "config.packing must be true or false");
  expect_error({{"tokenizer", "t"}, {"sections", json::array()}}, "non-empty array");
  expect_error({{"tokenizer", "t"}, {"sections", {{{"field", "a"}, {"train", false}}}}},
               "at least one section");
  expect_error({{"tokenizer", "t"}, {"sections", {{{"field", "a"}, {"weight", 1}}}}},
               "unknown key 'weight' in config.sections[0]");
  expect_error({{"tokenizer", "t"}, {"format", "chat"}, {"sections", {{{"field", "a"}}}}},
               "format \"text\" only");
  expect_error({{"tokenizer", "t"}, {"chat", {{"messages_field", "m"}}}}, "format \"chat\" only");
  expect_error({{"tokenizer", "t"},
                {"format", "chat"},
                {"chat", {{"messages_field", "m"}, {"output_field", "o"}}}},
               "not both");
  expect_error({{"tokenizer", "t"}, {"format", "chat"}, {"chat", {{"input_field", "i"}}}},
               "output_field is required");
  expect_error({{"tokenizer", "t"}, {"seq_len", 64}, {"shard_tokens", 32}},
               "shard_tokens (32) must be >= seq_len");
}

TEST(PreprocessConfig, NormalizedRoundTrip) {
  json j = {
      {"tokenizer", "tok"},
      {"sections", {{{"field", "title"}, {"train", false}, {"suffix", "\n"}}, {{"field", "body"}}}},
      {"seq_len", 128},
      {"truncation", "split"},
      {"eos_token", "<|endoftext|>"}};
  PreprocessConfig c = PreprocessConfig::from_json(j);
  json n = c.to_json();
  PreprocessConfig c2 = PreprocessConfig::from_json(n);
  EXPECT_EQ(c2.to_json(), n);
  EXPECT_EQ(n["max_length"], 128);
  EXPECT_EQ(n["truncation"], "split");
  EXPECT_EQ(n["sections"][0]["suffix"], "\n");
  EXPECT_EQ(n["sections"][0]["train"], false);
}

}  // namespace
}  // namespace vela
