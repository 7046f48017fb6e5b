// Helpers for the data-pipeline tests: the real tokenizers fetched by scripts/fetch_assets.sh
// (tests skip when they are absent), scratch directories and JSONL files.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/oracle_util.h"  // repo_root(), assets_dir()

namespace vela::test {

inline std::string qwen3_dir() { return (assets_dir() / "tokenizers" / "qwen3").string(); }
inline bool have_qwen3() { return fs::exists(fs::path(qwen3_dir()) / "tokenizer.json"); }

#define VELA_REQUIRE_QWEN3()                                                     \
  do {                                                                           \
    VELA_SKIP_UNLESS_ASSET(std::filesystem::path(::vela::test::qwen3_dir()) / "tokenizer.json"); \
  } while (0)

// A fresh directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() /
            ("vela_data_test_" + std::to_string(rd()) + "_" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

inline std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  return path;
}

inline std::string write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  return write_file(path, text);
}

}  // namespace vela::test
