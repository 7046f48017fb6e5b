// The GEMM tuning disk cache file: see gemm_tune_cache.h.
#include "ops/cuda/gemm_tune_cache.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/json.h"
#include "core/mmap_file.h"

namespace vela::ops::cuda {
namespace {

json read_plans(const std::string& path) {
  std::ifstream in(path);
  if (!in) return json::array();
  std::stringstream ss;
  ss << in.rdbuf();
  json j;
  try {
    j = json::parse(ss.str());
  } catch (const std::exception& e) {
    VELA_THROW(IoError, "GEMM tuning cache ", path, " is not valid JSON (", e.what(),
               "); delete it or point VELA_GEMM_TUNE_CACHE elsewhere");
  }
  VELA_CHECK_T(IoError, j.is_object() && j.contains("plans") && j["plans"].is_array(),
               "GEMM tuning cache ", path, " has no \"plans\" array");
  return j["plans"];
}

bool ours(const json& e, const std::string& gpu, int64_t version) {
  return e.is_object() && e.value("gpu", "") == gpu && e.value("cublaslt", int64_t{0}) == version;
}

std::string to_hex(const std::vector<uint64_t>& words) {
  std::string out;
  char buf[17];
  for (uint64_t v : words) {
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
    out += buf;
  }
  return out;
}

}  // namespace

std::vector<TuneCacheEntry> read_tune_cache(const std::string& path, const std::string& gpu,
                                            int64_t cublaslt_version) {
  std::vector<TuneCacheEntry> out;
  for (const json& e : read_plans(path)) {
    if (!ours(e, gpu, cublaslt_version) || !e.contains("key") || !e["key"].is_array()) continue;
    const std::string hex = e.value("algo", "");
    if (hex.empty() || hex.size() % 16 != 0) continue;
    TuneCacheEntry entry;
    for (const json& v : e["key"]) {
      if (!v.is_number_integer()) continue;
      entry.key.push_back(v.get<int64_t>());
    }
    try {
      for (size_t i = 0; i < hex.size(); i += 16)
        entry.algo.push_back(std::stoull(hex.substr(i, 16), nullptr, 16));
    } catch (const std::exception&) {
      continue;  // a damaged entry is skipped: that shape is timed again
    }
    out.push_back(std::move(entry));
  }
  return out;
}

void write_tune_cache(const std::string& path, const std::string& gpu, int64_t cublaslt_version,
                      const std::vector<TuneCacheEntry>& entries) {
  json plans = json::array();
  for (const json& e : read_plans(path))
    if (!ours(e, gpu, cublaslt_version)) plans.push_back(e);
  for (const TuneCacheEntry& e : entries)
    plans.push_back(
        {{"gpu", gpu}, {"cublaslt", cublaslt_version}, {"key", e.key}, {"algo", to_hex(e.algo)}});
  const std::string text = json{{"format", "vela-gemm-tune-1"}, {"plans", plans}}.dump(1) + "\n";
  write_file_atomic(path, text.data(), text.size());
}

}  // namespace vela::ops::cuda
