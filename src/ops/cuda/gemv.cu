// Skinny GEMM for decode: c[M, N] = alpha * a[M, K] @ w[N, K]^T with M <= 8 (the batch rows of a
// decode step) and bf16/f16 inputs. It is a matrix-vector product per row of a, bound by reading
// w once: each warp owns one output column n, streams w's row n with 16-byte loads and dots it
// with the M rows of a (small, L1/L2-resident), then reduces across the warp (and across the W
// warps that split K when the output is too narrow to fill the SMs). cuBLASLt's kernels for
// M = 1..8 leave a good part of the bandwidth unused; this one keeps every SM streaming.
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace vela::ops::cuda {

namespace {

constexpr int kGemvWarps = 8;  // output columns per block
constexpr int kGemvVec = 8;    // elements per 16-byte load of bf16/f16

// W warps share one output column (each takes every W-th 256-element slice of K) so that narrow
// outputs (k / v projections: a few hundred columns) still put a block on every SM.
template <typename T, typename TC, int M, int W>
static __global__ void __launch_bounds__(kGemvWarps * 32)
    gemv_kernel(const T* __restrict__ a, int64_t lda, const T* __restrict__ w, int64_t ldw,
                TC* __restrict__ c, int64_t ldc, int64_t n, int64_t k, float alpha) {
  constexpr int kColsPerBlock = kGemvWarps / W;
  __shared__ float partial[kGemvWarps][M];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int part = warp % W;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kColsPerBlock + warp / W;
  const bool live = col < n;
  float acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = 0.0f;
  if (live) {
    const T* wr = w + col * ldw;
    constexpr int64_t kStep = 32 * kGemvVec * W;
    int64_t k0 = (static_cast<int64_t>(part) * 32 + lane) * kGemvVec;
    // Two loads of w in flight per lane, then the M dots.
    for (; k0 + kStep < k; k0 += 2 * kStep) {
      float w0[kGemvVec], w1[kGemvVec];
      load_float<kGemvVec>(wr + k0, w0);
      load_float<kGemvVec>(wr + k0 + kStep, w1);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float x0[kGemvVec], x1[kGemvVec];
        load_float<kGemvVec>(a + m * lda + k0, x0);
        load_float<kGemvVec>(a + m * lda + k0 + kStep, x1);
#pragma unroll
        for (int i = 0; i < kGemvVec; ++i) acc[m] += w0[i] * x0[i] + w1[i] * x1[i];
      }
    }
    if (k0 < k) {
      float w0[kGemvVec];
      load_float<kGemvVec>(wr + k0, w0);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float x0[kGemvVec];
        load_float<kGemvVec>(a + m * lda + k0, x0);
#pragma unroll
        for (int i = 0; i < kGemvVec; ++i) acc[m] += w0[i] * x0[i];
      }
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float s = warp_sum(acc[m]);
    if constexpr (W == 1) {
      if (live && lane == 0) c[m * ldc + col] = from_float<TC>(alpha * s);
    } else if (lane == 0) {
      partial[warp][m] = s;
    }
  }
  if constexpr (W > 1) {
    __syncthreads();
    if (live && part == 0 && lane < M) {
      float s = 0.0f;
#pragma unroll
      for (int p = 0; p < W; ++p) s += partial[warp + p][lane];
      c[lane * ldc + col] = from_float<TC>(alpha * s);
    }
  }
}

template <typename T, typename TC, int M, int W>
void launch_gemv(const Tensor& a, const Tensor& w, Tensor& c, float alpha) {
  const int64_t n = w.size(0), k = w.size(1);
  constexpr int kColsPerBlock = kGemvWarps / W;
  const unsigned blocks = static_cast<unsigned>((n + kColsPerBlock - 1) / kColsPerBlock);
  gemv_kernel<T, TC, M, W><<<blocks, kGemvWarps * 32, 0, current_stream()>>>(
      static_cast<const T*>(a.data_ptr()), a.stride(0), static_cast<const T*>(w.data_ptr()),
      w.stride(0), static_cast<TC*>(c.data_ptr()), c.stride(0), n, k, alpha);
  VELA_CUDA_CHECK_LAUNCH();
}

// Warps per column: enough blocks for ~4 per SM, but no more parts than K has 256-element slices.
template <typename T, typename TC, int M>
void dispatch_w(const Tensor& a, const Tensor& w, Tensor& c, float alpha) {
  const int64_t n = w.size(0), k = w.size(1);
  const int64_t want_blocks = 4 * static_cast<int64_t>(n_sms());
  int parts = 1;
  while (parts < kGemvWarps && n * parts / kGemvWarps < want_blocks &&
         k >= static_cast<int64_t>(2 * parts) * 32 * kGemvVec)
    parts *= 2;
  switch (parts) {
    case 1: return launch_gemv<T, TC, M, 1>(a, w, c, alpha);
    case 2: return launch_gemv<T, TC, M, 2>(a, w, c, alpha);
    case 4: return launch_gemv<T, TC, M, 4>(a, w, c, alpha);
    default: return launch_gemv<T, TC, M, 8>(a, w, c, alpha);
  }
}

template <typename T, typename TC>
void dispatch_m(const Tensor& a, const Tensor& w, Tensor& c, float alpha) {
  switch (a.size(0)) {
    case 1: return dispatch_w<T, TC, 1>(a, w, c, alpha);
    case 2: return dispatch_w<T, TC, 2>(a, w, c, alpha);
    case 3: return dispatch_w<T, TC, 3>(a, w, c, alpha);
    case 4: return dispatch_w<T, TC, 4>(a, w, c, alpha);
    case 5: return dispatch_w<T, TC, 5>(a, w, c, alpha);
    case 6: return dispatch_w<T, TC, 6>(a, w, c, alpha);
    case 7: return dispatch_w<T, TC, 7>(a, w, c, alpha);
    default: return dispatch_w<T, TC, 8>(a, w, c, alpha);
  }
}

}  // namespace

bool gemv_small_m(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b,
                  float alpha, float beta) {
  if (trans_a || !trans_b || beta != 0.0f || a.dim() != 2 || b.dim() != 2 || c.dim() != 2)
    return false;
  const DType dt = a.dtype();
  if ((dt != DType::kBF16 && dt != DType::kF16) || b.dtype() != dt) return false;
  if (c.dtype() != dt && c.dtype() != DType::kF32) return false;
  const int64_t m = a.size(0), k = a.size(1);
  if (m < 1 || m > 8 || k % kGemvVec != 0) return false;
  if (a.stride(1) != 1 || b.stride(1) != 1 || c.stride(1) != 1) return false;
  if (a.stride(0) % kGemvVec != 0 || b.stride(0) % kGemvVec != 0) return false;
  if (!is_aligned(a.data_ptr(), 16) || !is_aligned(b.data_ptr(), 16)) return false;
  DeviceGuard guard(c.device().index);
  if (dt == DType::kBF16) {
    if (c.dtype() == DType::kF32) dispatch_m<bf16, float>(a, b, c, alpha);
    else dispatch_m<bf16, bf16>(a, b, c, alpha);
  } else {
    if (c.dtype() == DType::kF32) dispatch_m<f16, float>(a, b, c, alpha);
    else dispatch_m<f16, f16>(a, b, c, alpha);
  }
  return true;
}

}  // namespace vela::ops::cuda
