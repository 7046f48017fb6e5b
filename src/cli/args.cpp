// Args implementation.
#include "cli/args.h"

#include "core/error.h"

namespace vela::cli {

Args::Args(int argc, char** argv, const std::set<std::string>& bool_flags) {
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() > 2 && a.rfind("--", 0) == 0) {
      std::string name = a.substr(2), value;
      size_t eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      } else if (bool_flags.count(name)) {
        value = "true";
      } else {
        VELA_CHECK(i + 1 < argc, "option --", name, " needs a value");
        value = argv[++i];
      }
      values_[name] = value;
      all_values_[name].push_back(value);
    } else {
      positionals_.push_back(a);
    }
  }
}

bool Args::has(const std::string& name) {
  used_.insert(name);
  return values_.count(name) != 0;
}

std::string Args::get(const std::string& name, const std::string& fallback) {
  used_.insert(name);
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

std::string Args::require(const std::string& name) {
  used_.insert(name);
  auto it = values_.find(name);
  VELA_CHECK(it != values_.end(), "missing required option --", name);
  return it->second;
}

std::vector<std::string> Args::get_all(const std::string& name) {
  used_.insert(name);
  auto it = all_values_.find(name);
  return it == all_values_.end() ? std::vector<std::string>{} : it->second;
}

int64_t Args::get_int(const std::string& name, int64_t fallback) {
  std::string v = get(name, "");
  if (v.empty()) return fallback;
  size_t pos = 0;
  int64_t r = 0;
  try {
    r = std::stoll(v, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  VELA_CHECK(pos == v.size() && !v.empty(), "option --", name, " expects an integer, got '", v, "'");
  return r;
}

double Args::get_double(const std::string& name, double fallback) {
  std::string v = get(name, "");
  if (v.empty()) return fallback;
  size_t pos = 0;
  double r = 0;
  try {
    r = std::stod(v, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  VELA_CHECK(pos == v.size(), "option --", name, " expects a number, got '", v, "'");
  return r;
}

void Args::check_all_used() const {
  for (const auto& [name, value] : values_)
    VELA_CHECK(used_.count(name), "unknown option --", name, " (see --help)");
}

}  // namespace vela::cli
