// CPU causal attention backward (f32), the textbook form with recomputed softmax rows:
//   P = softmax(scale * q k^T) over the visible keys (causal, same document)
//   D_t = dout_t . out_t,  dS = P * (dout v^T - D),  dq = scale * dS k,  dk = scale * dS^T q,
//   dv = P^T dout.
// Parallel over (batch, kv head): each work item owns the dk / dv rows of its KV head and the dq
// rows of the query heads that share it (GQA), so no two threads write the same element and the
// sums run in a fixed order (deterministic).
#include <cmath>
#include <cstring>
#include <vector>

#include "core/parallel.h"
#include "ops/cpu/cpu_backward_ops.h"

namespace vela::ops::cpu {

void causal_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& doc_ids, float scale, const Tensor& out,
                               const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv) {
  const int64_t n_batch = q.size(0), n_seq = q.size(1), n_heads = q.size(2), d = q.size(3);
  const int64_t n_kv = k.size(2), n_rep = n_heads / n_kv;
  const int32_t* docs = doc_ids.defined() ? doc_ids.data<int32_t>() : nullptr;
  const float* qp = q.data<float>();
  const float* kp = k.data<float>();
  const float* vp = v.data<float>();
  const float* op = out.data<float>();
  const float* dop = dout.data<float>();
  float* dqp = dq.data<float>();
  float* dkp = dk.data<float>();
  float* dvp = dv.data<float>();
  parallel_for(n_batch * n_kv, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> prob(static_cast<size_t>(n_seq));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t b = item / n_kv, g = item % n_kv;
      const int32_t* doc_row = docs ? docs + b * n_seq : nullptr;
      auto kv_off = [&](int64_t p) { return ((b * n_seq + p) * n_kv + g) * d; };
      for (int64_t p = 0; p < n_seq; ++p) {
        std::memset(dkp + kv_off(p), 0, static_cast<size_t>(d) * sizeof(float));
        std::memset(dvp + kv_off(p), 0, static_cast<size_t>(d) * sizeof(float));
      }
      for (int64_t t = 0; t < n_seq; ++t) {
        for (int64_t r = 0; r < n_rep; ++r) {
          const int64_t h = g * n_rep + r;
          const int64_t q_off = ((b * n_seq + t) * n_heads + h) * d;
          const float* qr = qp + q_off;
          const float* dor = dop + q_off;
          float* dqr = dqp + q_off;
          std::memset(dqr, 0, static_cast<size_t>(d) * sizeof(float));
          // Softmax row over visible keys.
          float m = -INFINITY;
          for (int64_t p = 0; p <= t; ++p) {
            if (doc_row && doc_row[p] != doc_row[t]) {
              prob[p] = -INFINITY;
              continue;
            }
            const float* kr = kp + kv_off(p);
            float s = 0.0f;
#pragma omp simd reduction(+ : s)
            for (int64_t i = 0; i < d; ++i) s += qr[i] * kr[i];
            prob[p] = s * scale;
            m = std::max(m, prob[p]);
          }
          double sum = 0.0;
          for (int64_t p = 0; p <= t; ++p) {
            prob[p] = prob[p] == -INFINITY ? 0.0f : std::exp(prob[p] - m);
            sum += prob[p];
          }
          const float inv = static_cast<float>(1.0 / sum);
          float dd = 0.0f;  // D_t = dout . out
#pragma omp simd reduction(+ : dd)
          for (int64_t i = 0; i < d; ++i) dd += dor[i] * op[q_off + i];
          for (int64_t p = 0; p <= t; ++p) {
            if (prob[p] == 0.0f) continue;
            const float pr = prob[p] * inv;
            const float* vr = vp + kv_off(p);
            const float* kr = kp + kv_off(p);
            float* dkr = dkp + kv_off(p);
            float* dvr = dvp + kv_off(p);
            float dp = 0.0f;
#pragma omp simd reduction(+ : dp)
            for (int64_t i = 0; i < d; ++i) dp += dor[i] * vr[i];
            const float ds = pr * (dp - dd) * scale;
#pragma omp simd
            for (int64_t i = 0; i < d; ++i) {
              dqr[i] += ds * kr[i];
              dkr[i] += ds * qr[i];
              dvr[i] += pr * dor[i];
            }
          }
        }
      }
    }
  });
}

}  // namespace vela::ops::cpu
