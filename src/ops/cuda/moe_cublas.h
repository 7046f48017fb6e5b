// Prefill-sized grouped GEMM of ops/moe.h through cuBLAS (cublasGemmGroupedBatchedEx: one call,
// one problem per non-empty expert, tensor cores). It reads the expert offsets on the host (one
// device-to-host copy and stream sync per call), so it runs only outside a CUDA graph capture and
// for many rows (prefill, training); decode sizes keep the capturable kernels in moe.cu.
#pragma once

#include "core/tensor.h"

namespace vela::ops::cuda {

// Rows at or above which grouped_gemm takes the cuBLAS path (VELA_MOE_CUBLAS_ROWS overrides;
// 0 disables it).
int64_t moe_cublas_min_rows();

// out[seg e] = a[seg e] @ op(w[e]) for 16-bit a / w (out of a's dtype or f32). Returns false
// (nothing launched) when the path does not apply: f32 inputs, an f32 out (cuBLAS reported
// NOT_SUPPORTED for bf16 in / f32 out on the H200), a stream being captured.
bool grouped_gemm_cublas(const Tensor& a, const Tensor& w, const Tensor& offsets, bool trans_w,
                         Tensor& out);

}  // namespace vela::ops::cuda
