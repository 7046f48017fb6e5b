// CPU causal attention backward (f32), the textbook form with recomputed softmax rows:
//   P = softmax(scale * q k^T) over the visible keys (causal, same document); with a saved
//   log-sum-exp (lse, [batch, n_heads, seq]) P = exp(scale * q k^T - lse) instead
//   D_t = dout_t . out_t,  dS = P * (dout v^T - D),  dq = scale * dS k,  dk = scale * dS^T q,
//   dv = P^T dout.
// Parallel over (batch, query head): each work item owns its dq rows and its own partial dk / dv
// ([n_heads] slots per KV row); a second pass sums the partials of the query heads that share a KV
// head (GQA) in head order. No two threads write the same element and every sum runs in a fixed
// order, so the result does not depend on the thread count.
#include <cmath>
#include <cstring>
#include <vector>

#include "core/parallel.h"
#include "ops/cpu/cpu_backward_ops.h"

namespace vela::ops::cpu {

void causal_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& doc_ids, float scale, const Tensor& out,
                               const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv,
                               const Tensor& lse) {
  const int64_t n_batch = q.size(0), n_seq = q.size(1), n_heads = q.size(2), d = q.size(3);
  const int64_t n_kv = k.size(2), n_rep = n_heads / n_kv;
  const int32_t* docs = doc_ids.defined() ? doc_ids.data<int32_t>() : nullptr;
  const float* qp = q.data<float>();
  const float* kp = k.data<float>();
  const float* vp = v.data<float>();
  const float* op = out.data<float>();
  const float* dop = dout.data<float>();
  float* dqp = dq.data<float>();
  const float* lse_p = lse.defined() ? lse.data<float>() : nullptr;  // [batch, n_heads, seq]
  // Per query head partials of dk / dv: [batch, seq, n_heads, head_dim], like q.
  const size_t part_numel = static_cast<size_t>(q.numel());
  std::vector<float> dk_part(part_numel, 0.0f), dv_part(part_numel, 0.0f);
  parallel_for(n_batch * n_heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> prob(static_cast<size_t>(n_seq));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t b = item / n_heads, h = item % n_heads, g = h / n_rep;
      const int32_t* doc_row = docs ? docs + b * n_seq : nullptr;
      auto kv_off = [&](int64_t p) { return ((b * n_seq + p) * n_kv + g) * d; };
      auto q_off = [&](int64_t t) { return ((b * n_seq + t) * n_heads + h) * d; };
      for (int64_t t = 0; t < n_seq; ++t) {
        const float* qr = qp + q_off(t);
        const float* dor = dop + q_off(t);
        float* dqr = dqp + q_off(t);
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
        float inv = 1.0f;
        if (lse_p != nullptr) {  // P = exp(s - lse), already normalized
          const float row_lse = lse_p[(b * n_heads + h) * n_seq + t];
          for (int64_t p = 0; p <= t; ++p)
            prob[p] = prob[p] == -INFINITY ? 0.0f : std::exp(prob[p] - row_lse);
        } else {
          double sum = 0.0;
          for (int64_t p = 0; p <= t; ++p) {
            prob[p] = prob[p] == -INFINITY ? 0.0f : std::exp(prob[p] - m);
            sum += prob[p];
          }
          inv = static_cast<float>(1.0 / sum);
        }
        float dd = 0.0f;  // D_t = dout . out
        const float* orow = op + q_off(t);
#pragma omp simd reduction(+ : dd)
        for (int64_t i = 0; i < d; ++i) dd += dor[i] * orow[i];
        for (int64_t p = 0; p <= t; ++p) {
          if (prob[p] == 0.0f) continue;
          const float pr = prob[p] * inv;
          const float* vr = vp + kv_off(p);
          const float* kr = kp + kv_off(p);
          float* dkr = dk_part.data() + q_off(p);  // this head's partial for key p
          float* dvr = dv_part.data() + q_off(p);
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
  });
  // dk / dv: the partials of the n_rep query heads of each KV head, summed in head order.
  float* dkp = dk.data<float>();
  float* dvp = dv.data<float>();
  parallel_for(n_batch * n_seq * n_kv, 16, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {  // row = (b * n_seq + p) * n_kv + g
      const int64_t g = row % n_kv, bp = row / n_kv;
      float* dkr = dkp + row * d;
      float* dvr = dvp + row * d;
      const float* pk = dk_part.data() + (bp * n_heads + g * n_rep) * d;
      const float* pv = dv_part.data() + (bp * n_heads + g * n_rep) * d;
      for (int64_t i = 0; i < d; ++i) {
        dkr[i] = pk[i];
        dvr[i] = pv[i];
      }
      for (int64_t r = 1; r < n_rep; ++r)
        for (int64_t i = 0; i < d; ++i) {
          dkr[i] += pk[r * d + i];
          dvr[i] += pv[r * d + i];
        }
    }
  });
}

}  // namespace vela::ops::cpu
