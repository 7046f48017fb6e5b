// CUDA cross_entropy backward, one block per row: online max / sum over the row (block_max_sum),
// then dlogits = grad_scale * (softmax - (1 - eps) * onehot - eps / vocab), 0 on ignored rows,
// written in dlogits' dtype (f32, or bf16 / f16 straight for the LM head's backward GEMMs). With
// `losses` the row's loss (cross_entropy's formula) comes from the same first pass. Rows are read
// with 16-byte vector loads when the layout allows. dlogits (f32) may alias f32 logits: each
// thread reads its elements before writing them, and the target logit is read before the first
// barrier.
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_backward_ops.h"

namespace vela::ops::cuda {

namespace {

struct CeBackwardArgs {
  int64_t n_rows, vocab, l_stride, g_stride;
  float grad_scale;
  int32_t ignore_index;
  float eps;  // label smoothing
};

}  // namespace

template <typename T, typename G, int N>
static __global__ void ce_backward_kernel(const T* logits, const int32_t* targets, G* dlogits,
                                          float* losses, CeBackwardArgs a) {
  __shared__ float smem[64];
  __shared__ float smem_sum[32];
  const int64_t n_vec = a.vocab / N;
  for (int64_t row = blockIdx.x; row < a.n_rows; row += gridDim.x) {
    const T* x = logits + row * a.l_stride;
    G* g = dlogits + row * a.g_stride;
    const int32_t tgt = targets[row];
    if (tgt == a.ignore_index) {  // uniform across the block
      float z[N] = {};
      for (int64_t v = threadIdx.x; v < n_vec; v += blockDim.x) store_float<N>(g + v * N, z);
      if (losses != nullptr && threadIdx.x == 0) losses[row] = 0.0f;
      continue;
    }
    const bool tgt_ok = tgt >= 0 && tgt < a.vocab;
    const float x_tgt = tgt_ok ? to_float(x[tgt]) : 0.0f;  // before any thread writes (aliasing)
    MaxSum ms;
    float sum_x = 0.0f;
    for (int64_t v = threadIdx.x; v < n_vec; v += blockDim.x) {
      float f[N];
      load_float<N>(x + v * N, f);
#pragma unroll
      for (int i = 0; i < N; ++i) {
        max_sum_add(ms, f[i]);
        sum_x += f[i];
      }
    }
    ms = block_max_sum(ms, smem);
    if (losses != nullptr) {
      if (a.eps != 0.0f) sum_x = block_sum<true>(sum_x, smem_sum);
      if (threadIdx.x == 0) {
        const float lse = ms.m + logf(ms.s);
        float loss = NAN;
        if (tgt_ok) {
          loss = lse - x_tgt;
          if (a.eps != 0.0f)
            loss = (1.0f - a.eps) * loss + a.eps * (lse - sum_x / static_cast<float>(a.vocab));
        }
        losses[row] = loss;
      }
    }
    const float inv = 1.0f / ms.s, uniform = a.eps / static_cast<float>(a.vocab);
    for (int64_t v = threadIdx.x; v < n_vec; v += blockDim.x) {
      float f[N];
      load_float<N>(x + v * N, f);
#pragma unroll
      for (int i = 0; i < N; ++i) {
        float p = __expf(f[i] - ms.m) * inv - uniform;
        if (v * N + i == tgt) p -= 1.0f - a.eps;
        f[i] = a.grad_scale * p;
      }
      store_float<N>(g + v * N, f);
    }
  }
}

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, Tensor& dlogits,
                            float grad_scale, int32_t ignore_index, float label_smoothing,
                            const Tensor& losses) {
  DeviceGuard guard(logits.device().index);
  RowLayout xl = row_layout(logits), gl = row_layout(dlogits);
  if (xl.n_rows == 0) return;
  CeBackwardArgs a{xl.n_rows,  xl.n_cols,    xl.row_stride,  gl.row_stride,
                   grad_scale, ignore_index, label_smoothing};
  float* pl = losses.defined() ? losses.data<float>() : nullptr;
  const int blocks = static_cast<int>(std::min<int64_t>(xl.n_rows, 65535));
  dispatch_float(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    dispatch_float(dlogits.dtype(), [&](auto gtag) {
      using G = decltype(gtag);
      constexpr int N = 4;  // 16 bytes of f32 logits; 8 of a bf16 / f16 gradient
      const T* px = static_cast<const T*>(logits.data_ptr());
      G* pg = static_cast<G*>(dlogits.data_ptr());
      const bool vec = a.vocab % N == 0 && a.l_stride % N == 0 && a.g_stride % N == 0 &&
                       is_aligned(px, N * sizeof(T)) && is_aligned(pg, N * sizeof(G));
      const int threads = row_block_threads(vec ? a.vocab / N : a.vocab, 4);
      if (vec)
        ce_backward_kernel<T, G, N><<<blocks, threads, 0, current_stream()>>>(
            px, targets.data<int32_t>(), pg, pl, a);
      else
        ce_backward_kernel<T, G, 1><<<blocks, threads, 0, current_stream()>>>(
            px, targets.data<int32_t>(), pg, pl, a);
      VELA_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace vela::ops::cuda
