// CUDA argmax and top-k over the last dim (ties resolve to the lower index).
//
// argmax: one block per row, vector loads, (value, index) reductions; NaN ranks first.
// topk: one block per row. A 4-pass 8-bit radix select over order-preserving float keys finds
// the k-th largest key; a pass in index order collects the keys above it (any order) and the
// lowest-indexed keys equal to it; a bitonic sort in shared memory orders the k candidates by
// (value desc, index asc). Values are re-read from x, so -0.0 / +0.0 come back as stored.
// NaN ranks above +inf (like torch.topk); -0.0 and +0.0 tie.
#include <climits>

#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"

namespace vela::ops::cuda {

namespace {

constexpr int kTopkThreads = 512;
constexpr int64_t kMaxTopK = 4096;  // candidates sorted in 32 KiB of shared memory

struct ArgmaxArgs {
  int64_t n_rows;
  int64_t n_cols;
  int64_t x_stride;
  int64_t out_stride;
};

struct TopkArgs {
  int64_t n_rows;
  int64_t n_cols;
  int64_t x_stride;
  int64_t values_stride;
  int64_t indices_stride;
  int64_t k;
  int64_t n_padded;  // next power of two >= k
};

}  // namespace

// b beats a: NaN above everything (like torch), then the larger value, then the lower index.
static __device__ __forceinline__ bool argmax_better(float va, int32_t ia, float vb, int32_t ib) {
  const bool a_nan = va != va, b_nan = vb != vb;
  if (a_nan != b_nan) return b_nan;
  if (!a_nan && va != vb) return vb > va;
  return ib < ia;
}

template <typename T, int N>
static __global__ void argmax_kernel(const T* __restrict__ x, int32_t* __restrict__ out,
                                     ArgmaxArgs args) {
  __shared__ float s_val[32];
  __shared__ int32_t s_idx[32];
  const int64_t n_vec = args.n_cols / N;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  for (int64_t row = blockIdx.x; row < args.n_rows; row += gridDim.x) {
    const T* xr = x + row * args.x_stride;
    float best = -INFINITY;
    int32_t best_idx = INT_MAX;
    for (int64_t v = threadIdx.x; v < n_vec; v += blockDim.x) {
      float f[N];
      load_float<N>(xr + v * N, f);
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const int32_t idx = static_cast<int32_t>(v * N + i);
        if (argmax_better(best, best_idx, f[i], idx)) {
          best = f[i];
          best_idx = idx;
        }
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, best, o);
      const int32_t oi = __shfl_xor_sync(0xffffffffu, best_idx, o);
      if (argmax_better(best, best_idx, ov, oi)) {
        best = ov;
        best_idx = oi;
      }
    }
    if (lane == 0) {
      s_val[warp] = best;
      s_idx[warp] = best_idx;
    }
    __syncthreads();
    if (warp == 0) {
      best = lane < n_warps ? s_val[lane] : -INFINITY;
      best_idx = lane < n_warps ? s_idx[lane] : INT_MAX;
      for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, best, o);
        const int32_t oi = __shfl_xor_sync(0xffffffffu, best_idx, o);
        if (argmax_better(best, best_idx, ov, oi)) {
          best = ov;
          best_idx = oi;
        }
      }
      if (lane == 0) out[row * args.out_stride] = best_idx;
    }
    __syncthreads();
  }
}

// Larger float -> larger key. -0.0 maps to +0.0's key; every NaN to the top key.
static __device__ __forceinline__ uint32_t float_key(float f) {
  if (f != f) return 0xffffffffu;
  if (f == 0.0f) f = 0.0f;
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Sort key of a candidate: descending order = key desc, then index asc. 0 is below every
// candidate (its index part is 0xffffffff - idx > 0), so it pads.
static __device__ __forceinline__ unsigned long long candidate(uint32_t key, int64_t idx) {
  return (static_cast<unsigned long long>(key) << 32) |
         static_cast<unsigned long long>(0xffffffffu - static_cast<uint32_t>(idx));
}

template <typename T>
static __global__ void __launch_bounds__(kTopkThreads)
    topk_kernel(const T* __restrict__ x, float* __restrict__ values, int32_t* __restrict__ indices,
                TopkArgs args) {
  extern __shared__ unsigned long long cand[];  // [n_padded]
  __shared__ uint32_t hist[256];
  __shared__ uint32_t s_warp_counts[32];
  __shared__ uint32_t s_digit, s_count_above, s_n_gt;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  const uint32_t k = static_cast<uint32_t>(args.k);

  for (int64_t row = blockIdx.x; row < args.n_rows; row += gridDim.x) {
    const T* xr = x + row * args.x_stride;

    // 1. Radix select: after four 8-bit digits, `prefix` is the k-th largest key and `k_rem`
    //    how many keys equal to it belong to the top k.
    uint32_t prefix = 0, mask = 0, k_rem = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
      for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
      __syncthreads();
      for (int64_t c = threadIdx.x; c < args.n_cols; c += blockDim.x) {
        const uint32_t key = float_key(to_float(xr[c]));
        if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 0xffu], 1u);
      }
      __syncthreads();
      if (warp == 0) {
        // Lane l owns digits 255 - 8l down to 248 - 8l; a scan over lanes gives, per digit, the
        // count of keys with a larger digit. Exactly one lane holds the k_rem-th key.
        uint32_t counts[8], lane_total = 0;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          counts[j] = hist[255 - 8 * lane - j];
          lane_total += counts[j];
        }
        uint32_t incl = lane_total;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
          const uint32_t y = __shfl_up_sync(0xffffffffu, incl, o);
          if (lane >= o) incl += y;
        }
        const uint32_t excl = incl - lane_total;
        if (excl < k_rem && k_rem <= incl) {
          uint32_t above = excl;
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            if (above + counts[j] >= k_rem) {
              s_digit = 255 - 8 * lane - j;
              s_count_above = above;
              break;
            }
            above += counts[j];
          }
        }
      }
      __syncthreads();
      prefix |= s_digit << shift;
      mask |= 0xffu << shift;
      k_rem -= s_count_above;
    }
    const uint32_t threshold = prefix;
    const uint32_t n_gt = k - k_rem;

    // 2. Collect in index order: keys above the threshold anywhere in [0, n_gt); the first k_rem
    //    keys equal to it (lowest indices, by a block scan per chunk) in [n_gt, k).
    if (threadIdx.x == 0) s_n_gt = 0;
    __syncthreads();
    uint32_t eq_base = 0;  // equal keys seen in earlier chunks (uniform across the block)
    for (int64_t base = 0; base < args.n_cols; base += blockDim.x) {
      const int64_t c = base + threadIdx.x;
      const bool valid = c < args.n_cols;
      const uint32_t key = valid ? float_key(to_float(xr[c])) : 0u;
      if (valid && key > threshold) cand[atomicAdd(&s_n_gt, 1u)] = candidate(key, c);
      if (eq_base < k_rem) {  // uniform branch
        const bool eq = valid && key == threshold;
        const uint32_t ballot = __ballot_sync(0xffffffffu, eq);
        if (lane == 0) s_warp_counts[warp] = __popc(ballot);
        __syncthreads();
        uint32_t warp_offset = 0, chunk_total = 0;
        for (int w = 0; w < n_warps; ++w) {
          const uint32_t cnt = s_warp_counts[w];
          if (w < warp) warp_offset += cnt;
          chunk_total += cnt;
        }
        const uint32_t rank = eq_base + warp_offset + __popc(ballot & ((1u << lane) - 1u));
        if (eq && rank < k_rem) cand[n_gt + rank] = candidate(key, c);
        eq_base += chunk_total;
        __syncthreads();
      }
    }
    for (int64_t i = k + threadIdx.x; i < args.n_padded; i += blockDim.x) cand[i] = 0ull;
    __syncthreads();

    // 3. Bitonic sort, descending.
    const int n_padded = static_cast<int>(args.n_padded);
    for (int size = 2; size <= n_padded; size <<= 1) {
      for (int stride = size >> 1; stride > 0; stride >>= 1) {
        for (int t = threadIdx.x; t < n_padded / 2; t += blockDim.x) {
          const int i = 2 * t - (t & (stride - 1));
          const int j = i + stride;
          const bool descending = (i & size) == 0;
          const unsigned long long a = cand[i], b = cand[j];
          if ((a < b) == descending) {
            cand[i] = b;
            cand[j] = a;
          }
        }
        __syncthreads();
      }
    }

    // 4. Write values (re-read from x) and indices.
    for (int64_t j = threadIdx.x; j < args.k; j += blockDim.x) {
      const int64_t idx = 0xffffffffu - static_cast<uint32_t>(cand[j] & 0xffffffffull);
      values[row * args.values_stride + j] = to_float(xr[idx]);
      indices[row * args.indices_stride + j] = static_cast<int32_t>(idx);
    }
    __syncthreads();
  }
}

void argmax(const Tensor& x, Tensor& out) {
  RowLayout xl = row_layout(x);
  ArgmaxArgs args{xl.n_rows, xl.n_cols, xl.row_stride, out.dim() == 0 ? 1 : out.stride(-1)};
  if (args.n_rows == 0 || args.n_cols == 0) return;
  DeviceGuard guard(x.device().index);
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    constexpr int N = kVec16<T>;
    const T* px = static_cast<const T*>(x.data_ptr());
    int32_t* po = static_cast<int32_t*>(out.data_ptr());
    const bool vec = args.n_cols % N == 0 && is_aligned(px, 16) && args.x_stride % N == 0;
    const int threads = row_block_threads(vec ? args.n_cols / N : args.n_cols, 4);
    const int blocks = static_cast<int>(std::min<int64_t>(args.n_rows, 1 << 30));
    if (vec)
      argmax_kernel<T, N><<<blocks, threads, 0, current_stream()>>>(px, po, args);
    else
      argmax_kernel<T, 1><<<blocks, threads, 0, current_stream()>>>(px, po, args);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

void topk(const Tensor& x, int64_t k, Tensor& values, Tensor& indices) {
  RowLayout xl = row_layout(x), vl = row_layout(values), il = row_layout(indices);
  if (xl.n_rows == 0 || k == 0) return;
  VELA_CHECK_T(Unsupported, k <= kMaxTopK, "CUDA topk supports k <= ", kMaxTopK, ", got ", k);
  VELA_CHECK_T(Unsupported, xl.n_cols < INT_MAX, "CUDA topk over ", xl.n_cols, " columns");
  int64_t n_padded = 1;
  while (n_padded < k) n_padded <<= 1;
  TopkArgs args{xl.n_rows, xl.n_cols, xl.row_stride, vl.row_stride, il.row_stride, k, n_padded};
  DeviceGuard guard(x.device().index);
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const size_t smem_bytes = static_cast<size_t>(n_padded) * sizeof(unsigned long long);
    const int blocks = static_cast<int>(std::min<int64_t>(args.n_rows, 1 << 30));
    topk_kernel<T><<<blocks, kTopkThreads, smem_bytes, current_stream()>>>(
        static_cast<const T*>(x.data_ptr()), static_cast<float*>(values.data_ptr()),
        static_cast<int32_t*>(indices.data_ptr()), args);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace vela::ops::cuda
