// A small command-line parser for vela's subcommands: `--name value`, `--name=value`, boolean
// `--flag`, and positionals. Every flag a command reads is declared through get_*/has, and
// check_all_used() turns any other flag into a clear error (no silently ignored options).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace vela::cli {

class Args {
 public:
  // argv[0..argc) are the arguments after the subcommand name. `bool_flags` never take a value.
  Args(int argc, char** argv, const std::set<std::string>& bool_flags = {});

  bool has(const std::string& name);
  std::string get(const std::string& name, const std::string& fallback);
  std::string require(const std::string& name);
  // Every value of a repeatable option, in order (`--lora a=DIR --lora b=DIR`).
  std::vector<std::string> get_all(const std::string& name);
  int64_t get_int(const std::string& name, int64_t fallback);
  double get_double(const std::string& name, double fallback);
  const std::vector<std::string>& positionals() const { return positionals_; }
  // Throws InvalidArgument naming any flag that was given but never read.
  void check_all_used() const;

 private:
  std::map<std::string, std::string> values_;  // the last value of each option
  std::map<std::string, std::vector<std::string>> all_values_;
  std::set<std::string> used_;
  std::vector<std::string> positionals_;
};

}  // namespace vela::cli
