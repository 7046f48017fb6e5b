// read_tokenizer_json: the streamed vocab / merges of a tokenizer.json give the same tokenizer as
// the JSON tree (key order, both merge forms, repeated keys, look-alike keys elsewhere), and
// wrong-typed entries get errors naming the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.h"
#include "tok_test_util.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/tokenizer_json.h"

namespace vela {
namespace {

namespace fs = std::filesystem;
using test::tjson;

struct TempFile {
  fs::path path;
  explicit TempFile(const std::string& text) {
    static int n = 0;
    path = fs::temp_directory_path() /
           ("vela_tok_json_" + std::to_string(::getpid()) + "_" + std::to_string(n++) + ".json");
    std::ofstream(path) << text;
  }
  ~TempFile() { fs::remove(path); }
  std::string str() const { return path.string(); }
};

std::string load_error(const std::string& text) {
  TempFile f(text);
  try {
    Tokenizer::from_file(f.str());
  } catch (const InvalidArgument& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(f.str()), std::string::npos) << "the error names the file: " << msg;
    return msg;
  }
  return "(no error)";
}

void expect_same_tokenizer(const std::string& text) {
  TempFile f(text);
  Tokenizer streamed = Tokenizer::from_file(f.str());
  Tokenizer tree = Tokenizer::from_json(tjson::parse(text));
  EXPECT_EQ(streamed.vocab_size(), tree.vocab_size());
  for (int32_t id = 0; id < tree.vocab_size(); ++id)
    EXPECT_EQ(streamed.id_to_token(id), tree.id_to_token(id));
  for (const char* s : {"hello there", "the theme", "abcabc", "x\ny  z", ""})
    EXPECT_EQ(streamed.encode(s), tree.encode(s)) << s;
}

TEST(TokenizerJson, StreamedTablesMatchTheTree) {
  tjson j =
      test::byte_level_tokenizer({{"t", "h"}, {"th", "e"}, {"h", "e"}, {"a", "b"}, {"ab", "c"}});
  expect_same_tokenizer(j.dump());
  // Merges as "a b" strings, "merges" before "vocab", options after both.
  tjson m = j["model"];
  tjson strings = tjson::array();
  for (const auto& e : m["merges"])
    strings.push_back(e[0].get<std::string>() + " " + e[1].get<std::string>());
  std::string text = "{\"model\": {\"merges\": " + strings.dump() +
                     ", \"vocab\": " + m["vocab"].dump() +
                     ", \"type\": \"BPE\", \"ignore_merges\": false}, \"pre_tokenizer\": " +
                     j["pre_tokenizer"].dump() + ", \"decoder\": " + j["decoder"].dump() + "}";
  expect_same_tokenizer(text);
  // Look-alike "model" / "vocab" / "merges" keys elsewhere stay in the tree (these would be bad
  // tables), and a repeated vocab key keeps its last id, as the tree does.
  std::string nested = j.dump();
  nested.insert(1, "\"extra\": {\"model\": {\"vocab\": {\"q\": \"x\"}, \"merges\": [1]}}, ");
  expect_same_tokenizer(nested);
  std::string repeated = j.dump();
  size_t at = repeated.find("\"vocab\":{") + 9;
  repeated.insert(at, "\"he\": 3, ");  // the real "he" entry follows and wins
  expect_same_tokenizer(repeated);
}

TEST(TokenizerJson, WrongTypedEntriesNameTheFile) {
  tjson j = test::byte_level_tokenizer({{"a", "b"}});
  auto with_vocab_entry = [&](const std::string& value) {
    std::string t = j.dump();
    t.insert(t.find("\"vocab\":{") + 9, "\"zz\": " + value + ", ");
    return t;
  };
  for (const char* bad : {"\"seven\"", "-1", "1.5", "null", "[1]", "{\"a\": 1}", "4294967296"})
    EXPECT_NE(load_error(with_vocab_entry(bad)).find("the id of 'zz' is not an integer"),
              std::string::npos)
        << bad;
  auto with_merges = [&](const std::string& merges) {
    tjson k = j;
    k["model"].erase("merges");
    std::string t = k.dump();
    t.insert(t.find("\"model\":{") + 9, "\"merges\": " + merges + ", ");
    return t;
  };
  EXPECT_NE(load_error(with_merges("[\"ab\"]")).find("is not of the form 'a b'"),
            std::string::npos);
  for (const char* bad : {"[[\"a\"]]", "[[\"a\", \"b\", \"c\"]]", "[5]", "[[\"a\", 1]]", "[{}]"})
    EXPECT_NE(load_error(with_merges(bad)).find("BPE merge 0 must be"), std::string::npos) << bad;
  EXPECT_NE(load_error(with_merges("{}")).find("needs a 'merges' array"), std::string::npos);
  EXPECT_NE(load_error(j.dump().substr(0, 500)).find("is not valid JSON"), std::string::npos);
  EXPECT_NE(load_error("[1, 2]").find("top level must be a JSON object"), std::string::npos);
}

// What loading `text` gives: the ids of a few strings, or the error's type and message (the file's
// name replaced, so a file and the parsed tree compare equal).
std::string outcome(const std::function<Tokenizer()>& load, const std::string& source) {
  try {
    Tokenizer t = load();
    std::string ids;
    for (const char* s : {"hello there", "abcabc"})
      for (int32_t id : t.encode(s)) ids += std::to_string(id) + " ";
    return "ok: " + ids;
  } catch (const Error& e) {
    std::string msg = e.what();
    for (size_t at = msg.find(source); at != std::string::npos; at = msg.find(source, at + 5))
      msg.replace(at, source.size(), "<src>");
    return std::string(dynamic_cast<const Unsupported*>(&e) ? "Unsupported: " : "error: ") + msg;
  }
}

void expect_same_outcome(const std::string& text) {
  TempFile f(text);
  const std::string streamed = outcome([&] { return Tokenizer::from_file(f.str()); }, f.str());
  const std::string tree =
      outcome([&] { return Tokenizer::from_json(tjson::parse(text), "<src>"); }, "<src>");
  EXPECT_EQ(streamed, tree) << text.substr(0, 300);
}

TEST(TokenizerJson, RepeatedKeysAndBadEntriesAsTheTreeHasThem) {
  tjson j = test::byte_level_tokenizer({{"a", "b"}, {"h", "e"}});
  const std::string vocab = j["model"]["vocab"].dump(), merges = j["model"]["merges"].dump();
  const std::string rest = ", \"pre_tokenizer\": " + j["pre_tokenizer"].dump() +
                           ", \"decoder\": " + j["decoder"].dump() + "}";
  auto file = [&](const std::string& model) { return "{\"model\": {" + model + "}" + rest; };
  const std::string good = "\"type\": \"BPE\", \"vocab\": " + vocab + ", \"merges\": " + merges;
  for (const std::string& model : std::vector<std::string>{
           good,
           good + ", \"vocab\": null",    // the last "vocab" wins: none
           good + ", \"merges\": \"x\"",  // the last "merges" wins: none
           "\"vocab\": 5, " + good,       // an earlier non-object is replaced
           "\"type\": \"BPE\", \"vocab\": {\"zz\": \"x\", \"zz\": 300}, \"merges\": []",
           "\"type\": \"BPE\", \"vocab\": {\"zz\": 300, \"zz\": \"x\"}, \"merges\": []",
           "\"type\": \"BPE\", \"vocab\": " + vocab +
               ", \"merges\": [\"bad\"], \"merges\": " + merges,
           "\"type\": \"BPE\", \"vocab\": " + vocab + ", \"merges\": [[\"a\", [1]], \"a b\"]",
           "\"type\": \"BPE\", \"vocab\": {\"zz\": 2147483653}, \"merges\": []",
           "\"type\": \"BPE\", \"vocab\": {\"zz\": {\"a\": [1, {}]}}, \"merges\": []",
           "\"type\": \"WordPiece\", \"vocab\": {\"zz\": \"x\"}, \"merges\": [5]",  // the type
                                                                                    // first
       })
    expect_same_outcome(file(model));
  // A second top-level "model" replaces the first, tables and all.
  expect_same_outcome("{\"model\": {" + good + "}, \"model\": {\"unk_token\": null}" + rest);
  expect_same_outcome("{\"model\": {" + good + "}, \"model\": 7" + rest);
  expect_same_outcome("{\"model\": 7, \"model\": {" + good + "}" + rest);
}

TEST(TokenizerJson, ReadsTheTablesOnce) {
  tjson j = test::byte_level_tokenizer({{"a", "b"}});
  TempFile f(j.dump());
  TokenizerJson r = read_tokenizer_json(f.str());
  EXPECT_TRUE(r.bpe.has_vocab && r.bpe.has_merges);
  EXPECT_EQ(r.bpe.vocab.size(), 257u);
  ASSERT_EQ(r.bpe.merges.size(), 1u);
  EXPECT_EQ(r.bpe.merges[0], (std::pair<std::string, std::string>{"a", "b"}));
  EXPECT_FALSE(r.doc["model"].contains("vocab"));  // no tree was built for them
  EXPECT_FALSE(r.doc["model"].contains("merges"));
  EXPECT_EQ(r.doc["model"]["type"], "BPE");
  EXPECT_EQ(r.doc["pre_tokenizer"], j["pre_tokenizer"]);
  EXPECT_THROW(read_tokenizer_json("/nonexistent/tokenizer.json"), IoError);
}

}  // namespace
}  // namespace vela
