// Helpers shared by the core tests: a self-removing temp directory, raw file IO, and checks that a
// statement throws a given vela::Error type whose message names what went wrong.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <vector>

namespace vela::test {

// A fresh directory under the system temp dir, named after the running test; removed on scope exit.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "vela_test_" + std::to_string(getpid()) + "_" +
                       std::to_string(counter.fetch_add(1)) + "_" +
                       (info != nullptr ? info->name() : "anon");
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // Names of the directory's entries, sorted (to check that no temp files were left behind).
  std::vector<std::string> listing() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path_))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << "cannot write " << path;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Passes when `fn` throws exactly-catchable E whose what() contains every one of `parts`.
template <typename E, typename Fn>
::testing::AssertionResult throws_with(Fn&& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
  } catch (const E& e) {
    std::string msg = e.what();
    for (const std::string& p : parts)
      if (msg.find(p) == std::string::npos)
        return ::testing::AssertionFailure() << "message lacks \"" << p << "\": " << msg;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw the wrong type: " << e.what();
  } catch (...) {
    return ::testing::AssertionFailure() << "threw a non-std exception";
  }
  return ::testing::AssertionFailure() << "did not throw";
}

}  // namespace vela::test

// EXPECT_THROW_WITH(statement, ErrorType, "part", ...): statement throws ErrorType and the message
// contains every part.
#define EXPECT_THROW_WITH(stmt, ErrorType, ...) \
  EXPECT_TRUE(::vela::test::throws_with<ErrorType>([&] { stmt; }, {__VA_ARGS__}))
