// CUDA LoRA ops (BGMV-style: every row reads its own adapter slot, so rows of different adapters
// share one launch; all the segments of one Linear, q|k|v or gate|up, share it too). Fast paths
// (16-byte aligned, `in` a multiple of 8; expand: r of 8, 16, 32 or 64):
//   shrink  block = 8 rows x 8 rank indices, one warp per rank index streaming its A row once
//           (16-byte loads) for the tile's rows of that slot (a tile mixing slots loops over its
//           distinct slots); a row's sum order depends only on the row: a request gets the same
//           bits alone as in a mixed batch
//   expand  block = 8 rows x 128 columns, one thread per column holding its B row (r floats) in
//           registers, reloaded only when the slot changes between rows
// Both shrinks split `in` into xa's parts (blockIdx.z / .y), so a decode batch of a few rows still
// spreads over the SMs; both expands add the parts in order while loading xa.
// Other layouts use the simple kernels (one block per row / one thread per column). Dropout = a
// grid-stride loop over the hashed mask (the same hash as the CPU twin: identical masks). No host
// reads: graph-capturable.
#include "ops/cuda/common.cuh"
#include "ops/cuda/pdl.cuh"
#include "ops/lora_hash.h"
#include "ops/lora_impl.h"

namespace vela::ops::cuda {

// A Linear's segments as kernel arguments (by value): shrink reads a[g]; expand reads b[g] and
// adds into y[g], whose columns are [col_end[g - 1], col_end[g]) of the concatenated column range.
template <typename T>
struct ShrinkSegs {
  const T* a[kMaxLoraSegments];
};
template <typename T>
struct ExpandSegs {
  const T* b[kMaxLoraSegments];
  T* y[kMaxLoraSegments];
  int64_t y_stride[kMaxLoraSegments];
  int64_t col_end[kMaxLoraSegments];
  int n;
};

// The segment of concatenated column c (c < col_end[n - 1]) and its first column.
template <typename T>
__device__ __forceinline__ int segment_of(const ExpandSegs<T>& sg, int64_t c, int64_t* first) {
  int g = 0;
  while (g + 1 < sg.n && c >= sg.col_end[g]) ++g;
  *first = g == 0 ? 0 : sg.col_end[g - 1];
  return g;
}

// Simple shrink: one block per row, a warp per rank index k of the n_seg * r (segment k / r).
template <typename T>
static __global__ void lora_shrink_kernel(const T* x, int64_t x_stride, ShrinkSegs<T> sg,
                                          const int32_t* slots, int64_t in, int64_t r,
                                          int64_t width, int64_t chunk, float* xa) {
  pdl_wait();  // launched with launch_pdl: inputs come from the kernel before
  pdl_launch_dependents();
  const int64_t i = blockIdx.x, z = blockIdx.y, n = gridDim.x;
  const int64_t j0 = z * chunk, j1 = j0 + chunk < in ? j0 + chunk : in;
  const int s = slots[i];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_warps = blockDim.x / 32;
  for (int64_t k = warp; k < width; k += n_warps) {
    float acc = 0.0f;
    if (s >= 0) {
      const T* ar = sg.a[k / r] + (static_cast<int64_t>(s) * r + k % r) * in;
      const T* xr = x + i * x_stride;
      for (int64_t j = j0 + lane; j < j1; j += 32) acc += to_float(xr[j]) * to_float(ar[j]);
      acc = warp_sum(acc);
    }
    if (lane == 0) xa[(z * n + i) * width + k] = acc;
  }
}

// Simple expand: grid (column tiles over the concatenated columns, rows).
template <typename T>
static __global__ void lora_expand_kernel(const float* xa, ExpandSegs<T> sg, const int32_t* slots,
                                          const float* scales, int64_t r, int parts) {
  pdl_wait();  // launched with launch_pdl: inputs come from the kernel before
  pdl_launch_dependents();
  extern __shared__ float v[];  // [n_seg * r]
  const int64_t i = blockIdx.y, n = gridDim.y, width = sg.n * r;
  const int s = slots[i];
  if (s < 0) return;
  for (int64_t k = threadIdx.x; k < width; k += blockDim.x) {
    float acc = 0.0f;
    for (int z = 0; z < parts; ++z) acc += xa[(z * n + i) * width + k];  // parts in order
    v[k] = acc;
  }
  __syncthreads();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= sg.col_end[sg.n - 1]) return;
  int64_t first;
  const int g = segment_of(sg, c, &first);
  const int64_t nc = sg.col_end[g] - first, cl = c - first;
  const T* br = sg.b[g] + (static_cast<int64_t>(s) * nc + cl) * r;
  float acc = 0.0f;
  for (int64_t k = 0; k < r; ++k) acc += to_float(br[k]) * v[g * r + k];
  T* yp = sg.y[g] + i * sg.y_stride[g] + cl;
  *yp = from_float<T>(to_float(*yp) + scales[s] * acc);
}

constexpr int kLoraTileRows = 8;  // rows per block (shrink and expand)
constexpr int kShrinkWarps = 8;   // rank indices per shrink block
constexpr int kExpandCols = 128;  // columns per expand block

// Shrink fast path: grid (row tiles, groups of 8 of the n_seg * r rank indices).
template <typename T>
static __global__ void __launch_bounds__(32 * kShrinkWarps)
    lora_shrink_tiled_kernel(const T* __restrict__ x, int64_t x_stride, ShrinkSegs<T> sg,
                             const int32_t* __restrict__ slots, int64_t n, int64_t in, int64_t r,
                             int64_t width, int64_t chunk, float* __restrict__ xa) {
  pdl_wait();  // launched with launch_pdl: inputs come from the kernel before
  pdl_launch_dependents();
  constexpr int V = kVec16<T>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t z = blockIdx.z, j0 = z * chunk, j1 = j0 + chunk < in ? j0 + chunk : in;
  xa += z * n * width;  // this part's [n, width]
  const int64_t k = static_cast<int64_t>(blockIdx.y) * kShrinkWarps + warp;
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kLoraTileRows;
  if (k >= width) return;
  const T* a = sg.a[k / r];
  const int64_t kk = k % r;
  const int nr = static_cast<int>(n - i0 < kLoraTileRows ? n - i0 : kLoraTileRows);
  int my_slot = lane < nr ? slots[i0 + lane] : -1;
  unsigned todo = __ballot_sync(0xffffffffu, my_slot >= 0) & ((1u << nr) - 1u);
  if (lane < nr && my_slot < 0) xa[(i0 + lane) * width + k] = 0.0f;
  while (todo != 0u) {
    const int lead = __ffs(todo) - 1;
    const int s = __shfl_sync(0xffffffffu, my_slot, lead);
    const unsigned mask = __ballot_sync(0xffffffffu, my_slot == s) & todo;
    todo &= ~mask;
    const T* ar = a + (static_cast<int64_t>(s) * r + kk) * in;
    float acc[kLoraTileRows];
#pragma unroll
    for (int j = 0; j < kLoraTileRows; ++j) acc[j] = 0.0f;
    for (int64_t c = j0 + lane * V; c < j1; c += 32 * V) {
      float av[V];
      load_float<V>(ar + c, av);
#pragma unroll
      for (int j = 0; j < kLoraTileRows; ++j) {
        if (mask & (1u << j)) {
          float xv[V];
          load_float<V>(x + (i0 + j) * x_stride + c, xv);
#pragma unroll
          for (int q = 0; q < V; ++q) acc[j] += xv[q] * av[q];
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kLoraTileRows; ++j) {
      if (mask & (1u << j)) {
        const float v = warp_sum(acc[j]);
        if (lane == 0) xa[(i0 + j) * width + k] = v;
      }
    }
  }
}

// Expand fast path: grid (column tiles of 128 over the concatenated columns, row tiles of 8);
// R = the rank (8..64). A thread's column lies in one segment; its B row sits in registers,
// reloaded only when the slot changes between rows.
template <typename T, int R>
static __global__ void __launch_bounds__(kExpandCols)
    lora_expand_tiled_kernel(const float* __restrict__ xa, ExpandSegs<T> sg,
                             const int32_t* __restrict__ slots, const float* __restrict__ scales,
                             int64_t n, int parts) {
  pdl_wait();  // launched with launch_pdl: inputs come from the kernel before
  pdl_launch_dependents();
  constexpr int V = kVec16<T>;
  __shared__ float v[kLoraTileRows][kMaxLoraSegments * R];
  __shared__ int s_slot[kLoraTileRows];
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * kLoraTileRows;
  const int width = sg.n * R;
  const int nr = static_cast<int>(n - i0 < kLoraTileRows ? n - i0 : kLoraTileRows);
  for (int e = threadIdx.x; e < kLoraTileRows * width; e += blockDim.x) {
    const int j = e / width, q = e % width;
    float acc = 0.0f;
    if (j < nr)
      for (int z = 0; z < parts; ++z) acc += xa[(z * n + i0 + j) * width + q];  // parts in order
    v[j][q] = acc;
  }
  if (threadIdx.x < kLoraTileRows)
    s_slot[threadIdx.x] = static_cast<int>(threadIdx.x) < nr ? slots[i0 + threadIdx.x] : -1;
  __syncthreads();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kExpandCols + threadIdx.x;
  if (c >= sg.col_end[sg.n - 1]) return;
  int64_t first;
  const int g = segment_of(sg, c, &first);
  const int64_t nc = sg.col_end[g] - first, cl = c - first;
  const T* bg = sg.b[g];
  T* yg = sg.y[g];
  const int64_t ys = sg.y_stride[g];
  float br[R];
  int loaded = -1;
  for (int j = 0; j < nr; ++j) {
    const int s = s_slot[j];
    if (s < 0) continue;
    if (s != loaded) {
      const T* bp = bg + (static_cast<int64_t>(s) * nc + cl) * R;
#pragma unroll
      for (int q0 = 0; q0 < R / V; ++q0) {
        float part[V];
        load_float<V>(bp + q0 * V, part);
#pragma unroll
        for (int q = 0; q < V; ++q) br[q0 * V + q] = part[q];
      }
      loaded = s;
    }
    float acc = 0.0f;
#pragma unroll
    for (int q = 0; q < R; ++q) acc += br[q] * v[j][g * R + q];
    T* yp = yg + (i0 + j) * ys + cl;
    *yp = from_float<T>(to_float(*yp) + scales[s] * acc);
  }
}

template <typename T>
static __global__ void lora_dropout_kernel(const T* x, int64_t x_stride, T* out, int64_t o_stride,
                                           int64_t n_rows, int64_t n_cols, uint64_t seed,
                                           uint64_t stream, float p) {
  const int64_t total = n_rows * n_cols;
  const float keep_scale = 1.0f / (1.0f - p);
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / n_cols, j = e % n_cols;
    const bool keep = lora_uniform(seed, stream, static_cast<uint64_t>(e)) >= p;
    const float val = to_float(x[i * x_stride + j]);
    out[i * o_stride + j] = from_float<T>(keep ? val * keep_scale : 0.0f);
  }
}

// The tiled kernels run whenever their layout holds, whatever the row count: the per-row shrink
// (one block per row, a scalar loop over `in` per rank index) was latency-bound inside the decode
// graph, ~40 us a Linear at B = 1 and B = 64 alike, 5x the base step in all
// (bench/results/lora_bgmv_h200.txt, engine rows); and a kernel choice that depends on the batch
// would give a row other bits in another batch.

void lora_shrink(const Tensor& x, const LoraSegments& segs, const Tensor& slots, Tensor& xa) {
  const RowLayout xl = row_layout(x);
  const int64_t r = segs.a[0].size(1), width = segs.n * r;
  const int64_t parts = xa.dim() == 3 ? xa.size(0) : 1, chunk = lora_chunk(xl.n_cols, parts);
  if (xl.n_rows == 0 || r == 0) return;
  VELA_CHECK(parts <= 65535, "lora_shrink: ", parts, " parts exceed the grid limit 65535");
  DeviceGuard guard(x.device().index);
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = static_cast<const T*>(x.data_ptr());
    ShrinkSegs<T> sg{};
    bool aligned = is_aligned(px, 16);
    for (int g = 0; g < segs.n; ++g) {
      sg.a[g] = static_cast<const T*>(segs.a[g].data_ptr());
      aligned = aligned && is_aligned(sg.a[g], 16);
    }
    constexpr int V = kVec16<T>;
    if (xl.n_cols % V == 0 && xl.row_stride % V == 0 && aligned) {
      dim3 grid(static_cast<unsigned>(ceil_div(xl.n_rows, kLoraTileRows)),
                static_cast<unsigned>(ceil_div(width, kShrinkWarps)), static_cast<unsigned>(parts));
      launch_pdl(lora_shrink_tiled_kernel<T>, dim3(grid), dim3(32 * kShrinkWarps), 0, px,
                 xl.row_stride, sg, slots.data<int32_t>(), xl.n_rows, xl.n_cols, r, width, chunk,
                 xa.data<float>());
      VELA_CUDA_CHECK_LAUNCH();
      return;
    }
    const int threads = static_cast<int>(32 * std::clamp<int64_t>(width, 1, 8));
    VELA_CHECK(xl.n_rows <= 0x7fffffff, "lora_shrink: too many rows");
    dim3 grid(static_cast<unsigned>(xl.n_rows), static_cast<unsigned>(parts));
    launch_pdl(lora_shrink_kernel<T>, dim3(grid), dim3(threads), 0, px, xl.row_stride, sg,
               slots.data<int32_t>(), xl.n_cols, r, width, chunk, xa.data<float>());
    VELA_CUDA_CHECK_LAUNCH();
  });
}

void lora_expand(const Tensor& xa, const LoraSegments& segs, const Tensor& slots,
                 const Tensor& scales) {
  const int64_t n_rows = xa.size(xa.dim() - 2), r = segs.b[0].size(2);
  const int parts = static_cast<int>(xa.dim() == 3 ? xa.size(0) : 1);
  if (n_rows == 0) return;
  VELA_CHECK(n_rows <= 65535, "lora_expand: ", n_rows, " rows exceed the grid limit 65535");
  DeviceGuard guard(xa.device().index);
  dispatch_float(segs.y[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    ExpandSegs<T> sg{};
    sg.n = segs.n;
    bool aligned = true;
    int64_t cols = 0;
    for (int g = 0; g < segs.n; ++g) {
      const RowLayout yl = row_layout(segs.y[g]);
      sg.b[g] = static_cast<const T*>(segs.b[g].data_ptr());
      sg.y[g] = static_cast<T*>(segs.y[g].data_ptr());
      sg.y_stride[g] = yl.row_stride;
      cols += yl.n_cols;
      sg.col_end[g] = cols;
      aligned = aligned && is_aligned(sg.b[g], 16);
    }
    if (cols == 0) return;
    auto tiled = [&](auto rank) {
      constexpr int R = decltype(rank)::value;
      dim3 grid(static_cast<unsigned>(ceil_div(cols, kExpandCols)),
                static_cast<unsigned>(ceil_div(n_rows, kLoraTileRows)));
      launch_pdl(lora_expand_tiled_kernel<T, R>, dim3(grid), dim3(kExpandCols), 0, xa.data<float>(),
                 sg, slots.data<int32_t>(), scales.data<float>(), n_rows, parts);
      VELA_CUDA_CHECK_LAUNCH();
    };
    if (aligned) {
      if (r == 8) return tiled(std::integral_constant<int, 8>{});
      if (r == 16) return tiled(std::integral_constant<int, 16>{});
      if (r == 32) return tiled(std::integral_constant<int, 32>{});
      if (r == 64) return tiled(std::integral_constant<int, 64>{});
    }
    constexpr int kThreads = 128;
    dim3 grid(static_cast<unsigned>(ceil_div(cols, kThreads)), static_cast<unsigned>(n_rows));
    const size_t smem = static_cast<size_t>(std::max<int64_t>(segs.n * r, 1)) * sizeof(float);
    launch_pdl(lora_expand_kernel<T>, dim3(grid), dim3(kThreads), smem, xa.data<float>(), sg,
               slots.data<int32_t>(), scales.data<float>(), r, parts);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

void lora_dropout(const Tensor& x, uint64_t seed, uint64_t stream, float p, Tensor& out) {
  const RowLayout xl = row_layout(x), ol = row_layout(out);
  if (xl.n_rows == 0 || xl.n_cols == 0) return;
  DeviceGuard guard(x.device().index);
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    constexpr int kThreads = 256;
    const int blocks = grid_stride_blocks(xl.n_rows * xl.n_cols, kThreads);
    lora_dropout_kernel<T><<<blocks, kThreads, 0, current_stream()>>>(
        static_cast<const T*>(x.data_ptr()), xl.row_stride, static_cast<T*>(out.data_ptr()),
        ol.row_stride, xl.n_rows, xl.n_cols, seed, stream, p);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace vela::ops::cuda
