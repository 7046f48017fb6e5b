// Helpers for the tests that run the Hugging Face oracles through node: where the repository and
// the fetched assets (.cache/assets, see scripts/fetch_assets.sh) are, and running a command.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "test_assets.h"  // repo_root(), assets_dir(), VELA_SKIP_UNLESS_ASSET

namespace vela::test {

namespace fs = std::filesystem;

// stdout of `cmd`, or "" when it fails.
inline std::string run(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  int rc = pclose(f);
  if (rc != 0) return "";
  return out;
}

inline std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> v;
  size_t b = 0;
  while (b < s.size()) {
    size_t e = s.find('\n', b);
    if (e == std::string::npos) e = s.size();
    if (e > b) v.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return v;
}

}  // namespace vela::test
