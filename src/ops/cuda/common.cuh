// Shared helpers for the CUDA op kernels (ops/cuda/*.cu only): fp32 conversion of the storage
// types, aligned vectors for 16-byte loads, warp/block reductions, row layouts of tensors, the
// shared-memory opt-in above 48 KiB (opt_in_smem) and the float-dtype dispatch. Kernels compute
// in fp32 and round once on store (round to nearest even).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <type_traits>
#include <vector>

#include "core/cuda/stream.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace vela::ops::cuda {

using vela::cuda::current_stream;
using vela::cuda::DeviceGuard;

// ---- element conversion (hardware cvt instructions) ----
template <typename T>
__device__ __forceinline__ float to_float(T v);
template <>
__device__ __forceinline__ float to_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float to_float<bf16>(bf16 v) {
  return __bfloat162float(__ushort_as_bfloat16(v.bits));
}
template <>
__device__ __forceinline__ float to_float<f16>(f16 v) {
  return __half2float(__ushort_as_half(v.bits));
}

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ bf16 from_float<bf16>(float v) {
  return bf16::from_bits(__bfloat16_as_ushort(__float2bfloat16_rn(v)));
}
template <>
__device__ __forceinline__ f16 from_float<f16>(float v) {
  return f16::from_bits(__half_as_ushort(__float2half_rn(v)));
}

// ---- aligned vectors: N elements loaded / stored as one (or two) vector instructions ----
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// Elements per 16-byte vector of T.
template <typename T>
constexpr int kVec16 = 16 / static_cast<int>(sizeof(T));

// 16 bytes of T held as four 32-bit words (packed, so a 16-bit row costs half the registers of
// fp32), unpacked to / packed from floats.
template <typename T>
__device__ __forceinline__ void unpack16(const uint4& u, float (&f)[kVec16<T>]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (sizeof(T) == 4) {
      f[i] = __uint_as_float(w[i]);
    } else if constexpr (std::is_same_v<T, bf16>) {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    } else {
      __half2 h;
      static_assert(sizeof(h) == 4);
      memcpy(&h, &w[i], 4);
      float2 p = __half22float2(h);
      f[2 * i] = p.x;
      f[2 * i + 1] = p.y;
    }
  }
}

template <typename T>
__device__ __forceinline__ uint4 pack16(const float (&f)[kVec16<T>]) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (sizeof(T) == 4) {
      w[i] = __float_as_uint(f[i]);
    } else if constexpr (std::is_same_v<T, bf16>) {
      __nv_bfloat162 h = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);  // .x in the low half
      memcpy(&w[i], &h, 4);
    } else {
      __half2 h = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
      memcpy(&w[i], &h, 4);
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Brings the line holding p into this SM's L1 without waiting for it (no register holds it). Only
// for data no kernel of the stream writes (weights, host-written metadata, constant tables): L1 is
// not coherent, so a line fetched before pdl_wait() of something the previous kernel writes would
// be stale.
__device__ __forceinline__ void prefetch_l1(const void* p) {
  asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
}

// Loads N elements at p (aligned to N * sizeof(T)) as floats; 16- and 32-byte groups use vector
// instructions.
template <int N, typename T>
__device__ __forceinline__ void load_float(const T* p, float (&out)[N]) {
  if constexpr (N * sizeof(T) % 16 == 0) {
    constexpr int M = kVec16<T>;
#pragma unroll
    for (int g = 0; g < N / M; ++g) {
      uint4 u = reinterpret_cast<const uint4*>(p)[g];
      float part[M];
      unpack16<T>(u, part);
#pragma unroll
      for (int i = 0; i < M; ++i) out[g * M + i] = part[i];
    }
  } else {
    Vec<T, N> v = *reinterpret_cast<const Vec<T, N>*>(p);
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = to_float(v.v[i]);
  }
}

template <int N, typename T>
__device__ __forceinline__ void store_float(T* p, const float (&in)[N]) {
  if constexpr (N * sizeof(T) % 16 == 0) {
    constexpr int M = kVec16<T>;
#pragma unroll
    for (int g = 0; g < N / M; ++g) {
      float part[M];
#pragma unroll
      for (int i = 0; i < M; ++i) part[i] = in[g * M + i];
      reinterpret_cast<uint4*>(p)[g] = pack16<T>(part);
    }
  } else {
    Vec<T, N> v;
#pragma unroll
    for (int i = 0; i < N; ++i) v.v[i] = from_float<T>(in[i]);
    *reinterpret_cast<Vec<T, N>*>(p) = v;
  }
}

inline bool is_aligned(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// ---- rotary (rotate_half) ----
// The pair (x0 at feature i, x1 at i + rotary_dim / 2) rotated by (cos c, sin s): x0' = x0 c - x1
// s, x1' = x1 c + x0 s. The products are rounded before the sum (no FMA contraction) so every
// kernel that rotates (rotary, qkv_rotary's two, the q|k|v GEMV epilogue) gives the same bits
// wherever its compiler would contract.
__device__ __forceinline__ float rope_lo(float x0, float x1, float c, float s) {
  return __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
}
__device__ __forceinline__ float rope_hi(float x0, float x1, float c, float s) {
  return __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s));
}

// ---- reductions (blockDim.x must be a multiple of 32) ----
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide sum returned to every thread. `smem` holds 32 floats. Without the trailing barrier
// (kSyncAfter = false) the caller must not reuse `smem` before another __syncthreads: kernels that
// loop over rows alternate two buffers instead.
template <bool kSyncAfter = true>
__device__ __forceinline__ float block_sum(float v, float* smem) {
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = warp_sum(lane < n_warps ? smem[lane] : 0.0f);
  if constexpr (kSyncAfter) __syncthreads();
  return v;
}

// Online softmax statistics: running max m and sum s of exp(x - m). Merging handles -inf and
// empty partials (s == 0) without producing NaN; a NaN input propagates.
struct MaxSum {
  float m = -INFINITY;
  float s = 0.0f;
};
__device__ __forceinline__ void max_sum_add(MaxSum& a, float v) {
  if (v > a.m) {
    a.s = a.s * expf(a.m - v) + 1.0f;  // a.m may be -inf: exp(-inf) = 0
    a.m = v;
  } else if (v != -INFINITY) {
    a.s += expf(v - a.m);
  }
}
__device__ __forceinline__ MaxSum max_sum_merge(MaxSum a, MaxSum b) {
  MaxSum r;
  r.m = fmaxf(a.m, b.m);
  float ta = a.s == 0.0f ? 0.0f : a.s * expf(a.m - r.m);
  float tb = b.s == 0.0f ? 0.0f : b.s * expf(b.m - r.m);
  r.s = ta + tb;
  if (a.m != a.m || b.m != b.m) r.m = NAN;  // fmaxf drops NaN; keep it
  return r;
}
__device__ __forceinline__ MaxSum warp_max_sum(MaxSum a) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    MaxSum b;
    b.m = __shfl_xor_sync(0xffffffffu, a.m, o);
    b.s = __shfl_xor_sync(0xffffffffu, a.s, o);
    a = max_sum_merge(a, b);
  }
  return a;
}
// Block-wide MaxSum; `smem` holds 64 floats; ends with a barrier.
__device__ __forceinline__ MaxSum block_max_sum(MaxSum a, float* smem) {
  a = warp_max_sum(a);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  if (lane == 0) {
    smem[warp] = a.m;
    smem[32 + warp] = a.s;
  }
  __syncthreads();
  MaxSum b;
  if (lane < n_warps) {
    b.m = smem[lane];
    b.s = smem[32 + lane];
  }
  b = warp_max_sum(b);
  __syncthreads();
  return b;
}

// ---- host side ----

// A tensor seen as rows of contiguous elements: [n_rows, n_cols] with a uniform row stride
// (leading dims must collapse into one strided dim; extent-1 dims are free).
struct RowLayout {
  int64_t n_rows = 0;
  int64_t n_cols = 0;
  int64_t row_stride = 0;  // elements
};

inline RowLayout row_layout(const Tensor& t) {
  RowLayout r;
  int rank = t.dim();
  r.n_cols = rank == 0 ? 1 : t.size(-1);
  VELA_ASSERT(rank == 0 || r.n_cols <= 1 || t.stride(-1) == 1, "rows of ", t.str(),
              " are not contiguous");
  r.n_rows = 1;
  r.row_stride = r.n_cols;
  bool have_inner = false;
  int64_t inner_stride = 0, inner_extent = 1;
  for (int d = rank - 2; d >= 0; --d) {
    int64_t extent = t.size(d);
    r.n_rows *= extent;
    if (extent == 1) continue;
    if (!have_inner) {
      r.row_stride = t.stride(d);
      have_inner = true;
    } else {
      VELA_ASSERT(t.stride(d) == inner_stride * inner_extent, "rows of ", t.str(),
                  " do not have a uniform stride");
    }
    inner_stride = t.stride(d);
    inner_extent = extent;
  }
  return r;
}

// Lets `kernel` launch with `bytes` of dynamic shared memory on the current device. A kernel's
// default limit is 48 KiB less its static shared memory, so a launch just under 48 KiB may need
// the opt-in too (the weight ring's q|k|v at bench-1b's shapes: 48 KiB of stages plus its
// barriers failed with "invalid argument"). The limit in force is read once per kernel and
// device and only ever raised (process-wide, under a lock: the attribute belongs to the function,
// so a thread must not lower what another set), so launchers call this before every launch.
inline void opt_in_smem_bytes(const void* kernel, size_t bytes) {
  if (bytes == 0) return;
  struct Opted {
    const void* kernel;
    int device;
    size_t limit;  // the kernel's dynamic shared-memory limit now
  };
  static std::mutex mu;
  static std::vector<Opted> opted;
  const int device = vela::cuda::current_device();
  std::lock_guard<std::mutex> lock(mu);
  Opted* entry = nullptr;
  for (Opted& o : opted)
    if (o.kernel == kernel && o.device == device) {
      entry = &o;
      break;
    }
  if (entry == nullptr) {
    cudaFuncAttributes attr{};
    VELA_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    opted.push_back({kernel, device, static_cast<size_t>(attr.maxDynamicSharedSizeBytes)});
    entry = &opted.back();
  }
  if (bytes <= entry->limit) return;
  VELA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(bytes)));
  entry->limit = bytes;
}
template <typename... KArgs>
void opt_in_smem(void (*kernel)(KArgs...), size_t bytes) {
  opt_in_smem_bytes(reinterpret_cast<const void*>(kernel), bytes);
}

// Number of SMs of the current device (cached properties).
inline int n_sms() { return vela::cuda::device_properties().multiProcessorCount; }

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Threads for a one-block-per-row kernel that gives each thread about `per_thread` items.
inline int row_block_threads(int64_t n_items, int per_thread, int max_threads = 1024) {
  int64_t t = ceil_div(std::max<int64_t>(n_items, 1), per_thread);
  t = ceil_div(t, 32) * 32;
  return static_cast<int>(std::clamp<int64_t>(t, 32, max_threads));
}

// Grid for a grid-stride loop over `n_items` with `threads` per block, a few waves at most.
inline int grid_stride_blocks(int64_t n_items, int threads, int waves = 8) {
  int64_t blocks = ceil_div(std::max<int64_t>(n_items, 1), threads);
  return static_cast<int>(std::min<int64_t>(blocks, static_cast<int64_t>(n_sms()) * waves));
}

// Calls f(T{}) with T the storage type of a floating dtype.
template <typename F>
void dispatch_float(DType dt, F&& f) {
  switch (dt) {
    case DType::kF32:
      f(float{});
      break;
    case DType::kBF16:
      f(bf16{});
      break;
    case DType::kF16:
      f(f16{});
      break;
    default:
      VELA_THROW(Unsupported, "CUDA op on dtype ", dtype_name(dt), " (expected f32/bf16/f16)");
  }
}

}  // namespace vela::ops::cuda
