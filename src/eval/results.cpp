// The results table and file.
#include "eval/results.h"

#include <cmath>
#include <fstream>

#include "core/error.h"

namespace vela::eval {

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double mean_stderr(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  double m = mean(v), ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  const auto n = static_cast<double>(v.size());
  return std::sqrt(ss / (n - 1)) / std::sqrt(n);
}

void print_table(std::FILE* out, const json& r) {
  const std::string task = r.value("task", "?");
  std::fprintf(out, "| %-8s | %-16s | %12s | %10s |\n", "task", "metric", "value", "stderr");
  std::fprintf(out, "|%s|%s|%s|%s|\n", std::string(10, '-').c_str(), std::string(18, '-').c_str(),
               std::string(14, '-').c_str(), std::string(12, '-').c_str());
  const json& m = r.at("metrics");
  for (const auto& [name, value] : m.items()) {
    if (name.size() > 7 && name.compare(name.size() - 7, 7, "_stderr") == 0) continue;
    std::string se = "";
    auto it = m.find(name + "_stderr");
    if (it != m.end()) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.4f", it->get<double>());
      se = std::string(buf).size() < 8 ? std::string(8 - std::string(buf).size(), ' ') : "";
      se += "± ";  // two bytes, one column: pad by display width, not bytes
      se += buf;
    }
    if (se.empty()) se = std::string(10, ' ');
    const double x = value.get<double>();
    std::fprintf(
        out,
        std::abs(x) < 1e7 ? "| %-8s | %-16s | %12.4f | %s |\n" : "| %-8s | %-16s | %12.4e | %s |\n",
        task.c_str(), name.c_str(), x, se.c_str());
  }
  if (r.contains("counts")) {
    std::string line;
    for (const auto& [k, v] : r.at("counts").items())
      line += (line.empty() ? "" : ", ") + k + " " + v.dump();
    std::fprintf(out, "%s\n", line.c_str());
  }
  std::fflush(out);
}

void write_results(const std::string& path, const json& result) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  VELA_CHECK_T(IoError, f.good(), "cannot write results file '", path, "'");
  f << result.dump(2) << "\n";
  f.close();
  VELA_CHECK_T(IoError, f.good(), "writing results file '", path, "' failed");
}

}  // namespace vela::eval
