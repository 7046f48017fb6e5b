// Helpers for the eval tests: a temporary model directory made of a fixture model
// (tests/fixtures/models/<name>) and the byte-level test tokenizer (tests/fixtures/eval, made by
// tools/make_eval_fixtures.py: token id = byte), JSONL writers, and an independent log-likelihood
// through Transformer::forward_dense (no packing, no batching, no eval code).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/json.h"
#include "model/transformer.h"

namespace vela::eval::test {

namespace fs = std::filesystem;

class TempModelDir {
 public:
  explicit TempModelDir(const std::string& fixture) {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("vela_eval_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
    const fs::path src = fs::path("fixtures/models") / fixture;
    fs::copy_file(src / "config.json", path_ / "config.json");
    fs::copy_file(src / "model.safetensors", path_ / "model.safetensors");
    fs::copy_file("fixtures/eval/tokenizer.json", path_ / "tokenizer.json");
  }
  ~TempModelDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string dir() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // Writes `lines` (one per line) to a file in the directory and returns its path.
  std::string write(const std::string& name, const std::vector<std::string>& lines) const {
    std::ofstream f(file(name), std::ios::binary);
    for (const auto& l : lines) f << l << "\n";
    return file(name);
  }

 private:
  fs::path path_;
};

inline std::vector<int32_t> bytes_of(const std::string& s) {
  return std::vector<int32_t>(s.begin(), s.end());
}

// log p(tokens[first..] | tokens[..first)) from one dense forward of [1, T].
inline double dense_loglikelihood(const Transformer& m, const std::vector<int32_t>& tokens,
                                  size_t first) {
  const auto t = static_cast<int64_t>(tokens.size());
  Tensor logits = m.forward_dense(Tensor::from_vector(tokens, {1, t}));  // [1, T, V]
  const int64_t v = logits.size(2);
  const float* l = logits.data<float>();
  double sum = 0;
  for (size_t p = first; p < tokens.size(); ++p) {
    const float* x = l + static_cast<int64_t>(p - 1) * v;
    double mx = x[0];
    for (int64_t i = 1; i < v; ++i) mx = std::max(mx, static_cast<double>(x[i]));
    double z = 0;
    for (int64_t i = 0; i < v; ++i) z += std::exp(x[i] - mx);
    sum += x[tokens[p]] - mx - std::log(z);
  }
  return sum;
}

}  // namespace vela::eval::test
