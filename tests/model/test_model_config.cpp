// ModelConfig parsing: both transformers dialects, every rope type, and errors for unsupported
// fields (named in the message).
#include <gtest/gtest.h>

#include "model/model_config.h"

namespace vela {
namespace {

json base() {
  return json::parse(R"({"model_type": "llama", "vocab_size": 100, "hidden_size": 64,
    "num_hidden_layers": 2, "intermediate_size": 128, "num_attention_heads": 4,
    "num_key_value_heads": 2, "rms_norm_eps": 1e-5, "max_position_embeddings": 256})");
}

std::string error_of(const json& j) {
  try {
    ModelConfig::from_json(j, "cfg.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelConfig, ReadsBasicsAndDefaults) {
  ModelConfig c = ModelConfig::from_json(base());
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.rope.rotary_dim, 16);
  EXPECT_EQ(c.rope.theta, 10000.0);
  EXPECT_EQ(c.rope.scaling.type, ops::RopeScaling::Type::kNone);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.qk_norm);
}

TEST(ModelConfig, ReadsBothRopeDialects) {
  json v4 = base();
  v4["rope_theta"] = 500000.0;
  v4["rope_scaling"] = json::parse(R"({"type": "linear", "factor": 4.0})");
  ModelConfig a = ModelConfig::from_json(v4);
  EXPECT_EQ(a.rope.theta, 500000.0);
  EXPECT_EQ(a.rope.scaling.type, ops::RopeScaling::Type::kLinear);
  EXPECT_EQ(a.rope.scaling.factor, 4.0);
  json v5 = base();
  v5["rope_parameters"] = json::parse(R"({"rope_type": "llama3", "rope_theta": 500000.0,
    "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192})");
  ModelConfig b = ModelConfig::from_json(v5);
  EXPECT_EQ(b.rope.scaling.type, ops::RopeScaling::Type::kLlama3);
  EXPECT_EQ(b.rope.scaling.original_max_positions, 8192);
  json yarn = base();
  yarn["rope_scaling"] = json::parse(R"({"rope_type": "yarn", "factor": 4.0,
    "original_max_position_embeddings": 64, "beta_fast": 16})");
  EXPECT_EQ(ModelConfig::from_json(yarn).rope.scaling.beta_fast, 16.0);
}

TEST(ModelConfig, ArchitectureSpecifics) {
  json q2 = base();
  q2["model_type"] = "qwen2";
  ModelConfig a = ModelConfig::from_json(q2);
  EXPECT_TRUE(a.qkv_bias);
  EXPECT_FALSE(a.o_bias);
  json q3 = base();
  q3["model_type"] = "qwen3";
  q3["head_dim"] = 32;
  ModelConfig b = ModelConfig::from_json(q3);
  EXPECT_TRUE(b.qk_norm);
  EXPECT_EQ(b.head_dim, 32);
  EXPECT_EQ(b.q_dim(), 128);
  json eos = base();
  eos["eos_token_id"] = json::array({5, 7});
  EXPECT_EQ(ModelConfig::from_json(eos).eos_token_ids, (std::vector<int32_t>{5, 7}));
}

TEST(ModelConfig, UnsupportedFieldsAreNamedErrors) {
  json j = base();
  j["model_type"] = "gpt2";
  EXPECT_NE(error_of(j).find("model_type 'gpt2'"), std::string::npos);
  j = base();
  j["model_type"] = "mistral";
  j["sliding_window"] = 128;
  EXPECT_NE(error_of(j).find("sliding_window"), std::string::npos);
  j["sliding_window"] = nullptr;
  EXPECT_EQ(error_of(j), "");
  j = base();
  j["rope_scaling"] = json::parse(R"({"rope_type": "longrope", "factor": 2})");
  EXPECT_NE(error_of(j).find("longrope"), std::string::npos);
  j = base();
  j["hidden_act"] = "gelu";
  EXPECT_NE(error_of(j).find("hidden_act"), std::string::npos);
  j = base();
  j["some_new_field"] = 1;
  EXPECT_NE(error_of(j).find("some_new_field"), std::string::npos);
  j = base();
  j["num_key_value_heads"] = 3;
  EXPECT_NE(error_of(j).find("multiple"), std::string::npos);
  j = base();
  j.erase("vocab_size");
  EXPECT_NE(error_of(j).find("vocab_size"), std::string::npos);
  j = base();
  j["layer_types"] = json::array({"full_attention", "sliding_attention"});
  EXPECT_NE(error_of(j).find("sliding_attention"), std::string::npos);
}

TEST(ModelConfig, HfJsonRoundTrip) {
  json j = base();
  j["model_type"] = "qwen3";
  j["rope_scaling"] = json::parse(R"({"rope_type": "yarn", "factor": 4.0,
    "original_max_position_embeddings": 64})");
  j["tie_word_embeddings"] = true;
  ModelConfig a = ModelConfig::from_json(j);
  ModelConfig b = ModelConfig::from_json(a.to_hf_json());
  EXPECT_EQ(b.to_hf_json().dump(), a.to_hf_json().dump());
  EXPECT_TRUE(b.qk_norm);
  EXPECT_EQ(b.rope.scaling.type, ops::RopeScaling::Type::kYarn);
}

}  // namespace
}  // namespace vela
