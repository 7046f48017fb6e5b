// Where the tests find the repository and the fetched assets (real tokenizers, npm oracles: see
// scripts/fetch_assets.sh), and the one way a test that needs them (or a GPU) skips.
//
// A skip only takes effect in the TEST body or in SetUp(): GTEST_SKIP() inside a helper function
// returns from the helper and the test goes on. So the macros below are used in those places,
// and fixtures check IsSkipped() after calling a base SetUp().
//
// Missing assets skip by default (a hand build before fetch_assets.sh passes). With
// VELA_REQUIRE_ASSETS=1 (scripts/test.sh, hence CI) a missing asset fails the test instead, so an
// oracle test can never pass silently where the assets were meant to be.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

namespace vela::test {

// The repository root: the first parent of the working directory with scripts/fetch_assets.sh.
inline std::filesystem::path repo_root() {
  std::filesystem::path p = std::filesystem::current_path();
  for (int i = 0; i < 5; ++i) {
    if (std::filesystem::exists(p / "scripts" / "fetch_assets.sh")) return p;
    p = p.parent_path();
  }
  return std::filesystem::current_path();
}

// $VELA_ASSETS, else <repo>/.cache/assets.
inline std::filesystem::path assets_dir() {
  if (const char* a = std::getenv("VELA_ASSETS")) return a;
  return repo_root() / ".cache" / "assets";
}

inline bool assets_required() {
  const char* r = std::getenv("VELA_REQUIRE_ASSETS");
  return r != nullptr && std::strcmp(r, "") != 0 && std::strcmp(r, "0") != 0;
}

}  // namespace vela::test

// Skips the test (or, with VELA_REQUIRE_ASSETS=1, fails it) unless `asset` (a path) exists. Use in
// a TEST body or SetUp() only.
#define VELA_SKIP_UNLESS_ASSET(asset)                                                  \
  do {                                                                                 \
    const std::filesystem::path vela_asset_path_ = (asset);                            \
    if (!std::filesystem::exists(vela_asset_path_)) {                                  \
      if (::vela::test::assets_required())                                             \
        FAIL() << vela_asset_path_ << " is missing (VELA_REQUIRE_ASSETS is set): run " \
               << "scripts/fetch_assets.sh";                                           \
      GTEST_SKIP() << vela_asset_path_ << " is missing: run scripts/fetch_assets.sh";  \
    }                                                                                  \
  } while (0)

// Skips unless a CUDA device is usable (needs core/cuda/cuda_api.h). TEST body or SetUp() only.
#define VELA_SKIP_UNLESS_CUDA()                                              \
  do {                                                                       \
    if (!::vela::cuda::available()) GTEST_SKIP() << "no usable CUDA device"; \
  } while (0)
