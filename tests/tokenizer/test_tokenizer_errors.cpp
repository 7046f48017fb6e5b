// Malformed tokenizer.json files and bad input: clear errors (naming the file / component), no
// crash. Also the pipeline basics: post-processor templates and GPT-2 vocab/merges directories.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.h"
#include "tok_test_util.h"

namespace vela {
namespace {

namespace fs = std::filesystem;
using test::tjson;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("vela_tok_err_" + std::to_string(::getpid()) + "_" +
                                        std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return (path / name).string();
  }
};

template <typename E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TokenizerErrors, MalformedFilesNameTheFile) {
  TempDir d;
  std::string bad_json = d.write("bad.json", "{\"model\": ");
  EXPECT_NE(error_of<InvalidArgument>([&] { Tokenizer::from_file(bad_json); }).find("bad.json"),
            std::string::npos);
  std::string no_model = d.write("no_model.json", "{\"version\": \"1.0\"}");
  std::string msg = error_of<InvalidArgument>([&] { Tokenizer::from_file(no_model); });
  EXPECT_NE(msg.find("no_model.json"), std::string::npos);
  EXPECT_NE(msg.find("missing 'model'"), std::string::npos);
  tjson j = test::byte_level_tokenizer();
  j["model"]["merges"] = {"a zzz"};
  std::string bad_merge = d.write("bad_merge.json", j.dump());
  msg = error_of<InvalidArgument>([&] { Tokenizer::from_file(bad_merge); });
  EXPECT_NE(msg.find("'zzz' is not in the vocab"), std::string::npos) << msg;
  j = test::byte_level_tokenizer();
  j["model"]["vocab"]["x"] = "seven";
  std::string bad_id = d.write("bad_id.json", j.dump());
  EXPECT_NE(error_of<InvalidArgument>([&] { Tokenizer::from_file(bad_id); }).find("bad_id.json"),
            std::string::npos);
  j = test::byte_level_tokenizer();
  j["pre_tokenizer"] = {{"type", "UnicodeScripts"}};
  std::string unsup = d.write("unsup.json", j.dump());
  msg = error_of<Unsupported>([&] { Tokenizer::from_file(unsup); });
  EXPECT_NE(msg.find("pre_tokenizer type 'UnicodeScripts' is not supported"), std::string::npos)
      << msg;
  EXPECT_THROW(Tokenizer::from_file((d.path / "missing.json").string()), IoError);
  EXPECT_THROW(Tokenizer::from_file(d.path.string()),
               IoError);  // a directory without tokenizer files
  j = test::byte_level_tokenizer();
  j["added_tokens"] = {{{"content", "<x>"}}};  // no id
  std::string bad_added = d.write("bad_added.json", j.dump());
  EXPECT_THROW(Tokenizer::from_file(bad_added), InvalidArgument);
}

TEST(TokenizerErrors, InvalidUtf8InputAndUnknownIds) {
  Tokenizer t = Tokenizer::from_json(test::byte_level_tokenizer());
  EXPECT_THROW(t.encode("ok\xFF"), InvalidArgument);
  EXPECT_THROW(t.encode("\xE4\xBD"), InvalidArgument);
  EXPECT_EQ(t.decode({-5, 999999, 'a'}), "a");  // unknown ids are skipped
}

TEST(Tokenizer, ConventionalBosEosNamesCountOnlyAsSpecialTokens) {
  // "<s>" as an ordinary merged token (Qwen3's vocabulary has one) is not a BOS marker...
  tjson j = test::byte_level_tokenizer({{"<", "s"}, {"<s", ">"}});
  Tokenizer plain = Tokenizer::from_json(j);
  ASSERT_TRUE(plain.token_to_id("<s>").has_value());
  EXPECT_FALSE(plain.bos_id().has_value());
  // ...but an added special token of that name is.
  j["added_tokens"] = {{{"id", 300}, {"content", "<s>"}, {"special", true}, {"normalized", false}},
                       {{"id", 301}, {"content", "</s>"}, {"special", true}, {"normalized", false}}};
  Tokenizer special = Tokenizer::from_json(j);
  EXPECT_EQ(special.bos_id(), 300);
  EXPECT_EQ(special.eos_id(), 301);
}

TEST(Tokenizer, TemplateProcessingAndGpt2Files) {
  tjson j = test::byte_level_tokenizer();
  j["added_tokens"] = {
      {{"id", 256}, {"content", "<bos>"}, {"special", true}, {"normalized", false}},
      {{"id", 257}, {"content", "<eos>"}, {"special", true}, {"normalized", false}}};
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single",
                          {{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}},
                           {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                           {{"SpecialToken", {{"id", "<eos>"}, {"type_id", 0}}}}}},
                         {"pair", nullptr},
                         {"special_tokens",
                          {{"<bos>", {{"id", "<bos>"}, {"ids", {256}}, {"tokens", {"<bos>"}}}},
                           {"<eos>", {{"id", "<eos>"}, {"ids", {257}}, {"tokens", {"<eos>"}}}}}}};
  Tokenizer t = Tokenizer::from_json(j);
  EXPECT_EQ(t.encode("a", true), (std::vector<int32_t>{256, 'a', 257}));
  EXPECT_EQ(t.encode("a", false), (std::vector<int32_t>{'a'}));
  EXPECT_EQ(t.bos_id(), 256);
  EXPECT_EQ(t.eos_id(), 257);

  TempDir d;
  tjson vocab = test::byte_level_tokenizer({{"h", "i"}})["model"]["vocab"];
  d.write("vocab.json", vocab.dump());
  d.write("merges.txt", "#version: 0.2\nh i\n");
  Tokenizer g = Tokenizer::from_file(d.path.string());
  EXPECT_EQ(g.encode("hi"), (std::vector<int32_t>{256}));
  EXPECT_EQ(g.decode({256}), "hi");
}

}  // namespace
}  // namespace vela
