// CUDA RMSNorm, fused residual-add RMSNorm (vLLM's fused_add_rms_norm) and rms_norm's two pieces
// (row sums of squares in 128-column groups, the weight-scaled rows; ops/rms_norm.h).
//
// Fast path: the whole row lives in registers (up to kMaxVecPerThread 16-byte vectors per
// thread), all loads are issued before the reduction, and the row is written once: x is read
// once from HBM. A group of 4-32 lanes handles a row when it fits (small hidden, e.g. QK-norm
// over head_dim), several rows to a block; a whole block otherwise. Unaligned rows or very wide
// rows (> 1024 * 4 vectors) take a two-pass fallback that re-reads the row (from L1/L2). Statistics
// and math in fp32.
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/pdl.cuh"
#include "ops/rms_norm.h"

namespace vela::ops::cuda {

namespace {

constexpr int kMaxVecPerThread = 4;

struct RmsArgs {
  int64_t n_rows;
  int64_t n_cols;
  int64_t x_stride;
  int64_t res_stride;
  int64_t out_stride;
  float eps;
};

}  // namespace

// kRowThreads in {4, 8, 16, 32}: that many lanes per row, rows packed into the block (small
// hidden sizes such as QK-norm over head_dim); 0: one block per row.
template <typename T, typename W, bool kResidual, int kRowThreads>
static __global__ void __launch_bounds__(1024, 1)
    rms_norm_reg_kernel(const T* __restrict__ x, T* __restrict__ residual, const W* __restrict__ w,
                        T* __restrict__ out, RmsArgs args) {
  pdl_wait();  // launched with launch_pdl: inputs come from the kernel before
  pdl_launch_dependents();
  constexpr int N = kVec16<T>;
  constexpr bool kPackedRows = kRowThreads > 0;
  __shared__ float smem[2][32];
  const int n_vec = static_cast<int>(args.n_cols / N);
  const int row_threads = kPackedRows ? kRowThreads : blockDim.x;
  const int t = kPackedRows ? threadIdx.x % kRowThreads : threadIdx.x;
  const int rows_per_block = kPackedRows ? blockDim.x / kRowThreads : 1;
  const int group = kPackedRows ? threadIdx.x / kRowThreads : 0;
  const int64_t row_step = static_cast<int64_t>(gridDim.x) * rows_per_block;

  int parity = 0;
  // The loop bound is the same for the whole block, so every lane reaches every shuffle and
  // barrier; lanes past the last row just do no memory work.
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * rows_per_block; base < args.n_rows;
       base += row_step, parity ^= 1) {
    const int64_t row = base + group;
    const int n_vec_here = row < args.n_rows ? n_vec : 0;
    const T* xr = x + row * args.x_stride;
    T* rr = kResidual ? residual + row * args.res_stride : nullptr;
    // Issue every load of the row before using any of them. The row stays in registers as packed
    // 16-byte words (a 16-bit row costs half the registers of fp32) and is unpacked on use.
    uint4 raw[kMaxVecPerThread];
    uint4 raw_res[kResidual ? kMaxVecPerThread : 1];
#pragma unroll
    for (int j = 0; j < kMaxVecPerThread; ++j) {
      const int v = t + j * row_threads;
      if (v < n_vec_here) {
        raw[j] = *reinterpret_cast<const uint4*>(xr + v * N);
        if constexpr (kResidual) raw_res[j] = *reinterpret_cast<const uint4*>(rr + v * N);
      }
    }
    float sum_sq = 0.0f;
#pragma unroll
    for (int j = 0; j < kMaxVecPerThread; ++j) {
      const int v = t + j * row_threads;
      if (v < n_vec_here) {
        float f[N];
        unpack16<T>(raw[j], f);
        if constexpr (kResidual) {
          // residual += x, rounded to T: the norm sees exactly what is stored.
          float r[N];
          unpack16<T>(raw_res[j], r);
#pragma unroll
          for (int i = 0; i < N; ++i) f[i] += r[i];
          raw[j] = pack16<T>(f);
          *reinterpret_cast<uint4*>(rr + v * N) = raw[j];
          unpack16<T>(raw[j], f);
        }
#pragma unroll
        for (int i = 0; i < N; ++i) sum_sq += f[i] * f[i];
      }
    }
    if constexpr (kPackedRows) {
#pragma unroll
      for (int o = kRowThreads / 2; o > 0; o >>= 1)
        sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, o);
    } else {
      sum_sq = block_sum<false>(sum_sq, smem[parity]);  // alternate buffers: no second barrier
    }
    const float rstd = rsqrtf(sum_sq / static_cast<float>(args.n_cols) + args.eps);
    T* outr = out + row * args.out_stride;
#pragma unroll
    for (int j = 0; j < kMaxVecPerThread; ++j) {
      const int v = t + j * row_threads;
      if (v < n_vec_here) {
        float wv[N];
        load_float<N>(w + v * N, wv);
        float y[N];
        unpack16<T>(raw[j], y);
#pragma unroll
        for (int i = 0; i < N; ++i) y[i] = y[i] * rstd * wv[i];
        store_float<N>(outr + v * N, y);
      }
    }
  }
}

// Fallback: any alignment, any width. Pass 1 accumulates (and updates the residual), pass 2
// re-reads the row; each thread touches the same elements in both passes.
template <typename T, typename W, bool kResidual>
static __global__ void rms_norm_loop_kernel(const T* x, T* residual, const W* w, T* out,
                                            RmsArgs args) {
  pdl_wait();  // launched with launch_pdl: inputs come from the kernel before
  pdl_launch_dependents();
  __shared__ float smem[32];
  for (int64_t row = blockIdx.x; row < args.n_rows; row += gridDim.x) {
    const T* xr = x + row * args.x_stride;
    T* rr = kResidual ? residual + row * args.res_stride : nullptr;
    float sum_sq = 0.0f;
    for (int64_t i = threadIdx.x; i < args.n_cols; i += blockDim.x) {
      float val = to_float(xr[i]);
      if constexpr (kResidual) {
        T sum = from_float<T>(val + to_float(rr[i]));
        rr[i] = sum;
        val = to_float(sum);
      }
      sum_sq += val * val;
    }
    sum_sq = block_sum<true>(sum_sq, smem);
    const float rstd = rsqrtf(sum_sq / static_cast<float>(args.n_cols) + args.eps);
    const T* src = kResidual ? rr : xr;
    T* outr = out + row * args.out_stride;
    for (int64_t i = threadIdx.x; i < args.n_cols; i += blockDim.x)
      outr[i] = from_float<T>(to_float(src[i]) * rstd * to_float(w[i]));
  }
}

// One warp per (row, 128-column group), 4 columns a lane, summed in the order of the wgmma GEMM's
// residual-add epilogue (gemm_wgmma.cu, add_residual_epilogue): the same bits; beside them
// scaled = round(x * w).
template <typename T, typename W>
static __global__ void norm_pieces_kernel(const T* __restrict__ x, const W* __restrict__ w,
                                          int64_t n_rows, int64_t n_cols, int64_t x_stride,
                                          T* __restrict__ scaled, int64_t s_stride, int groups,
                                          float* __restrict__ row_sq) {
  static_assert(kRowSqGroup == 128, "4 columns per lane");
  pdl_wait();
  pdl_launch_dependents();
  const int lane = threadIdx.x & 31;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (item >= n_rows * groups) return;  // (whole warps)
  const int64_t row = item / groups, g = item % groups;
  const int64_t col = g * kRowSqGroup + lane * 4;
  const T* xr = x + row * x_stride;
  float ss = 0.0f;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    if (col + e < n_cols) {
      const float v = to_float(xr[col + e]);
      ss += v * v;
      scaled[row * s_stride + col + e] = from_float<T>(v * to_float(w[col + e]));
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (lane == 0) row_sq[item] = ss;
}

// out[r] = round(scaled[r] * rstd[r]), rstd from the row's sums of squares: a block per row.
template <typename T>
static __global__ void rms_scale_rows_kernel(const T* __restrict__ x, const float* __restrict__ sq,
                                             int64_t n_cols, int64_t x_stride, int groups,
                                             float eps, T* __restrict__ out, int64_t o_stride) {
  pdl_wait();
  pdl_launch_dependents();
  const int64_t row = blockIdx.x;
  float ss = 0.0f;
  for (int g = 0; g < groups; ++g) ss += sq[row * groups + g];
  const float rstd = rsqrtf(ss / static_cast<float>(n_cols) + eps);
  for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x)
    out[row * o_stride + i] = from_float<T>(to_float(x[row * x_stride + i]) * rstd);
}

namespace {

template <typename T, typename W, bool kResidual>
void launch_rms(const Tensor& x, T* residual, int64_t res_stride, const Tensor& w, float eps,
                Tensor& out) {
  constexpr int N = kVec16<T>;
  RowLayout xl = row_layout(x), ol = row_layout(out);
  RmsArgs args{xl.n_rows, xl.n_cols, xl.row_stride, res_stride, ol.row_stride, eps};
  if (args.n_rows == 0 || args.n_cols == 0) return;
  const T* px = static_cast<const T*>(x.data_ptr());
  const W* pw = static_cast<const W*>(w.data_ptr());
  T* po = static_cast<T*>(out.data_ptr());

  const int64_t n_vec = args.n_cols / N;
  bool vec = args.n_cols % N == 0 && is_aligned(px, 16) && is_aligned(po, 16) &&
             is_aligned(pw, 16) && args.x_stride % N == 0 && args.out_stride % N == 0 &&
             n_vec <= 1024 * kMaxVecPerThread;
  if constexpr (kResidual) vec = vec && is_aligned(residual, 16) && res_stride % N == 0;

  if (vec && n_vec <= 32 * kMaxVecPerThread) {
    // Lanes per row: enough for at most kMaxVecPerThread vectors each, at least 4.
    int row_threads = 4;
    while (row_threads * kMaxVecPerThread < n_vec) row_threads *= 2;
    constexpr int kThreads = 256;
    const int64_t blocks =
        std::min<int64_t>(ceil_div(args.n_rows, kThreads / row_threads), int64_t{1} << 30);
    const dim3 grid(static_cast<unsigned>(blocks));
    switch (row_threads) {
      case 4:
        launch_pdl(rms_norm_reg_kernel<T, W, kResidual, 4>, dim3(grid), dim3(kThreads), 0, px,
                   residual, pw, po, args);
        break;
      case 8:
        launch_pdl(rms_norm_reg_kernel<T, W, kResidual, 8>, dim3(grid), dim3(kThreads), 0, px,
                   residual, pw, po, args);
        break;
      case 16:
        launch_pdl(rms_norm_reg_kernel<T, W, kResidual, 16>, dim3(grid), dim3(kThreads), 0, px,
                   residual, pw, po, args);
        break;
      default:
        launch_pdl(rms_norm_reg_kernel<T, W, kResidual, 32>, dim3(grid), dim3(kThreads), 0, px,
                   residual, pw, po, args);
        break;
    }
  } else if (vec) {
    const int threads = row_block_threads(n_vec, kMaxVecPerThread);
    const int64_t blocks = std::min<int64_t>(args.n_rows, 1 << 30);
    launch_pdl(rms_norm_reg_kernel<T, W, kResidual, 0>, dim3(static_cast<int>(blocks)),
               dim3(threads), 0, px, residual, pw, po, args);
  } else {
    const int threads = row_block_threads(args.n_cols, 4);
    const int64_t blocks = std::min<int64_t>(args.n_rows, 1 << 30);
    launch_pdl(rms_norm_loop_kernel<T, W, kResidual>, dim3(static_cast<int>(blocks)), dim3(threads),
               0, px, residual, pw, po, args);
  }
  VELA_CUDA_CHECK_LAUNCH();
}

template <bool kResidual>
void rms_dispatch(const Tensor& x, Tensor* residual, const Tensor& w, float eps, Tensor& out) {
  DeviceGuard guard(x.device().index);
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* pr = nullptr;
    int64_t res_stride = 0;
    if constexpr (kResidual) {
      pr = static_cast<T*>(residual->data_ptr());
      res_stride = row_layout(*residual).row_stride;
    }
    if (w.dtype() == DType::kF32)
      launch_rms<T, float, kResidual>(x, pr, res_stride, w, eps, out);
    else
      launch_rms<T, T, kResidual>(x, pr, res_stride, w, eps, out);
  });
}

}  // namespace

void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  rms_dispatch<false>(x, nullptr, w, eps, out);
}

void add_rms_norm(const Tensor& x, Tensor& residual, const Tensor& w, float eps, Tensor& out) {
  rms_dispatch<true>(x, &residual, w, eps, out);
}

void norm_pieces(const Tensor& x, const Tensor& w, Tensor& scaled, Tensor& row_sq) {
  DeviceGuard guard(x.device().index);
  const RowLayout xl = row_layout(x);
  const int groups = static_cast<int>(row_sq.size(1));
  const int64_t items = xl.n_rows * groups;
  if (items == 0) return;
  constexpr int kWarps = 8;
  const dim3 grid(static_cast<unsigned>(ceil_div(items, int64_t{kWarps})));
  const int64_t s_stride = row_layout(scaled).row_stride;
  float* psq = static_cast<float*>(row_sq.data_ptr());
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = static_cast<const T*>(x.data_ptr());
    T* ps = static_cast<T*>(scaled.data_ptr());
    if (w.dtype() == DType::kF32)
      launch_pdl(norm_pieces_kernel<T, float>, grid, dim3(32 * kWarps), 0, px,
                 static_cast<const float*>(w.data_ptr()), xl.n_rows, xl.n_cols, xl.row_stride, ps,
                 s_stride, groups, psq);
    else
      launch_pdl(norm_pieces_kernel<T, T>, grid, dim3(32 * kWarps), 0, px,
                 static_cast<const T*>(w.data_ptr()), xl.n_rows, xl.n_cols, xl.row_stride, ps,
                 s_stride, groups, psq);
  });
  VELA_CUDA_CHECK_LAUNCH();
}

void rms_scale_rows(const Tensor& scaled, const Tensor& row_sq, float eps, Tensor& out) {
  DeviceGuard guard(scaled.device().index);
  const RowLayout sl = row_layout(scaled), ol = row_layout(out);
  if (sl.n_rows == 0 || sl.n_cols == 0) return;
  dispatch_float(scaled.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launch_pdl(rms_scale_rows_kernel<T>, dim3(static_cast<unsigned>(sl.n_rows)), dim3(256), 0,
               static_cast<const T*>(scaled.data_ptr()),
               static_cast<const float*>(row_sq.data_ptr()), sl.n_cols, sl.row_stride,
               static_cast<int>(row_sq.size(1)), eps, static_cast<T*>(out.data_ptr()),
               ol.row_stride);
  });
  VELA_CUDA_CHECK_LAUNCH();
}

}  // namespace vela::ops::cuda
