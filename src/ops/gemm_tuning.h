// GEMM algorithm search: which cuBLASLt algorithm each small-M GEMM shape runs.
//
// cuBLASLt's heuristic picks an algorithm per shape without running it; for the skinny GEMMs of a
// batched decode step (M = 9..256 rows against a weight matrix) its first choice is often not the
// fastest. A GemmTuningScope opened around the engine's warm-up (Engine start runs one decode
// forward per graph bucket) makes every new plan of such a shape time the heuristic's top
// candidates on its real operands (L2 flushed before each run, so weights stream from HBM as in a
// real step) and keep the fastest; the choice is cached in memory for the process and, with
// `cache_path`, on disk keyed by GPU name, cuBLASLt version and the full shape key, so a later
// start skips the timing. Split-K candidates are restricted to fp32 reductions as every plan is.
//
// Determinism: a tuned choice is fixed for the life of the process (plans are never re-tuned), so
// graph replay and eager runs in one process use the same algorithm. Two processes may choose
// differently (timings vary); a shared disk cache makes them agree. Knobs from the environment
// (gemm_tune_options_from_env): VELA_GEMM_TUNE=0 turns the search off, VELA_GEMM_TUNE_CACHE=FILE
// names the disk cache. A CPU build accepts a scope and does nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vela::ops {

struct GemmTuneOptions {
  bool enabled = true;
  int32_t max_rows = 256;     // GEMMs with more rows (prefill) keep the heuristic's choice
  int32_t n_candidates = 16;  // heuristic results timed per shape
  int32_t n_reps = 5;         // timed runs per candidate (the median counts)
  std::string cache_path;     // disk cache (JSON); empty: memory only
};

// VELA_GEMM_TUNE (0 = off) and VELA_GEMM_TUNE_CACHE over the defaults.
GemmTuneOptions gemm_tune_options_from_env();

// One tuned plan: the shape (vela's row-major M x N x K), how many candidates were timed, the
// heuristic's first choice and the kept one (microseconds, median of n_reps), or from_disk.
struct GemmTuneRecord {
  int64_t m = 0, n = 0, k = 0;
  std::string in_dtype, out_dtype;
  int32_t n_candidates = 0;
  int32_t chosen = 0;  // index in the heuristic's order (0 = its first choice)
  double heuristic_us = 0, best_us = 0;
  bool from_disk = false;
};

// RAII: tunes new small-M plans created on this thread while alive (CUDA builds; see above).
class GemmTuningScope {
 public:
  explicit GemmTuningScope(const GemmTuneOptions& options = gemm_tune_options_from_env());
  ~GemmTuningScope();
  GemmTuningScope(const GemmTuningScope&) = delete;
  GemmTuningScope& operator=(const GemmTuningScope&) = delete;

 private:
  bool active_ = false;
};

// Records of every tuned plan on CUDA device `device` (empty on a CPU build).
std::vector<GemmTuneRecord> gemm_tune_records(int device = 0);

}  // namespace vela::ops
