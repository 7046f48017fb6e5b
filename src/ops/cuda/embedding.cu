// CUDA embedding gather: out[i, :] = weight[ids[i], :] (ids i32 or i64; out in weight's dtype or
// f32). Device ids are trusted: an id outside [0, vocab) yields a zero row instead of a fault.
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace vela::ops::cuda {

namespace {

struct EmbeddingArgs {
  int64_t n_tokens;
  int64_t hidden;
  int64_t vocab;
  int64_t weight_stride;
  int64_t out_stride;
  int64_t id_stride;
};

}  // namespace

// grid.x covers a row in chunks of blockDim.x * N elements; grid.y strides over tokens.
template <typename T, typename Tout, typename Id, int N>
static __global__ void embedding_kernel(const T* __restrict__ weight, const Id* __restrict__ ids,
                                        Tout* __restrict__ out, EmbeddingArgs args) {
  const int64_t col = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * N;
  if (col >= args.hidden) return;
  for (int64_t tok = blockIdx.y; tok < args.n_tokens; tok += gridDim.y) {
    const int64_t id = static_cast<int64_t>(ids[tok * args.id_stride]);
    float v[N];
    if (id >= 0 && id < args.vocab) {
      load_float<N>(weight + id * args.weight_stride + col, v);
    } else {
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] = 0.0f;
    }
    store_float<N>(out + tok * args.out_stride + col, v);
  }
}

namespace {

template <typename T, typename Tout, typename Id>
void launch_embedding(const Tensor& weight, const Tensor& ids, Tensor& out) {
  RowLayout wl = row_layout(weight), ol = row_layout(out);
  EmbeddingArgs args{ids.numel(),   wl.n_cols,     wl.n_rows,
                     wl.row_stride, ol.row_stride, ids.dim() == 0 ? 1 : ids.stride(-1)};
  if (args.n_tokens == 0 || args.hidden == 0) return;
  constexpr int N = sizeof(T) == 2 || sizeof(Tout) == 2 ? 8 : 4;
  const T* pw = static_cast<const T*>(weight.data_ptr());
  const Id* pi = static_cast<const Id*>(ids.data_ptr());
  Tout* po = static_cast<Tout*>(out.data_ptr());
  const bool vec = args.hidden % N == 0 && is_aligned(pw, 16) && is_aligned(po, 16) &&
                   args.weight_stride % N == 0 && args.out_stride % N == 0;
  constexpr int kThreads = 128;
  const int64_t per_row = ceil_div(args.hidden, vec ? N : 1);
  dim3 grid(static_cast<unsigned>(ceil_div(per_row, kThreads)),
            static_cast<unsigned>(std::min<int64_t>(args.n_tokens, 65535)));
  if (vec)
    embedding_kernel<T, Tout, Id, N><<<grid, kThreads, 0, current_stream()>>>(pw, pi, po, args);
  else
    embedding_kernel<T, Tout, Id, 1><<<grid, kThreads, 0, current_stream()>>>(pw, pi, po, args);
  VELA_CUDA_CHECK_LAUNCH();
}

}  // namespace

void embedding(const Tensor& weight, const Tensor& ids, Tensor& out) {
  DeviceGuard guard(weight.device().index);
  dispatch_float(weight.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto with_ids = [&](auto out_tag) {
      using Tout = decltype(out_tag);
      if (ids.dtype() == DType::kI64)
        launch_embedding<T, Tout, int64_t>(weight, ids, out);
      else
        launch_embedding<T, Tout, int32_t>(weight, ids, out);
    };
    if (out.dtype() == DType::kF32)
      with_ids(float{});
    else
      with_ids(T{});
  });
}

}  // namespace vela::ops::cuda
