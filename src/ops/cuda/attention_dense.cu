// CUDA dense causal attention of the training path (documents, GQA): forward and backward, and
// the dispatcher between the fused flash kernels (ops/cuda/attention_flash.cu: the default for
// bf16/f16 with head_dim a multiple of 8 in [32, 256]) and the two older paths below (f32, other
// head dims, or VELA_CUDA_DENSE_ATTN=gemm|recompute|flash by hand). Both older paths write the
// optional log-sum-exp [batch, n_heads, seq] in the forward and ignore a given one in the backward.
//
// GEMM path (training lengths), forward: per (batch, kv head), S = Q K^T for the group's n_rep
// query heads (cuBLASLt), P = masked softmax(scale * S) in place, O_h = P_h V per head.
// Backward:
// per (batch, kv head) the n_rep query heads of the group run as cuBLASLt GEMMs on (strided)
// views, with two row kernels in between:
//   S = Q K^T (f32) -> P = masked softmax(scale * S) in place  -> dP = dO V^T (f32)
//   dS = P * (dP - rowsum(P * dP)) * scale   (rowsum(P * dP) = dO . O, so `out` is not needed)
//   dQ = dS K,  dK = sum_heads dS^T Q,  dV = sum_heads P^T dO   (P, dS rounded to the activation
//   dtype for these GEMMs, as flash attention does; the head sums are the GEMMs' inner dim)
// Memory: 2 f32 + 2 activation-dtype [n_rep, seq, seq] buffers, reused across groups.
//
// Recompute path (long sequences, or VELA_CUDA_DENSE_ATTN=recompute), no [seq, seq] buffer:
//   forward, one block per query row: softmax statistics, then o = sum_p P v_p in key tiles.
//   dq kernel, one block per query row (b, t, h): softmax statistics (lse) over the visible keys,
//     D = dout . out, then dq = scale * sum_p P (dout . v_p - D) k_p, keys in tiles of blockDim
//     whose ds values are staged in shared memory (deterministic sums, no atomics); lse and D are
//     stored for the second kernel.
//   dkv kernel, one block per key row (b, p, kv head): dv_p = sum P dout, dk_p = scale * sum ds q
//     over the visible queries t >= p of every query head of the group, the same tiling.
// O(seq^2 * head_dim) work per head with operands read from global memory. Math in fp32.
#include <cstdlib>
#include <cstring>

#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_backward_ops.h"
#include "ops/gemm.h"

namespace vela::ops::cuda {

namespace {

constexpr int kThreads = 128;

struct AttnBwdArgs {
  int64_t n_batch, n_seq, n_heads, n_kv, head_dim;
  float scale;
};

}  // namespace

template <typename T>
__device__ __forceinline__ float dot_row(const T* a, const T* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += to_float(a[i]) * to_float(b[i]);
  return s;
}

template <typename T>
static __global__ void __launch_bounds__(kThreads)
    attn_dq_kernel(const T* q, const T* k, const T* v, const T* out, const T* dout,
                   const int32_t* docs, T* dq, float* lse_out, float* d_out, AttnBwdArgs a) {
  __shared__ float smem[64];
  __shared__ float ds_tile[kThreads];
  const int64_t row = blockIdx.x;  // (b * n_seq + t) * n_heads + h
  const int64_t h = row % a.n_heads, t = (row / a.n_heads) % a.n_seq;
  const int64_t b = row / (a.n_heads * a.n_seq);
  const int64_t g = h / (a.n_heads / a.n_kv), d = a.head_dim;
  const T* qr = q + row * d;
  const T* dor = dout + row * d;
  const int32_t* doc_row = docs ? docs + b * a.n_seq : nullptr;
  auto kv_off = [&](int64_t p) { return ((b * a.n_seq + p) * a.n_kv + g) * d; };
  auto visible = [&](int64_t p) { return doc_row == nullptr || doc_row[p] == doc_row[t]; };
  // Softmax statistics.
  MaxSum ms;
  for (int64_t p = threadIdx.x; p <= t; p += blockDim.x)
    if (visible(p)) max_sum_add(ms, dot_row(qr, k + kv_off(p), d) * a.scale);
  ms = block_max_sum(ms, smem);
  const float lse = ms.m + logf(ms.s);
  float dd = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
    dd += to_float(dor[i]) * to_float(out[row * d + i]);
  dd = block_sum<true>(dd, smem);
  if (threadIdx.x == 0) {
    lse_out[row] = lse;
    d_out[row] = dd;
  }
  // dq, one tile of keys at a time; thread i owns feature i (and i + blockDim, ...).
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // head_dim <= 4 * kThreads
  for (int64_t p0 = 0; p0 <= t; p0 += blockDim.x) {
    const int64_t p = p0 + threadIdx.x;
    float ds = 0.0f;
    if (p <= t && visible(p)) {
      const float prob = __expf(dot_row(qr, k + kv_off(p), d) * a.scale - lse);
      ds = prob * (dot_row(dor, v + kv_off(p), d) - dd) * a.scale;
    }
    ds_tile[threadIdx.x] = ds;
    __syncthreads();
    const int64_t n_tile = min(static_cast<int64_t>(blockDim.x), t + 1 - p0);
    for (int j = 0; j < 4; ++j) {
      const int64_t i = threadIdx.x + j * blockDim.x;
      if (i >= d) break;
      float s = 0.0f;
      for (int64_t x = 0; x < n_tile; ++x) s += ds_tile[x] * to_float(k[kv_off(p0 + x) + i]);
      acc[j] += s;
    }
    __syncthreads();
  }
  for (int j = 0; j < 4; ++j) {
    const int64_t i = threadIdx.x + j * blockDim.x;
    if (i < d) dq[row * d + i] = from_float<T>(acc[j]);
  }
}

// Forward for one query row per block: lse over the visible keys, then o = sum_p P_p v_p with the
// probabilities of a tile of keys staged in shared memory.
template <typename T>
static __global__ void __launch_bounds__(kThreads)
    attn_fwd_kernel(const T* q, const T* k, const T* v, const int32_t* docs, T* out, float* lse_out,
                    AttnBwdArgs a) {
  __shared__ float smem[64];
  __shared__ float p_tile[kThreads];
  const int64_t row = blockIdx.x;  // (b * n_seq + t) * n_heads + h
  const int64_t h = row % a.n_heads, t = (row / a.n_heads) % a.n_seq;
  const int64_t b = row / (a.n_heads * a.n_seq);
  const int64_t g = h / (a.n_heads / a.n_kv), d = a.head_dim;
  const T* qr = q + row * d;
  const int32_t* doc_row = docs ? docs + b * a.n_seq : nullptr;
  auto kv_off = [&](int64_t p) { return ((b * a.n_seq + p) * a.n_kv + g) * d; };
  auto visible = [&](int64_t p) { return doc_row == nullptr || doc_row[p] == doc_row[t]; };
  MaxSum ms;
  for (int64_t p = threadIdx.x; p <= t; p += blockDim.x)
    if (visible(p)) max_sum_add(ms, dot_row(qr, k + kv_off(p), d) * a.scale);
  ms = block_max_sum(ms, smem);
  const float lse = ms.m + logf(ms.s);
  if (lse_out != nullptr && threadIdx.x == 0)  // [batch, n_heads, seq]
    lse_out[(b * a.n_heads + h) * a.n_seq + t] = lse;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int64_t p0 = 0; p0 <= t; p0 += blockDim.x) {
    const int64_t p = p0 + threadIdx.x;
    float prob = 0.0f;
    if (p <= t && visible(p)) prob = __expf(dot_row(qr, k + kv_off(p), d) * a.scale - lse);
    p_tile[threadIdx.x] = prob;
    __syncthreads();
    const int64_t n_tile = min(static_cast<int64_t>(blockDim.x), t + 1 - p0);
    for (int j = 0; j < 4; ++j) {
      const int64_t i = threadIdx.x + j * blockDim.x;
      if (i >= d) break;
      float s = 0.0f;
      for (int64_t x = 0; x < n_tile; ++x) s += p_tile[x] * to_float(v[kv_off(p0 + x) + i]);
      acc[j] += s;
    }
    __syncthreads();
  }
  for (int j = 0; j < 4; ++j) {
    const int64_t i = threadIdx.x + j * blockDim.x;
    if (i < d) out[row * d + i] = from_float<T>(acc[j]);
  }
}

template <typename T>
static __global__ void __launch_bounds__(kThreads)
    attn_dkv_kernel(const T* q, const T* k, const T* v, const T* dout, const int32_t* docs,
                    const float* lse, const float* dvals, T* dk, T* dv, AttnBwdArgs a) {
  __shared__ float p_tile[kThreads];
  __shared__ float ds_tile[kThreads];
  __shared__ int64_t row_tile[kThreads];
  const int64_t kv_row = blockIdx.x;  // (b * n_seq + p) * n_kv + g
  const int64_t g = kv_row % a.n_kv, p = (kv_row / a.n_kv) % a.n_seq;
  const int64_t b = kv_row / (a.n_kv * a.n_seq);
  const int64_t n_rep = a.n_heads / a.n_kv, d = a.head_dim;
  const T* kr = k + kv_row * d;
  const T* vr = v + kv_row * d;
  const int32_t* doc_row = docs ? docs + b * a.n_seq : nullptr;
  // Work items: (t, r) for t in [p, n_seq), r in [0, n_rep).
  const int64_t n_items = (a.n_seq - p) * n_rep;
  float acc_k[4] = {0.0f, 0.0f, 0.0f, 0.0f}, acc_v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int64_t i0 = 0; i0 < n_items; i0 += blockDim.x) {
    const int64_t item = i0 + threadIdx.x;
    float prob = 0.0f, ds = 0.0f;
    int64_t qrow = -1;
    if (item < n_items) {
      const int64_t t = p + item / n_rep, h = g * n_rep + item % n_rep;
      if (doc_row == nullptr || doc_row[t] == doc_row[p]) {
        qrow = (b * a.n_seq + t) * a.n_heads + h;
        prob = __expf(dot_row(q + qrow * d, kr, d) * a.scale - lse[qrow]);
        ds = prob * (dot_row(dout + qrow * d, vr, d) - dvals[qrow]) * a.scale;
      }
    }
    p_tile[threadIdx.x] = prob;
    ds_tile[threadIdx.x] = ds;
    row_tile[threadIdx.x] = qrow;
    __syncthreads();
    const int64_t n_tile = min(static_cast<int64_t>(blockDim.x), n_items - i0);
    for (int j = 0; j < 4; ++j) {
      const int64_t i = threadIdx.x + j * blockDim.x;
      if (i >= d) break;
      float sk = 0.0f, sv = 0.0f;
      for (int64_t x = 0; x < n_tile; ++x) {
        const int64_t r = row_tile[x];
        if (r < 0) continue;
        sk += ds_tile[x] * to_float(q[r * d + i]);
        sv += p_tile[x] * to_float(dout[r * d + i]);
      }
      acc_k[j] += sk;
      acc_v[j] += sv;
    }
    __syncthreads();
  }
  for (int j = 0; j < 4; ++j) {
    const int64_t i = threadIdx.x + j * blockDim.x;
    if (i < d) {
      dk[kv_row * d + i] = from_float<T>(acc_k[j]);
      dv[kv_row * d + i] = from_float<T>(acc_v[j]);
    }
  }
}

namespace {

void attention_backward_recompute(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& doc_ids, float scale, const Tensor& out,
                                  const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv) {
  AttnBwdArgs a{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), scale};
  VELA_CHECK_T(Unsupported, a.head_dim <= 4 * kThreads, "causal_attention_backward: head_dim ",
               a.head_dim, " > ", 4 * kThreads, " is not supported on CUDA");
  const int64_t n_q_rows = a.n_batch * a.n_seq * a.n_heads;
  const int64_t n_kv_rows = a.n_batch * a.n_seq * a.n_kv;
  if (n_q_rows == 0) return;
  VELA_CHECK_T(Unsupported, n_q_rows < (int64_t{1} << 31), "causal_attention_backward: ", n_q_rows,
               " query rows exceed one grid");
  Tensor lse = Tensor::empty({n_q_rows}, DType::kF32, q.device());
  Tensor dvals = Tensor::empty({n_q_rows}, DType::kF32, q.device());
  const int32_t* docs = doc_ids.defined() ? doc_ids.data<int32_t>() : nullptr;
  cudaStream_t stream = current_stream();
  dispatch_float(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto P = [](const Tensor& t) { return static_cast<const T*>(t.data_ptr()); };
    attn_dq_kernel<T><<<static_cast<unsigned>(n_q_rows), kThreads, 0, stream>>>(
        P(q), P(k), P(v), P(out), P(dout), docs, static_cast<T*>(dq.data_ptr()), lse.data<float>(),
        dvals.data<float>(), a);
    VELA_CUDA_CHECK_LAUNCH();
    attn_dkv_kernel<T><<<static_cast<unsigned>(n_kv_rows), kThreads, 0, stream>>>(
        P(q), P(k), P(v), P(dout), docs, lse.data<float>(), dvals.data<float>(),
        static_cast<T*>(dk.data_ptr()), static_cast<T*>(dv.data_ptr()), a);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

// ---- GEMM path ----

// P = softmax(scale * S) over the visible keys of each row (causal, same document), in place;
// invisible entries become 0. S: [n_rep, seq, seq] f32, one block per (head, query) row. lse (if
// not null) receives row r's log-sum-exp at lse[r] (rows are (head of the group, query)).
static __global__ void masked_softmax_kernel(float* s, const int32_t* doc_row, int64_t n_rows,
                                             int64_t n_seq, float scale, float* lse) {
  __shared__ float smem[64];
  for (int64_t row = blockIdx.x; row < n_rows; row += gridDim.x) {
    const int64_t t = row % n_seq;
    float* r = s + row * n_seq;
    auto visible = [&](int64_t p) {
      return p <= t && (doc_row == nullptr || doc_row[p] == doc_row[t]);
    };
    MaxSum ms;
    for (int64_t p = threadIdx.x; p < n_seq; p += blockDim.x)
      if (visible(p)) max_sum_add(ms, r[p] * scale);
    ms = block_max_sum(ms, smem);
    const float inv = 1.0f / ms.s;
    if (lse != nullptr && threadIdx.x == 0) lse[row] = ms.m + logf(ms.s);
    for (int64_t p = threadIdx.x; p < n_seq; p += blockDim.x)
      r[p] = visible(p) ? __expf(r[p] * scale - ms.m) * inv : 0.0f;
  }
}

// dS = P * (dP - rowsum(P * dP)) * scale; P and dS also rounded to T for the GEMMs that follow.
template <typename T>
static __global__ void softmax_grad_kernel(const float* p, const float* dp, T* p_t, T* ds_t,
                                           int64_t n_rows, int64_t n_seq, float scale) {
  __shared__ float smem[32];
  for (int64_t row = blockIdx.x; row < n_rows; row += gridDim.x) {
    const float* pr = p + row * n_seq;
    const float* dpr = dp + row * n_seq;
    float dot = 0.0f;
    for (int64_t j = threadIdx.x; j < n_seq; j += blockDim.x) dot += pr[j] * dpr[j];
    dot = block_sum<true>(dot, smem);
    for (int64_t j = threadIdx.x; j < n_seq; j += blockDim.x) {
      p_t[row * n_seq + j] = from_float<T>(pr[j]);
      ds_t[row * n_seq + j] = from_float<T>(pr[j] * (dpr[j] - dot) * scale);
    }
  }
}

// Query-head views of one group: [n_rep, seq, head_dim] with strides (D, H * D, 1).
Tensor group_heads(const Tensor& x, int64_t b, int64_t first, int64_t n) {
  return x.select(0, b).slice(1, first, first + n).transpose(0, 1);
}

void attention_backward_gemm(const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& doc_ids, float scale, const Tensor& dout, Tensor& dq,
                             Tensor& dk, Tensor& dv) {
  const int64_t n_batch = q.size(0), n_seq = q.size(1), n_heads = q.size(2), d = q.size(3);
  const int64_t n_kv = k.size(2), n_rep = n_heads / n_kv, n_rows = n_rep * n_seq;
  const DType dt = q.dtype();
  const Device dev = q.device();
  Tensor s = Tensor::empty({n_rep, n_seq, n_seq}, DType::kF32, dev);   // S, then P
  Tensor dp = Tensor::empty({n_rep, n_seq, n_seq}, DType::kF32, dev);  // dP
  Tensor p_t = Tensor::empty({n_rep, n_seq, n_seq}, dt, dev);
  Tensor ds_t = Tensor::empty({n_rep, n_seq, n_seq}, dt, dev);
  Tensor q_g = Tensor::empty({n_rep, n_seq, d}, dt, dev);  // the group's heads, contiguous
  Tensor do_g = Tensor::empty({n_rep, n_seq, d}, dt, dev);
  cudaStream_t stream = current_stream();
  const int blocks = static_cast<int>(std::min<int64_t>(n_rows, 65535));
  const int threads = row_block_threads(n_seq, 8, 512);
  for (int64_t b = 0; b < n_batch; ++b) {
    const int32_t* doc_row = doc_ids.defined() ? doc_ids.data<int32_t>() + b * n_seq : nullptr;
    for (int64_t g = 0; g < n_kv; ++g) {
      q_g.copy_(group_heads(q, b, g * n_rep, n_rep));
      do_g.copy_(group_heads(dout, b, g * n_rep, n_rep));
      const Tensor kg = k.select(0, b).select(1, g), vg = v.select(0, b).select(1, g);  // [seq, D]
      ops::gemm(q_g, kg, s, false, true);
      masked_softmax_kernel<<<blocks, threads, 0, stream>>>(s.data<float>(), doc_row, n_rows, n_seq,
                                                            scale, nullptr);
      VELA_CUDA_CHECK_LAUNCH();
      ops::gemm(do_g, vg, dp, false, true);
      dispatch_float(dt, [&](auto tag) {
        using T = decltype(tag);
        softmax_grad_kernel<T><<<blocks, threads, 0, stream>>>(
            s.data<float>(), dp.data<float>(), static_cast<T*>(p_t.data_ptr()),
            static_cast<T*>(ds_t.data_ptr()), n_rows, n_seq, scale);
        VELA_CUDA_CHECK_LAUNCH();
      });
      // dQ per head straight into dq[b, :, h, :] (a [seq, D] matrix with row stride H * D).
      for (int64_t r = 0; r < n_rep; ++r) {
        Tensor dq_h = dq.select(0, b).select(1, g * n_rep + r);
        ops::gemm(ds_t.select(0, r), kg, dq_h, false, false);
      }
      // dK, dV: one GEMM each over the stacked heads (the sum over heads is the GEMM's K dim,
      // accumulated in f32), written into dk[b, :, g, :] / dv[b, :, g, :].
      Tensor dk_g = dk.select(0, b).select(1, g), dv_g = dv.select(0, b).select(1, g);
      ops::gemm(ds_t.view({n_rows, n_seq}), q_g.view({n_rows, d}), dk_g, true, false);
      ops::gemm(p_t.view({n_rows, n_seq}), do_g.view({n_rows, d}), dv_g, true, false);
    }
  }
}

void attention_forward_recompute(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Tensor& doc_ids, float scale, Tensor& out,
                                 const Tensor& lse) {
  AttnBwdArgs a{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), scale};
  VELA_CHECK_T(Unsupported, a.head_dim <= 4 * kThreads, "causal_attention: head_dim ", a.head_dim,
               " > ", 4 * kThreads, " is not supported on CUDA");
  const int64_t n_q_rows = a.n_batch * a.n_seq * a.n_heads;
  const int32_t* docs = doc_ids.defined() ? doc_ids.data<int32_t>() : nullptr;
  dispatch_float(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto P = [](const Tensor& t) { return static_cast<const T*>(t.data_ptr()); };
    attn_fwd_kernel<T><<<static_cast<unsigned>(n_q_rows), kThreads, 0, current_stream()>>>(
        P(q), P(k), P(v), docs, static_cast<T*>(out.data_ptr()),
        lse.defined() ? lse.data<float>() : nullptr, a);
    VELA_CUDA_CHECK_LAUNCH();
  });
}

// P rounded to T (the forward's P V GEMM takes one input dtype).
template <typename T>
static __global__ void round_kernel(const float* p, T* p_t, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    p_t[i] = from_float<T>(p[i]);
}

void attention_forward_gemm(const Tensor& q, const Tensor& k, const Tensor& v,
                            const Tensor& doc_ids, float scale, Tensor& out, const Tensor& lse) {
  const int64_t n_batch = q.size(0), n_seq = q.size(1), d = q.size(3);
  const int64_t n_kv = k.size(2), n_rep = q.size(2) / n_kv, n_rows = n_rep * n_seq;
  const DType dt = q.dtype();
  const Device dev = q.device();
  Tensor s = Tensor::empty({n_rep, n_seq, n_seq}, DType::kF32, dev);
  Tensor p_t = dt == DType::kF32 ? s : Tensor::empty({n_rep, n_seq, n_seq}, dt, dev);
  Tensor q_g = Tensor::empty({n_rep, n_seq, d}, dt, dev);
  cudaStream_t stream = current_stream();
  const int blocks = static_cast<int>(std::min<int64_t>(n_rows, 65535));
  const int threads = row_block_threads(n_seq, 8, 512);
  for (int64_t b = 0; b < n_batch; ++b) {
    const int32_t* doc_row = doc_ids.defined() ? doc_ids.data<int32_t>() + b * n_seq : nullptr;
    for (int64_t g = 0; g < n_kv; ++g) {
      q_g.copy_(group_heads(q, b, g * n_rep, n_rep));
      const Tensor kg = k.select(0, b).select(1, g), vg = v.select(0, b).select(1, g);
      // The group's rows of lse [batch, n_heads, seq]: heads g * n_rep.. of batch row b.
      float* lse_g = lse.defined() ? lse.data<float>() + (b * n_kv + g) * n_rep * n_seq : nullptr;
      ops::gemm(q_g, kg, s, false, true);
      masked_softmax_kernel<<<blocks, threads, 0, stream>>>(s.data<float>(), doc_row, n_rows, n_seq,
                                                            scale, lse_g);
      VELA_CUDA_CHECK_LAUNCH();
      if (dt != DType::kF32) {
        dispatch_float(dt, [&](auto tag) {
          using T = decltype(tag);
          const int64_t n = n_rows * n_seq;
          round_kernel<T><<<grid_stride_blocks(n, 256), 256, 0, stream>>>(
              s.data<float>(), static_cast<T*>(p_t.data_ptr()), n);
          VELA_CUDA_CHECK_LAUNCH();
        });
      }
      for (int64_t r = 0; r < n_rep; ++r) {
        Tensor out_h = out.select(0, b).select(1, g * n_rep + r);  // [seq, D], row stride H * D
        ops::gemm(p_t.select(0, r), vg, out_h, false, false);
      }
    }
  }
}

enum class DensePath { kFlash, kGemm, kRecompute };

// VELA_CUDA_DENSE_ATTN=flash|gemm|recompute forces a path (flash only where the kernels support
// the inputs; elsewhere it falls back like the default). Default: flash where supported, else
// GEMM unless its score buffers would pass 2 GiB.
DensePath pick_path(const Tensor& q, const Tensor& k, const Tensor& v) {
  const char* env = std::getenv("VELA_CUDA_DENSE_ATTN");
  if (env != nullptr && std::strcmp(env, "recompute") == 0) return DensePath::kRecompute;
  if (env != nullptr && std::strcmp(env, "gemm") == 0) return DensePath::kGemm;
  if (flash_attention_supported(q, k, v)) return DensePath::kFlash;
  const int64_t n_rep = q.size(2) / k.size(2), n_seq = q.size(1);
  const int64_t buffer_bytes =
      n_rep * n_seq * n_seq * (8 + 2 * static_cast<int64_t>(dtype_size(q.dtype())));
  return buffer_bytes > (int64_t{2} << 30) ? DensePath::kRecompute : DensePath::kGemm;
}

}  // namespace

void causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_ids,
                      float scale, Tensor& out, const Tensor& lse) {
  DeviceGuard guard(q.device().index);
  if (q.numel() == 0) return;
  switch (pick_path(q, k, v)) {
    case DensePath::kFlash:
      flash_attention_forward(q, k, v, doc_ids, scale, out, lse);
      break;
    case DensePath::kRecompute:
      attention_forward_recompute(q, k, v, doc_ids, scale, out, lse);
      break;
    case DensePath::kGemm:
      attention_forward_gemm(q, k, v, doc_ids, scale, out, lse);
      break;
  }
}

void causal_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& doc_ids, float scale, const Tensor& out,
                               const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv,
                               const Tensor& lse) {
  DeviceGuard guard(q.device().index);
  if (q.numel() == 0) return;
  switch (pick_path(q, k, v)) {
    case DensePath::kFlash:
      flash_attention_backward(q, k, v, doc_ids, scale, out, dout, dq, dk, dv, lse);
      break;
    case DensePath::kRecompute:
      attention_backward_recompute(q, k, v, doc_ids, scale, out, dout, dq, dk, dv);
      break;
    case DensePath::kGemm:
      attention_backward_gemm(q, k, v, doc_ids, scale, dout, dq, dk, dv);
      break;
  }
}

}  // namespace vela::ops::cuda
