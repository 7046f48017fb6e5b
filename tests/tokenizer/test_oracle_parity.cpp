// Oracle parity: vela's encode/decode against the Hugging Face `tokenizers` binding (node) on
// >= 5,000 generated strings for Qwen3, Llama-3.1, GPT-4o and GPT-2. Needs the assets that
// scripts/fetch_assets.sh puts in .cache/assets (CI runs it); without them the tests skip (fail
// with VELA_REQUIRE_ASSETS=1, as scripts/test.sh sets).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/json.h"
#include "oracle_util.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using vela::json;
using namespace vela::test;

namespace {

class OracleParity : public ::testing::TestWithParam<const char*> {
 protected:
  static void SetUpTestSuite() {
    tmp_ = fs::temp_directory_path() / ("vela_tok_parity_" + std::to_string(::getpid()));
    fs::create_directories(tmp_);
    strings_path_ = tmp_ / "strings.jsonl";
    std::string gen = "node '" + (repo_root() / "tests/tokenizer/oracle/gen_strings.js").string() +
                      "' 6000 > '" + strings_path_.string() + "'";
    gen_ok_ = std::system(gen.c_str()) == 0;
  }
  static void TearDownTestSuite() { fs::remove_all(tmp_); }
  static inline fs::path tmp_, strings_path_;
  static inline bool gen_ok_ = false;
};

TEST_P(OracleParity, EncodeDecodeMatchesHuggingFace) {
  fs::path assets = assets_dir();
  VELA_SKIP_UNLESS_ASSET(assets / "node_modules" / "tokenizers");
  ASSERT_TRUE(gen_ok_) << "node tests/tokenizer/oracle/gen_strings.js failed (is node installed?)";
  fs::path tok = assets / "tokenizers" / GetParam();
  if (fs::exists(tok / "tokenizer.json")) tok /= "tokenizer.json";
  VELA_SKIP_UNLESS_ASSET(tok);

  std::string cmd = "NODE_PATH='" + (assets / "node_modules").string() + "' node '" +
                    (repo_root() / "tests/tokenizer/oracle/encode_oracle.js").string() + "' '" +
                    tok.string() + "' '" + strings_path_.string() + "'";
  std::vector<std::string> expected = split_lines(run(cmd));
  std::ifstream sf(strings_path_);
  std::vector<std::string> strings;
  for (std::string line; std::getline(sf, line);)
    if (!line.empty()) strings.push_back(json::parse(line).get<std::string>());
  ASSERT_GE(strings.size(), 5000u);
  ASSERT_EQ(expected.size(), strings.size()) << "oracle failed: " << cmd;

  vela::Tokenizer t = vela::Tokenizer::from_file(tok.string());
  size_t n_mismatch = 0, n_special_mismatch = 0, n_decode_mismatch = 0, n_roundtrip_fail = 0,
         n_stream_mismatch = 0;
  for (size_t i = 0; i < strings.size(); ++i) {
    json e = json::parse(expected[i]);
    auto ids = t.encode(strings[i], false);
    auto want = e["ids"].get<std::vector<int32_t>>();
    if (ids != want) {
      if (n_mismatch++ < 5)
        ADD_FAILURE() << GetParam() << " string " << i << " " << json(strings[i]).dump()
                      << "\n vela: " << json(ids).dump() << "\n   hf: " << json(want).dump();
    }
    auto ids_s = t.encode(strings[i], true);
    if (ids_s != e["ids_special"].get<std::vector<int32_t>>()) ++n_special_mismatch;
    std::string text = t.decode(want, false);
    if (text != e["text"].get<std::string>()) {
      if (n_decode_mismatch++ < 5)
        ADD_FAILURE() << GetParam() << " decode " << i << " vela " << json(text).dump() << " hf "
                      << e["text"].dump();
    }
    if (t.decode(e["ids_special"].get<std::vector<int32_t>>(), true) !=
        e["text_skip"].get<std::string>())
      ++n_decode_mismatch;
    // Streaming the ids gives exactly the full decode.
    vela::StreamingDecoder sd(t);
    std::string streamed;
    for (int32_t id : want) streamed += sd.push(id);
    streamed += sd.flush();
    if (streamed != text && n_stream_mismatch++ < 5)
      ADD_FAILURE() << GetParam() << " stream " << i << " " << json(streamed).dump() << " vs "
                    << json(text).dump();
    // Byte-level BPE is lossless except where a normalizer changes the text (Qwen3's NFC).
    if (e["text"].get<std::string>() != strings[i] && std::string(GetParam()) != "qwen3")
      ++n_roundtrip_fail;
  }
  std::printf(
      "[parity] %-8s strings=%zu encode_mismatch=%zu special_mismatch=%zu decode_mismatch=%zu "
      "stream_mismatch=%zu roundtrip_fail=%zu\n",
      GetParam(), strings.size(), n_mismatch, n_special_mismatch, n_decode_mismatch,
      n_stream_mismatch, n_roundtrip_fail);
  EXPECT_EQ(n_mismatch, 0u);
  EXPECT_EQ(n_special_mismatch, 0u);
  EXPECT_EQ(n_decode_mismatch, 0u);
  EXPECT_EQ(n_stream_mismatch, 0u);
  EXPECT_EQ(n_roundtrip_fail, 0u);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, OracleParity,
                         ::testing::Values("qwen3", "llama3_1", "llama3", "gpt4o", "gpt2"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
