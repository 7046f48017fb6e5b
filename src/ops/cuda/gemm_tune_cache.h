// The GEMM tuning disk cache file (used by ops/cuda/gemm.cu; JSON kept out of nvcc's way):
// {"format": "vela-gemm-tune-1", "plans": [{"gpu", "cublaslt", "key": [int64...], "algo": hex}]}.
// Entries of other GPUs or cuBLASLt versions are kept when the file is rewritten.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vela::ops::cuda {

struct TuneCacheEntry {
  std::vector<int64_t> key;    // gemm.cu's plan key
  std::vector<uint64_t> algo;  // cublasLtMatmulAlgo_t::data
};

// Entries of `gpu` / `cublaslt_version` in the file at `path`; a missing file has none, an
// unreadable one throws IoError naming it.
std::vector<TuneCacheEntry> read_tune_cache(const std::string& path, const std::string& gpu,
                                            int64_t cublaslt_version);

// Replaces the entries of `gpu` / `cublaslt_version` in the file by `entries` (atomic rename).
void write_tune_cache(const std::string& path, const std::string& gpu, int64_t cublaslt_version,
                      const std::vector<TuneCacheEntry>& entries);

}  // namespace vela::ops::cuda
