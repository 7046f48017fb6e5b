// CUDA SwiGLU: out = silu(gate) * up in fp32, rows with free strides (gate and up may be the two
// halves of one fused projection). 16-byte vectors when every row start is aligned.
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/pdl.cuh"

namespace vela::ops::cuda {

namespace {

struct SiluMulArgs {
  int64_t n_rows;
  int64_t n_cols;
  int64_t gate_stride;
  int64_t up_stride;
  int64_t out_stride;
};

}  // namespace

// grid.x covers a row in chunks of blockDim.x * N elements; grid.y strides over rows.
template <typename T, int N>
static __global__ void silu_mul_kernel(const T* gate, const T* up, T* out, SiluMulArgs args) {
  pdl_wait();  // launched with launch_pdl: inputs come from the kernel before
  pdl_launch_dependents();
  const int64_t col = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * N;
  if (col >= args.n_cols) return;
  for (int64_t row = blockIdx.y; row < args.n_rows; row += gridDim.y) {
    float g[N], u[N];
    load_float<N>(gate + row * args.gate_stride + col, g);
    load_float<N>(up + row * args.up_stride + col, u);
#pragma unroll
    for (int i = 0; i < N; ++i) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    store_float<N>(out + row * args.out_stride + col, g);
  }
}

void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out) {
  RowLayout gl = row_layout(gate), ul = row_layout(up), ol = row_layout(out);
  SiluMulArgs args{gl.n_rows, gl.n_cols, gl.row_stride, ul.row_stride, ol.row_stride};
  if (args.n_rows == 0 || args.n_cols == 0) return;
  DeviceGuard guard(gate.device().index);
  dispatch_float(gate.dtype(), [&](auto tag) {
    using T = decltype(tag);
    constexpr int N = kVec16<T>;
    const T* pg = static_cast<const T*>(gate.data_ptr());
    const T* pu = static_cast<const T*>(up.data_ptr());
    T* po = static_cast<T*>(out.data_ptr());
    const bool vec = args.n_cols % N == 0 && is_aligned(pg, 16) && is_aligned(pu, 16) &&
                     is_aligned(po, 16) && args.gate_stride % N == 0 && args.up_stride % N == 0 &&
                     args.out_stride % N == 0;
    constexpr int kThreads = 256;
    const int64_t per_row = ceil_div(args.n_cols, vec ? N : 1);
    const unsigned grid_x = static_cast<unsigned>(ceil_div(per_row, kThreads));
    const unsigned grid_y = static_cast<unsigned>(std::min<int64_t>(args.n_rows, 65535));
    dim3 grid(grid_x, grid_y);
    if (vec)
      launch_pdl(silu_mul_kernel<T, N>, dim3(grid), dim3(kThreads), 0, pg, pu, po, args);
    else
      launch_pdl(silu_mul_kernel<T, 1>, dim3(grid), dim3(kThreads), 0, pg, pu, po, args);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace vela::ops::cuda
