// CUDA backward of the memory-bound elementwise ops: rotary (rotation by -theta), silu_and_mul,
// embedding (one block per distinct id adds its rows in token order: deterministic), and
// sum_rows (one thread per column, rows in order: deterministic). Math in fp32.
#include <algorithm>
#include <vector>

#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_backward_ops.h"

namespace vela::ops::cuda {

template <typename T>
static __global__ void rotary_backward_kernel(T* dx, int64_t token_stride, const int32_t* pos,
                                              const float* table, int64_t n_tokens, int64_t n_heads,
                                              int64_t head_dim, int64_t rotary_dim) {
  const int64_t half = rotary_dim / 2;
  const int64_t total = n_tokens * n_heads * half;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx % half, h = (idx / half) % n_heads, t = idx / (half * n_heads);
    const float* cs = table + static_cast<int64_t>(pos[t]) * rotary_dim;
    const float c = cs[i], s = cs[half + i];
    T* v = dx + t * token_stride + h * head_dim;
    const float d1 = to_float(v[i]), d2 = to_float(v[half + i]);
    v[i] = from_float<T>(d1 * c + d2 * s);
    v[half + i] = from_float<T>(d2 * c - d1 * s);
  }
}

void rotary_backward(Tensor& dx, const Tensor& positions, const Tensor& table) {
  DeviceGuard guard(dx.device().index);
  const int64_t n_tokens = dx.size(0), n_heads = dx.size(1), head_dim = dx.size(2);
  const int64_t rotary_dim = table.size(1);
  const int64_t total = n_tokens * n_heads * (rotary_dim / 2);
  if (total == 0) return;
  dispatch_float(dx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    rotary_backward_kernel<T><<<grid_stride_blocks(total, 256), 256, 0, current_stream()>>>(
        static_cast<T*>(dx.data_ptr()), dx.stride(0), positions.data<int32_t>(),
        table.data<float>(), n_tokens, n_heads, head_dim, rotary_dim);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

// grid.x covers a row's inter columns in chunks of blockDim.x * N; grid.y strides over rows
// (no 64-bit division per element; N = 16 bytes of T when the layout allows vector access).
struct SiluMulBwdArgs {
  int64_t n_rows, inter, x_stride, d_stride, dx_stride;
};

template <typename T, int N>
static __global__ void silu_mul_backward_kernel(const T* x, const T* dout, T* dx,
                                                SiluMulBwdArgs a) {
  const int64_t col = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * N;
  if (col >= a.inter) return;
  for (int64_t row = blockIdx.y; row < a.n_rows; row += gridDim.y) {
    float g[N], u[N], d[N], dg[N], du[N];
    load_float<N>(x + row * a.x_stride + col, g);
    load_float<N>(x + row * a.x_stride + a.inter + col, u);
    load_float<N>(dout + row * a.d_stride + col, d);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const float s = 1.0f / (1.0f + __expf(-g[i]));
      dg[i] = d[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
      du[i] = d[i] * g[i] * s;
    }
    store_float<N>(dx + row * a.dx_stride + col, dg);
    store_float<N>(dx + row * a.dx_stride + a.inter + col, du);
  }
}

void silu_and_mul_backward(const Tensor& x, const Tensor& dout, Tensor& dx) {
  DeviceGuard guard(x.device().index);
  RowLayout xl = row_layout(x), dl = row_layout(dout), gl = row_layout(dx);
  SiluMulBwdArgs a{dl.n_rows, dl.n_cols, xl.row_stride, dl.row_stride, gl.row_stride};
  if (a.n_rows == 0 || a.inter == 0) return;
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    constexpr int N = kVec16<T>;
    const T* px = static_cast<const T*>(x.data_ptr());
    const T* pd = static_cast<const T*>(dout.data_ptr());
    T* pg = static_cast<T*>(dx.data_ptr());
    const bool vec = a.inter % N == 0 && is_aligned(px, 16) && is_aligned(pd, 16) &&
                     is_aligned(pg, 16) && a.x_stride % N == 0 && a.d_stride % N == 0 &&
                     a.dx_stride % N == 0;
    constexpr int kThreads = 256;
    const int64_t per_row = ceil_div(a.inter, vec ? N : 1);
    dim3 grid(static_cast<unsigned>(ceil_div(per_row, kThreads)),
              static_cast<unsigned>(std::min<int64_t>(a.n_rows, 65535)));
    if (vec)
      silu_mul_backward_kernel<T, N><<<grid, kThreads, 0, current_stream()>>>(px, pd, pg, a);
    else
      silu_mul_backward_kernel<T, 1><<<grid, kThreads, 0, current_stream()>>>(px, pd, pg, a);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

// Deterministic embedding backward: the ids come to the host (one wait: this is the last op of a
// backward pass), a stable sort groups each distinct id's tokens in token order, and one block per
// distinct id adds its rows onto dweight[id] in that order. One writer per row and the CPU twin's
// order, so f32 results are bit-identical to the CPU and run to run; no atomics.
constexpr int kEmbThreads = 256;

template <typename T>
static __global__ void __launch_bounds__(kEmbThreads)
    embedding_backward_kernel(const int32_t* groups, int64_t n_groups, const T* dout,
                              int64_t d_stride, int64_t hidden, float* dweight) {
  // groups: [n_groups ids | n_groups + 1 offsets | token order]
  const int64_t g = blockIdx.x;
  const int32_t* offsets = groups + n_groups;
  const int32_t* order = offsets + n_groups + 1;
  float* dst = dweight + static_cast<int64_t>(groups[g]) * hidden;
  const int32_t k0 = offsets[g], k1 = offsets[g + 1];
  for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
    float acc = dst[c];
    for (int32_t k = k0; k < k1; ++k)
      acc += to_float(dout[static_cast<int64_t>(order[k]) * d_stride + c]);
    dst[c] = acc;
  }
}

void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dweight) {
  DeviceGuard guard(dweight.device().index);
  RowLayout dl = row_layout(dout);
  const int64_t n_tokens = ids.size(0), hidden = dweight.size(1);
  if (n_tokens == 0 || hidden == 0) return;
  const std::vector<int32_t> host_ids = ids.to_vector<int32_t>();
  std::vector<int32_t> order(static_cast<size_t>(n_tokens));
  for (int64_t t = 0; t < n_tokens; ++t) order[static_cast<size_t>(t)] = static_cast<int32_t>(t);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return host_ids[a] < host_ids[b]; });
  std::vector<int32_t> uniq, offsets;
  const int64_t vocab = dweight.size(0);
  for (int64_t k = 0; k < n_tokens; ++k) {
    const int32_t id = host_ids[static_cast<size_t>(order[static_cast<size_t>(k)])];
    VELA_CHECK(id >= 0 && id < vocab, "embedding_backward: id ", id, " is outside [0, ", vocab,
               ")");
    if (uniq.empty() || uniq.back() != id) {
      uniq.push_back(id);
      offsets.push_back(static_cast<int32_t>(k));
    }
  }
  offsets.push_back(static_cast<int32_t>(n_tokens));
  std::vector<int32_t> packed = uniq;
  packed.insert(packed.end(), offsets.begin(), offsets.end());
  packed.insert(packed.end(), order.begin(), order.end());
  Tensor groups = Tensor::from_vector(packed).to(dweight.device());
  const int64_t n_groups = static_cast<int64_t>(uniq.size());
  VELA_CHECK(n_groups <= (int64_t{1} << 31) - 1, "embedding_backward: too many distinct ids");
  dispatch_float(dout.dtype(), [&](auto tag) {
    using T = decltype(tag);
    embedding_backward_kernel<T><<<static_cast<unsigned>(n_groups), kEmbThreads, 0,
                                   current_stream()>>>(
        groups.data<int32_t>(), n_groups, static_cast<const T*>(dout.data_ptr()), dl.row_stride,
        hidden, dweight.data<float>());
    VELA_CUDA_CHECK_LAUNCH();
  });
}

template <typename T>
static __global__ void sum_rows_kernel(const T* x, int64_t stride, int64_t n_rows, int64_t n_cols,
                                       float* out, bool accumulate) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n_cols) return;
  float acc = 0.0f;
  for (int64_t r = 0; r < n_rows; ++r) acc += to_float(x[r * stride + c]);
  out[c] = accumulate ? out[c] + acc : acc;
}

void sum_rows(const Tensor& x, Tensor& out, bool accumulate) {
  DeviceGuard guard(x.device().index);
  RowLayout xl = row_layout(x);
  if (xl.n_cols == 0) return;
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    sum_rows_kernel<T><<<static_cast<int>(ceil_div(xl.n_cols, 128)), 128, 0, current_stream()>>>(
        static_cast<const T*>(x.data_ptr()), xl.row_stride, xl.n_rows, xl.n_cols, out.data<float>(),
        accumulate);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace vela::ops::cuda
