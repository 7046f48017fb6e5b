// Results of `vela eval`: the standard error of a mean, the table printed on stdout and the JSON
// results file. A result is the JSON object a task returns ({"task", "metrics", "counts",
// "config", ...}); the table lists its metrics with their "<name>_stderr" partners.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "core/json.h"

namespace vela::eval {

// Sample standard deviation / sqrt(n) (lm-evaluation-harness's mean_stderr); 0 when n < 2.
double mean_stderr(const std::vector<double>& values);
double mean(const std::vector<double>& values);

// | task | metric | value | ± stderr | rows, then one line of counts.
void print_table(std::FILE* out, const json& result);

// Writes `result` (pretty-printed) to `path`; IoError when it cannot.
void write_results(const std::string& path, const json& result);

}  // namespace vela::eval
