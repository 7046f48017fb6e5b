// CUDA rotary position embedding, HF rotate_half (NeoX) layout, in place on packed
// [n_tokens, n_heads, head_dim] (token and head strides free; features contiguous), with i32
// positions and the f32 [max_positions, rotary_dim] table (cos | sin halves). One thread per
// rotated pair (i, i + rotary_dim / 2). Device positions are trusted: a position outside the table
// leaves its token unrotated instead of faulting.
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace vela::ops::cuda {

namespace {

struct RotaryArgs {
  int64_t n_tokens;
  int64_t n_heads;
  int64_t half;          // rotary_dim / 2
  int64_t token_stride;  // elements
  int64_t head_stride;
  int64_t pos_stride;
  int64_t max_positions;
  int64_t table_stride;
};

}  // namespace

template <typename T>
static __global__ void rotary_kernel(T* x, const int32_t* __restrict__ positions,
                                     const float* __restrict__ table, RotaryArgs args) {
  const int64_t n = args.n_tokens * args.n_heads * args.half;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += step) {
    const int64_t i = idx % args.half;
    const int64_t token_head = idx / args.half;
    const int64_t head = token_head % args.n_heads;
    const int64_t token = token_head / args.n_heads;
    const int64_t pos = positions[token * args.pos_stride];
    if (pos < 0 || pos >= args.max_positions) continue;
    const float* row = table + pos * args.table_stride;
    const float c = row[i], s = row[args.half + i];
    T* xh = x + token * args.token_stride + head * args.head_stride;
    const float x1 = to_float(xh[i]), x2 = to_float(xh[i + args.half]);
    xh[i] = from_float<T>(rope_lo(x1, x2, c, s));
    xh[i + args.half] = from_float<T>(rope_hi(x1, x2, c, s));
  }
}

void rotary(Tensor& x, const Tensor& positions, const Tensor& table) {
  VELA_ASSERT(x.dim() == 3 && (x.size(2) <= 1 || x.stride(2) == 1), "rotary on ", x.str());
  RotaryArgs args{x.size(0),   x.size(1),           table.size(1) / 2, x.stride(0),
                  x.stride(1), positions.stride(0), table.size(0),     table.stride(0)};
  const int64_t n = args.n_tokens * args.n_heads * args.half;
  if (n == 0) return;
  DeviceGuard guard(x.device().index);
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    constexpr int kThreads = 256;
    rotary_kernel<T><<<grid_stride_blocks(n, kThreads), kThreads, 0, current_stream()>>>(
        static_cast<T*>(x.data_ptr()), static_cast<const int32_t*>(positions.data_ptr()),
        static_cast<const float*>(table.data_ptr()), args);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace vela::ops::cuda
