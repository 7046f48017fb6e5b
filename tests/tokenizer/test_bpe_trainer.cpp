// BpeTrainer: vocabulary layout (specials, 256 bytes, merges), losslessness, and the oracle check:
// a vocabulary trained on ~3 MB of text is loaded by Hugging Face `tokenizers` (node) and encodes
// the 6,000 parity strings exactly like vela.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "core/error.h"
#include "core/json.h"
#include "oracle_util.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/tokenizer.h"

namespace vela {
namespace {

TEST(BpeTrainer, LayoutAndRoundTrip) {
  BpeTrainerOptions o;
  o.vocab_size = 300;
  o.min_frequency = 1;
  o.special_tokens = {"<|im_start|>", "<|im_end|>"};
  BpeTrainer trainer(o);
  std::string text;
  for (int i = 0; i < 200; ++i)
    text += "the cat sat on the mat <|im_end|> and the hat was flat " + std::to_string(i * 7919) +
            " times. Vowels: " + std::string(1, static_cast<char>('a' + i % 26)) +
            std::string(1, static_cast<char>('b' + i % 23)) + "\n";
  trainer.add_text(text);
  TrainedBpe bpe = trainer.train();
  ASSERT_EQ(bpe.vocab.size(), 300u);
  EXPECT_EQ(bpe.vocab[0], "<|im_start|>");
  EXPECT_EQ(bpe.vocab[1], "<|im_end|>");
  EXPECT_EQ(bpe.vocab[2 + 'a'], "a");
  EXPECT_EQ(bpe.vocab[2 + ' '], "\xC4\xA0");  // byte-level space
  EXPECT_EQ(bpe.merges.size(), 300u - 258u);
  for (const auto& [a, b] : bpe.merges)
    EXPECT_EQ((a + b).find("<|"), std::string::npos) << "a special was merged";

  auto dir = test::fs::temp_directory_path() / ("vela_bpe_train_" + std::to_string(::getpid()));
  BpeTrainer::save(bpe, dir.string());
  Tokenizer t = Tokenizer::from_file(dir.string());
  std::string s = "the cat<|im_start|> sat \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80 flat hat\n";
  auto ids = t.encode(s);
  EXPECT_EQ(t.decode(ids), s);
  EXPECT_LT(ids.size(), s.size() / 2);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 0), 1);  // <|im_start|> is one token
  test::fs::remove_all(dir);
}

TEST(BpeTrainer, TooSmallVocabIsAnError) {
  BpeTrainerOptions o;
  o.vocab_size = 100;
  EXPECT_THROW(BpeTrainer{o}, InvalidArgument);
}

TEST(BpeTrainerOracle, HuggingFaceLoadsAndEncodesIdentically) {
  auto assets = test::assets_dir();
  VELA_SKIP_UNLESS_ASSET(assets / "node_modules" / "tokenizers");
  auto dir = test::fs::temp_directory_path() / ("vela_bpe_oracle_" + std::to_string(::getpid()));
  test::fs::create_directories(dir);
  auto gen = (test::repo_root() / "tests/tokenizer/oracle/gen_strings.js").string();
  // Training text: 40,000 generated strings (~3 MB); test strings: the 6,000 parity strings.
  std::string train_text = test::run("node '" + gen + "' 40000");
  ASSERT_GT(train_text.size(), 2'000'000u) << "gen_strings.js failed (is node installed?)";
  std::string corpus;
  for (const auto& line : test::split_lines(train_text))
    corpus += json::parse(line).get<std::string>() + "\n";
  std::ofstream((dir / "strings.jsonl").string()) << test::run("node '" + gen + "' 6000");

  BpeTrainerOptions o;
  o.vocab_size = 1000;
  o.special_tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  BpeTrainer trainer(o);
  auto t0 = std::chrono::steady_clock::now();
  trainer.add_text(corpus);
  TrainedBpe bpe = trainer.train();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BpeTrainer::save(bpe, (dir / "tok").string());
  ASSERT_EQ(bpe.vocab.size(), 1000u);

  std::string cmd = "NODE_PATH='" + (assets / "node_modules").string() + "' node '" +
                    (test::repo_root() / "tests/tokenizer/oracle/encode_oracle.js").string() +
                    "' '" + (dir / "tok" / "tokenizer.json").string() + "' '" +
                    (dir / "strings.jsonl").string() + "'";
  auto expected = test::split_lines(test::run(cmd));
  auto strings = test::split_lines(test::run("cat '" + (dir / "strings.jsonl").string() + "'"));
  ASSERT_EQ(expected.size(), strings.size())
      << "HF could not load the trained tokenizer.json: " << cmd;
  Tokenizer t = Tokenizer::from_file((dir / "tok").string());
  size_t n_mismatch = 0, n_lossy = 0;
  for (size_t i = 0; i < strings.size(); ++i) {
    std::string s = json::parse(strings[i]).get<std::string>();
    auto want = json::parse(expected[i])["ids"].get<std::vector<int32_t>>();
    auto ids = t.encode(s);
    if (ids != want && n_mismatch++ < 5) ADD_FAILURE() << "string " << i << " " << strings[i];
    if (t.decode(ids) != s) ++n_lossy;
  }
  std::printf(
      "[trainer] corpus=%zu bytes vocab=1000 train=%.2f s strings=%zu mismatch=%zu lossy=%zu\n",
      corpus.size(), secs, strings.size(), n_mismatch, n_lossy);
  EXPECT_EQ(n_mismatch, 0u);
  EXPECT_EQ(n_lossy, 0u);
  test::fs::remove_all(dir);
}

}  // namespace
}  // namespace vela
