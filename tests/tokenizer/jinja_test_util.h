// Shared helpers for the chat-template tests: repository paths, the pinned strftime_now clock,
// and running the oracle scripts (Python Jinja2, @huggingface/jinja) as child processes.
#pragma once

#include <array>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include <sys/wait.h>

#include "test_assets.h"  // repo_root(), assets_dir(), VELA_SKIP_UNLESS_ASSET

namespace vela::test {

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// 2024-07-26 14:05:09 local time, the FIXED_NOW of tools/jinja_oracle.py and the Date the
// @huggingface/jinja oracle script pins.
inline std::tm fixed_time() {
  std::tm t{};
  t.tm_year = 124;
  t.tm_mon = 6;
  t.tm_mday = 26;
  t.tm_hour = 14;
  t.tm_min = 5;
  t.tm_sec = 9;
  t.tm_isdst = -1;
  std::mktime(&t);  // fills tm_wday / tm_yday
  return t;
}

// Runs a shell command; returns (exit status, stdout).
inline std::pair<int, std::string> run_command(const std::string& cmd) {
  std::string out;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return {-1, ""};
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

inline std::string quote(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

// A python3 that can import jinja2 (pyenv's or Debian's python3-jinja2), or "".
inline std::string python_with_jinja2() {
  for (const char* py : {"python3", "/usr/bin/python3"}) {
    if (run_command(std::string(py) + " -c 'import jinja2' 2>/dev/null").first == 0) return py;
  }
  return "";
}

}  // namespace vela::test
