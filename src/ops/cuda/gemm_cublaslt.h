// Knobs and introspection of the cuBLASLt GEMM behind ops::cuda::gemm (ops/cuda/gemm.cu).
// Thread-safe. CUDA builds only.
#pragma once

#include <cstdint>

namespace vela::ops::cuda {

// f32 x f32 GEMMs may use TF32 tensor cores (10-bit mantissa inputs) when allowed. Off by default,
// so f32 GEMMs are exact fp32; the environment variable VELA_ALLOW_TF32=1 turns it on at start.
void set_gemm_allow_tf32(bool allow);
bool gemm_allow_tf32();

// Number of cached GEMM plans (one heuristic query each) on `device`. A repeated shape adds none.
int64_t gemm_plan_cache_size(int device = 0);

}  // namespace vela::ops::cuda
