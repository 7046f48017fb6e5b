// CUDA optimizer ops (ops/optim.h): fused AdamW and Muon element updates, and the multi-tensor
// deterministic sum of squares / scale-by-norm behind gradient clipping.
//
// Element updates write the same fp32 expressions as the CPU twins (sqrt and division are IEEE:
// no fast-math), 4 elements per step when every pointer allows 16-byte access. Multi-tensor ops
// take up to kMaxTensors (pointer, size) pairs by value in the kernel parameters, so 200+
// parameters cost a handful of launches and no host-to-device copy. Sums use the CPU's fixed
// 64Ki-element block partition: one CUDA block per partition block writes its double partial to
// its own slot, one block adds the partials in a fixed order. Nothing here uses atomics, so every
// run gives the same bits.
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_optim_ops.h"

namespace vela::ops::cuda {

constexpr int kMaxTensors = 48;
constexpr int64_t kSumBlock = 65536;  // elements per partial (the CPU twin's partition)
constexpr int kSumThreads = 256;

// Up to kMaxTensors f32 tensors of one launch; block_start[t] is the first partition block of
// tensor t counted from this launch's first one (block_start[n_tensors] = blocks in the launch).
struct TensorList {
  float* ptr[kMaxTensors];
  int64_t n[kMaxTensors];
  int64_t block_start[kMaxTensors + 1];
  int n_tensors;
};

// ---- element updates ----

static __device__ __forceinline__ void adamw_element(float& w, float& m, float& v, float g,
                                                     const AdamWHyper& h) {
  m = h.b1 * m + (1.0f - h.b1) * g;
  v = h.b2 * v + (1.0f - h.b2) * g * g;
  const float denom = sqrtf(v) * h.inv_sqrt_bc2 + h.eps;
  w = w * h.decay - h.step_size * (m / denom);
}

// N elements per step (N = 4 with 16-byte aligned f32 arrays), scalar tail. kWeight: also store
// the rounded compute weight (T) of each updated master element.
template <typename T, bool kWeight, int N>
static __global__ void adamw_kernel(float* master, const float* grad, float* exp_avg,
                                    float* exp_avg_sq, T* weight, AdamWHyper h, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n_vec = n / N;
  for (int64_t vi = tid; vi < n_vec; vi += step) {
    const int64_t i = vi * N;
    float w[N], g[N], m[N], v[N];
    load_float<N>(master + i, w);
    load_float<N>(grad + i, g);
    load_float<N>(exp_avg + i, m);
    load_float<N>(exp_avg_sq + i, v);
#pragma unroll
    for (int j = 0; j < N; ++j) adamw_element(w[j], m[j], v[j], g[j], h);
    store_float<N>(master + i, w);
    store_float<N>(exp_avg + i, m);
    store_float<N>(exp_avg_sq + i, v);
    if constexpr (kWeight) store_float<N>(weight + i, w);
  }
  for (int64_t i = n_vec * N + tid; i < n; i += step) {
    float w = master[i], m = exp_avg[i], v = exp_avg_sq[i];
    adamw_element(w, m, v, grad[i], h);
    master[i] = w;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    if constexpr (kWeight) weight[i] = from_float<T>(w);
  }
}

template <int N>
static __global__ void muon_momentum_kernel(float* buf, const float* grad, float* u, float mu,
                                            bool nesterov, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n_vec = n / N;
  for (int64_t vi = tid; vi < n_vec; vi += step) {
    const int64_t i = vi * N;
    float b[N], g[N], o[N];
    load_float<N>(buf + i, b);
    load_float<N>(grad + i, g);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      b[j] = mu * b[j] + (1.0f - mu) * g[j];
      o[j] = nesterov ? (1.0f - mu) * g[j] + mu * b[j] : b[j];
    }
    store_float<N>(buf + i, b);
    store_float<N>(u + i, o);
  }
  for (int64_t i = n_vec * N + tid; i < n; i += step) {
    const float g = grad[i];
    const float b = mu * buf[i] + (1.0f - mu) * g;
    buf[i] = b;
    u[i] = nesterov ? (1.0f - mu) * g + mu * b : b;
  }
}

template <int N>
static __global__ void decayed_step_kernel(float* w, const float* update, float decay, float s,
                                           int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n_vec = n / N;
  for (int64_t vi = tid; vi < n_vec; vi += step) {
    const int64_t i = vi * N;
    float x[N], o[N];
    load_float<N>(w + i, x);
    load_float<N>(update + i, o);
#pragma unroll
    for (int j = 0; j < N; ++j) x[j] = x[j] * decay - s * o[j];
    store_float<N>(w + i, x);
  }
  for (int64_t i = n_vec * N + tid; i < n; i += step) w[i] = w[i] * decay - s * update[i];
}

// ---- multi-tensor sums ----

static __device__ __forceinline__ bool is_aligned_device(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

static __device__ __forceinline__ int64_t block_len(const TensorList& list, int t, int64_t b) {
  const int64_t rest = list.n[t] - b * kSumBlock;
  return rest < kSumBlock ? rest : kSumBlock;
}

static __device__ __forceinline__ double warp_sum_f64(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Block-wide double sum (fixed shuffle tree, then warp 0 over the warp sums), valid in thread 0.
static __device__ __forceinline__ double block_sum_f64(double v) {
  __shared__ double warp_sums[32];
  v = warp_sum_f64(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  v = warp == 0 && lane < n_warps ? warp_sums[lane] : 0.0;
  if (warp == 0) v = warp_sum_f64(v);
  return v;
}

// The tensor and the partition block within it that CUDA block `blk` of a launch covers.
static __device__ __forceinline__ void locate(const TensorList& list, int64_t blk, int& t,
                                              int64_t& block_in_tensor) {
  t = 0;
  while (t + 1 < list.n_tensors && blk >= list.block_start[t + 1]) ++t;
  block_in_tensor = blk - list.block_start[t];
}

// partials[blockIdx.x] = sum of squares of one 64Ki-element partition block, in double.
static __global__ void sum_squares_partial_kernel(TensorList list, double* partials) {
  int t;
  int64_t b;
  locate(list, blockIdx.x, t, b);
  const float* x = list.ptr[t] + b * kSumBlock;
  const int64_t len = block_len(list, t, b);
  double s = 0;
  int64_t done = 0;
  if (is_aligned_device(x)) {  // the block start inherits the tensor's 16-byte alignment
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const int64_t n4 = len / 4;
    for (int64_t i = threadIdx.x; i < n4; i += blockDim.x) {
      const float4 q = x4[i];
      s += static_cast<double>(q.x) * q.x;
      s += static_cast<double>(q.y) * q.y;
      s += static_cast<double>(q.z) * q.z;
      s += static_cast<double>(q.w) * q.w;
    }
    done = n4 * 4;
  }
  for (int64_t i = done + threadIdx.x; i < len; i += blockDim.x)
    s += static_cast<double>(x[i]) * x[i];
  s = block_sum_f64(s);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

// out[0] = the partials added in a fixed order (thread i takes i, i + blockDim.x, ...).
static __global__ void sum_partials_kernel(const double* partials, int64_t n, double* out) {
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += partials[i];
  s = block_sum_f64(s);
  if (threadIdx.x == 0) out[0] = s;
}

// Scales the partition block of each CUDA block by numer / (norm + eps) when the norm is finite
// and above threshold. Every thread derives the scale itself (IEEE double sqrt and division, as
// the CPU twin), so the whole launch agrees without a host round trip.
static __global__ void scale_by_norm_kernel(TensorList list, const double* sum_sq, double numer,
                                            double eps, double threshold) {
  const double norm = sqrt(sum_sq[0]);
  if (!isfinite(norm) || norm <= threshold) return;
  const float scale = static_cast<float>(numer / (norm + eps));
  int t;
  int64_t b;
  locate(list, blockIdx.x, t, b);
  float* x = list.ptr[t] + b * kSumBlock;
  const int64_t len = block_len(list, t, b);
  int64_t done = 0;
  if (is_aligned_device(x)) {
    float4* x4 = reinterpret_cast<float4*>(x);
    const int64_t n4 = len / 4;
    for (int64_t i = threadIdx.x; i < n4; i += blockDim.x) {
      float4 q = x4[i];
      q.x *= scale;
      q.y *= scale;
      q.z *= scale;
      q.w *= scale;
      x4[i] = q;
    }
    done = n4 * 4;
  }
  for (int64_t i = done + threadIdx.x; i < len; i += blockDim.x) x[i] *= scale;
}

namespace {

constexpr int kThreads = 256;

float* f32_ptr(const Tensor& t) { return static_cast<float*>(t.data_ptr()); }

// Calls launch(list, n_blocks, first_block) for consecutive groups of at most kMaxTensors
// non-empty tensors; first_block counts partition blocks from the first tensor of xs.
template <typename F>
int64_t for_each_tensor_group(const std::vector<Tensor>& xs, F&& launch) {
  TensorList list{};
  int64_t first_block = 0, in_list = 0;
  auto flush = [&] {
    if (list.n_tensors == 0) return;
    list.block_start[list.n_tensors] = in_list;
    launch(list, in_list, first_block);
    first_block += in_list;
    list = TensorList{};
    in_list = 0;
  };
  for (const Tensor& x : xs) {
    if (x.numel() == 0) continue;
    const int t = list.n_tensors++;
    list.ptr[t] = f32_ptr(x);
    list.n[t] = x.numel();
    list.block_start[t] = in_list;
    in_list += ceil_div(x.numel(), kSumBlock);
    if (list.n_tensors == kMaxTensors) flush();
  }
  flush();
  return first_block;
}

int64_t total_blocks(const std::vector<Tensor>& xs) {
  int64_t n = 0;
  for (const Tensor& x : xs) n += ceil_div(x.numel(), kSumBlock);
  return n;
}

}  // namespace

void adamw_update(Tensor& master, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                  Tensor& weight, const AdamWHyper& h) {
  const int64_t n = master.numel();
  if (n == 0) return;
  DeviceGuard guard(master.device().index);
  float* pw = f32_ptr(master);
  const float* pg = f32_ptr(grad);
  float* pm = f32_ptr(exp_avg);
  float* pv = f32_ptr(exp_avg_sq);
  const bool f32_aligned =
      is_aligned(pw, 16) && is_aligned(pg, 16) && is_aligned(pm, 16) && is_aligned(pv, 16);
  cudaStream_t stream = current_stream();
  if (!weight.defined()) {
    const int blocks = grid_stride_blocks(f32_aligned ? n / 4 : n, kThreads);
    if (f32_aligned)
      adamw_kernel<float, false, 4><<<blocks, kThreads, 0, stream>>>(pw, pg, pm, pv, nullptr, h, n);
    else
      adamw_kernel<float, false, 1><<<blocks, kThreads, 0, stream>>>(pw, pg, pm, pv, nullptr, h, n);
    VELA_CUDA_CHECK_LAUNCH();
    return;
  }
  dispatch_float(weight.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* pt = static_cast<T*>(weight.data_ptr());
    const bool vec = f32_aligned && is_aligned(pt, 4 * sizeof(T));
    const int blocks = grid_stride_blocks(vec ? n / 4 : n, kThreads);
    if (vec)
      adamw_kernel<T, true, 4><<<blocks, kThreads, 0, stream>>>(pw, pg, pm, pv, pt, h, n);
    else
      adamw_kernel<T, true, 1><<<blocks, kThreads, 0, stream>>>(pw, pg, pm, pv, pt, h, n);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

void muon_momentum(Tensor& buf, const Tensor& grad, Tensor& u, float mu, bool nesterov) {
  const int64_t n = buf.numel();
  if (n == 0) return;
  DeviceGuard guard(buf.device().index);
  float* pb = f32_ptr(buf);
  const float* pg = f32_ptr(grad);
  float* pu = f32_ptr(u);
  const bool vec = is_aligned(pb, 16) && is_aligned(pg, 16) && is_aligned(pu, 16);
  const int blocks = grid_stride_blocks(vec ? n / 4 : n, kThreads);
  if (vec)
    muon_momentum_kernel<4><<<blocks, kThreads, 0, current_stream()>>>(pb, pg, pu, mu, nesterov, n);
  else
    muon_momentum_kernel<1><<<blocks, kThreads, 0, current_stream()>>>(pb, pg, pu, mu, nesterov, n);
  VELA_CUDA_CHECK_LAUNCH();
}

void decayed_step(Tensor& w, const Tensor& update, float decay, float step) {
  const int64_t n = w.numel();
  if (n == 0) return;
  DeviceGuard guard(w.device().index);
  float* pw = f32_ptr(w);
  const float* pu = f32_ptr(update);
  const bool vec = is_aligned(pw, 16) && is_aligned(pu, 16);
  const int blocks = grid_stride_blocks(vec ? n / 4 : n, kThreads);
  if (vec)
    decayed_step_kernel<4><<<blocks, kThreads, 0, current_stream()>>>(pw, pu, decay, step, n);
  else
    decayed_step_kernel<1><<<blocks, kThreads, 0, current_stream()>>>(pw, pu, decay, step, n);
  VELA_CUDA_CHECK_LAUNCH();
}

void sum_squares(const std::vector<Tensor>& xs, Tensor& out) {
  DeviceGuard guard(out.device().index);
  cudaStream_t stream = current_stream();
  const int64_t n_partials = total_blocks(xs);
  // One double per partition block ([n] i64 storage: vela has no f64 dtype). The caching
  // allocator hands the buffer back for reuse in stream order, so freeing it at return is safe.
  Tensor partials = Tensor::empty({std::max<int64_t>(n_partials, 1)}, DType::kI64, out.device());
  double* pp = static_cast<double*>(partials.data_ptr());
  for_each_tensor_group(xs, [&](const TensorList& list, int64_t n_blocks, int64_t first_block) {
    VELA_ASSERT(n_blocks <= INT32_MAX, "sum_squares: ", n_blocks, " blocks in one launch");
    sum_squares_partial_kernel<<<static_cast<unsigned>(n_blocks), kSumThreads, 0, stream>>>(
        list, pp + first_block);
    VELA_CUDA_CHECK_LAUNCH();
  });
  sum_partials_kernel<<<1, 1024, 0, stream>>>(pp, n_partials, static_cast<double*>(out.data_ptr()));
  VELA_CUDA_CHECK_LAUNCH();
}

void scale_by_norm(std::vector<Tensor>& xs, const Tensor& sum_sq, double numer, double eps,
                   double threshold) {
  DeviceGuard guard(sum_sq.device().index);
  cudaStream_t stream = current_stream();
  const double* ps = static_cast<const double*>(sum_sq.data_ptr());
  for_each_tensor_group(xs, [&](const TensorList& list, int64_t n_blocks, int64_t) {
    VELA_ASSERT(n_blocks <= INT32_MAX, "scale_by_norm: ", n_blocks, " blocks in one launch");
    scale_by_norm_kernel<<<static_cast<unsigned>(n_blocks), kSumThreads, 0, stream>>>(
        list, ps, numer, eps, threshold);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace vela::ops::cuda
