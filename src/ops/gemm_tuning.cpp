// GemmTuningScope and the environment knobs; the search itself lives in ops/cuda/gemm.cu.
#include "ops/gemm_tuning.h"

#include <cstdlib>

#ifdef VELA_HAS_CUDA
#include "ops/cuda/gemm_cublaslt.h"
#endif

namespace vela::ops {

GemmTuneOptions gemm_tune_options_from_env() {
  GemmTuneOptions o;
  // Opt-in until measured on the H200 (docs/kernels.md "Batch decode"): VELA_GEMM_TUNE=1.
  const char* v = std::getenv("VELA_GEMM_TUNE");
  o.enabled = v != nullptr && !(v[0] == '0' && v[1] == '\0');
  if (const char* p = std::getenv("VELA_GEMM_TUNE_CACHE")) o.cache_path = p;
  return o;
}

GemmTuningScope::GemmTuningScope(const GemmTuneOptions& options) {
#ifdef VELA_HAS_CUDA
  if (!options.enabled) return;
  cuda::gemm_tuning_begin(options);
  active_ = true;
#else
  (void)options;
#endif
}

GemmTuningScope::~GemmTuningScope() {
#ifdef VELA_HAS_CUDA
  if (active_) cuda::gemm_tuning_end();
#endif
}

std::vector<GemmTuneRecord> gemm_tune_records(int device) {
#ifdef VELA_HAS_CUDA
  return cuda::gemm_tune_records(device);
#else
  (void)device;
  return {};
#endif
}

}  // namespace vela::ops
