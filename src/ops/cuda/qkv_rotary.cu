// CUDA qkv_rotary_kv_write (ops/qkv_rotary.h), two kernels with the same results:
// - qkv_rotary_vec_kernel, the common case (full rotary, head_dim a multiple of 16, 16-byte aligned
//   rows): G threads per (token, q or k head), G the power of two >= head_dim / 16; thread i holds
//   features 8i .. 8i + 7 and their rotate_half partners 8i + d/2 .. (16-byte loads and stores), so
//   the rotation needs no exchange and the QK-norm's sum of squares is reduced over the G lanes.
//   Many independent loads per thread: a prefill of 8K tokens is bound by bandwidth, not latency.
// - qkv_rotary_kernel, everything else (partial rotary, head_dim 8 mod 16, unaligned rows): one
//   warp per (token, head) holding the head (up to 256 features, 8 per lane: lane l owns features
//   l, l + 32, ...) in registers, the rotate_half partner of feature j (j +- rotary_dim / 2)
//   exchanged through a per-warp shared row.
// Both QK-norm the head, rotate it and store it to q_out or the cache slot; a k head also copies
// its v head into the cache. Rounded to T after the norm and after the rotation, as rms_norm and
// rotary store them. Launched with programmatic dependent launch after the qkv GEMM(V) (pdl.cuh).
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/pdl.cuh"

namespace vela::ops::cuda {

namespace {

constexpr int kWarps = 8;
constexpr int kMaxPerLane = 8;  // head_dim <= 256

struct QkvRotaryArgs {
  const void* qkv;
  int64_t qkv_stride;
  const int32_t* positions;
  const float* table;
  int64_t max_positions;
  int half;  // rotary_dim / 2
  const void* q_norm;
  const void* k_norm;
  bool norm_f32;
  float eps;
  const int32_t* loc;
  int64_t n_slots;
  void* q_out;
  void* k_cache;
  void* v_cache;
  int64_t n_tokens;
  int n_heads, n_kv_heads, head_dim;
};

template <typename T>
__device__ __forceinline__ float norm_weight(const QkvRotaryArgs& a, const void* w, int j) {
  return a.norm_f32 ? static_cast<const float*>(w)[j] : to_float(static_cast<const T*>(w)[j]);
}

}  // namespace

template <typename T>
static __global__ void __launch_bounds__(kWarps * 32) qkv_rotary_kernel(QkvRotaryArgs a) {
  __shared__ float row[kWarps][kMaxPerLane * 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int heads = a.n_heads + a.n_kv_heads;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  pdl_wait();
  pdl_launch_dependents();
  if (item >= a.n_tokens * heads) return;  // warp-uniform
  const int64_t t = item / heads;
  const int hh = static_cast<int>(item % heads);
  const bool is_q = hh < a.n_heads;
  const int kvh = hh - a.n_heads;
  const int d = a.head_dim;
  const T* qkv_row = static_cast<const T*>(a.qkv) + t * a.qkv_stride;
  const T* src = qkv_row + static_cast<int64_t>(hh) * d;  // q heads then k heads
  const int64_t slot = a.loc[t];
  const bool slot_ok = slot >= 0 && slot < a.n_slots;
  if (!is_q && !slot_ok) return;

  float x[kMaxPerLane];
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int j = lane + 32 * i;
    x[i] = j < d ? to_float(src[j]) : 0.0f;
  }
  const void* nw = is_q ? a.q_norm : a.k_norm;
  if (nw != nullptr) {
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) ss += x[i] * x[i];
    ss = warp_sum(ss);
    const float rstd = rsqrtf(ss / static_cast<float>(d) + a.eps);
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      const int j = lane + 32 * i;
      if (j < d) x[i] = to_float(from_float<T>(x[i] * rstd * norm_weight<T>(a, nw, j)));
    }
  }
  const int64_t pos = a.positions[t];
  if (pos >= 0 && pos < a.max_positions) {
    float* r = row[warp];
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) r[lane + 32 * i] = x[i];
    __syncwarp();
    const float* tab = a.table + pos * 2 * a.half;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      const int j = lane + 32 * i;
      if (j < a.half) {
        x[i] = rope_lo(x[i], r[j + a.half], tab[j], tab[a.half + j]);
      } else if (j < 2 * a.half) {
        const int jj = j - a.half;
        x[i] = rope_hi(r[jj], x[i], tab[jj], tab[a.half + jj]);
      }
    }
  }
  T* dst = is_q ? static_cast<T*>(a.q_out) + (t * a.n_heads + hh) * d
                : static_cast<T*>(a.k_cache) + (slot * a.n_kv_heads + kvh) * d;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int j = lane + 32 * i;
    if (j < d) dst[j] = from_float<T>(x[i]);
  }
  if (!is_q) {
    const T* vs = qkv_row + static_cast<int64_t>(heads + kvh) * d;
    T* vd = static_cast<T*>(a.v_cache) + (slot * a.n_kv_heads + kvh) * d;
    for (int j = lane; j < d; j += 32) vd[j] = vs[j];
  }
}

template <typename T, int G>
static __global__ void __launch_bounds__(256) qkv_rotary_vec_kernel(QkvRotaryArgs a) {
  constexpr int V = 8;  // features per thread and half
  const int heads = a.n_heads + a.n_kv_heads;
  const int64_t gt = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t item = gt / G;  // (token, head): the same for a group of G lanes
  const int sub = static_cast<int>(gt % G);
  pdl_wait();
  pdl_launch_dependents();
  if (item >= a.n_tokens * heads) return;  // group-uniform
  const int64_t t = item / heads;
  const int hh = static_cast<int>(item % heads);
  const bool is_q = hh < a.n_heads;
  const int kvh = hh - a.n_heads;
  const int half = a.half;
  const int64_t slot = a.loc[t];
  if (!is_q && !(slot >= 0 && slot < a.n_slots)) return;  // group-uniform
  const int i0 = sub * V;
  const bool active = i0 < half;  // G * 8 may exceed half (head_dim 48, 80, 96)
  const T* qkv_row = static_cast<const T*>(a.qkv) + t * a.qkv_stride;
  const T* src = qkv_row + static_cast<int64_t>(hh) * 2 * half;  // q heads then k heads
  float lo[V] = {}, hi[V] = {};
  if (active) {
    load_float<V>(src + i0, lo);
    load_float<V>(src + half + i0, hi);
  }
  const void* nw = is_q ? a.q_norm : a.k_norm;
  if (nw != nullptr) {
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < V; ++i) ss += lo[i] * lo[i] + hi[i] * hi[i];
    const unsigned mask = G == 32 ? 0xffffffffu : ((1u << G) - 1u) << (threadIdx.x % 32 / G * G);
#pragma unroll
    for (int o = G / 2; o > 0; o /= 2) ss += __shfl_xor_sync(mask, ss, o, G);
    const float rstd = rsqrtf(ss / static_cast<float>(2 * half) + a.eps);
    if (active) {
#pragma unroll
      for (int i = 0; i < V; ++i) {
        lo[i] = to_float(from_float<T>(lo[i] * rstd * norm_weight<T>(a, nw, i0 + i)));
        hi[i] = to_float(from_float<T>(hi[i] * rstd * norm_weight<T>(a, nw, half + i0 + i)));
      }
    }
  }
  if (!active) return;
  const int64_t pos = a.positions[t];
  if (pos >= 0 && pos < a.max_positions) {
    const float* tab = a.table + pos * 2 * half;
    float c[V], s[V];
    load_float<V>(tab + i0, c);
    load_float<V>(tab + half + i0, s);
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const float x0 = lo[i], x1 = hi[i];
      lo[i] = rope_lo(x0, x1, c[i], s[i]);
      hi[i] = rope_hi(x0, x1, c[i], s[i]);
    }
  }
  T* dst = is_q ? static_cast<T*>(a.q_out) + (t * a.n_heads + hh) * 2 * half
                : static_cast<T*>(a.k_cache) + (slot * a.n_kv_heads + kvh) * 2 * half;
  store_float<V>(dst + i0, lo);
  store_float<V>(dst + half + i0, hi);
  if (!is_q) {
    const T* vs = qkv_row + static_cast<int64_t>(heads + kvh) * 2 * half;
    T* vd = static_cast<T*>(a.v_cache) + (slot * a.n_kv_heads + kvh) * 2 * half;
    constexpr int kU = V * static_cast<int>(sizeof(T)) / 16;  // 16-byte words per 8 features
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      reinterpret_cast<uint4*>(vd + i0)[u] = reinterpret_cast<const uint4*>(vs + i0)[u];
      reinterpret_cast<uint4*>(vd + half + i0)[u] =
          reinterpret_cast<const uint4*>(vs + half + i0)[u];
    }
  }
}

// The vector kernel's lanes per head (a power of two >= head_dim / 16), or 0 where it does not
// apply (partial rotary, head_dim not a multiple of 16, rows or tensors not 16-byte aligned).
int vec_group(const QkvRotaryArgs& a, size_t elem) {
  const int d = a.head_dim;
  if (2 * a.half != d || d % 16 != 0) return 0;
  if ((a.qkv_stride * static_cast<int64_t>(elem)) % 16 != 0) return 0;
  const void* tensors[] = {a.qkv, a.q_out, a.k_cache, a.v_cache, a.table};
  for (const void* p : tensors)
    if (!is_aligned(p, 16)) return 0;
  int g = 1;
  while (g * 16 < d) g *= 2;
  return g;
}

void qkv_rotary_kv_write(const Tensor& qkv, const Tensor& positions, const Tensor& table,
                         const Tensor& q_norm, const Tensor& k_norm, float eps,
                         const Tensor& out_cache_loc, Tensor& q_out, Tensor& k_cache,
                         Tensor& v_cache) {
  const int64_t n = qkv.size(0);
  if (n == 0) return;
  VELA_CHECK(q_out.size(2) <= kMaxPerLane * 32,
             "qkv_rotary_kv_write: CUDA supports head_dim <= ", kMaxPerLane * 32, ", got ",
             q_out.size(2));
  QkvRotaryArgs a{};
  a.qkv = qkv.data_ptr();
  a.qkv_stride = qkv.stride(0);
  a.positions = static_cast<const int32_t*>(positions.data_ptr());
  a.table = static_cast<const float*>(table.data_ptr());
  a.max_positions = table.size(0);
  a.half = static_cast<int>(table.size(1) / 2);
  a.q_norm = q_norm.defined() ? q_norm.data_ptr() : nullptr;
  a.k_norm = k_norm.defined() ? k_norm.data_ptr() : nullptr;
  a.norm_f32 = q_norm.defined() && q_norm.dtype() == DType::kF32;
  VELA_CHECK(!q_norm.defined() || q_norm.dtype() == k_norm.dtype(),
             "qkv_rotary_kv_write: q_norm and k_norm must share a dtype");
  a.eps = eps;
  a.loc = static_cast<const int32_t*>(out_cache_loc.data_ptr());
  a.n_slots = k_cache.size(0);
  a.q_out = q_out.data_ptr();
  a.k_cache = k_cache.data_ptr();
  a.v_cache = v_cache.data_ptr();
  a.n_tokens = n;
  a.n_heads = static_cast<int>(q_out.size(1));
  a.n_kv_heads = static_cast<int>(k_cache.size(1));
  a.head_dim = static_cast<int>(q_out.size(2));
  const int64_t items = n * (a.n_heads + a.n_kv_heads);
  DeviceGuard guard(qkv.device().index);
  dispatch_float(qkv.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const int g = vec_group(a, sizeof(T));
    auto vec = [&](auto kernel, int group) {
      launch_pdl(kernel, dim3(static_cast<unsigned>(ceil_div(items * group, int64_t{256}))),
                 dim3(256), 0, a);
    };
    switch (g) {
      case 1:
        return vec(qkv_rotary_vec_kernel<T, 1>, 1);
      case 2:
        return vec(qkv_rotary_vec_kernel<T, 2>, 2);
      case 4:
        return vec(qkv_rotary_vec_kernel<T, 4>, 4);
      case 8:
        return vec(qkv_rotary_vec_kernel<T, 8>, 8);
      case 16:
        return vec(qkv_rotary_vec_kernel<T, 16>, 16);
      default:
        launch_pdl(qkv_rotary_kernel<T>, dim3(static_cast<unsigned>(ceil_div(items, kWarps))),
                   dim3(kWarps * 32), 0, a);
    }
  });
}

}  // namespace vela::ops::cuda
