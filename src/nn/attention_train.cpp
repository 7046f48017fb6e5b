// Attention training path (dense causal, document boundaries optional): forward keeping q/k/v, the
// attention output and its log-sum-exp (the flash backward then skips its statistics pass), and
// the backward through o_proj, attention, rotary (rotation by -theta), QK-norm and the fused qkv
// projection.
#include <cmath>

#include "nn/attention.h"
#include "ops/attention.h"
#include "ops/cast.h"
#include "ops/rms_norm.h"
#include "ops/rotary.h"

namespace vela {

void Attention::project_qkv_train(const Tensor& x, const Tensor& positions,
                                  const Tensor& rope_table, AttentionSaved& saved) const {
  const int64_t n = x.size(0), qd = cfg.q_dim(), kvd = cfg.kv_dim();
  const DType dt = x.dtype();
  Tensor fused = Tensor::empty({n, qd + 2 * kvd}, dt, x.device());  // [n, q_dim + 2 * kv_dim]
  qkv.forward(x, fused);
  saved.q = Tensor::empty({n, cfg.n_heads, cfg.head_dim}, dt, x.device());
  saved.k = Tensor::empty({n, cfg.n_kv_heads, cfg.head_dim}, dt, x.device());
  saved.v = Tensor::empty({n, cfg.n_kv_heads, cfg.head_dim}, dt, x.device());
  // Column blocks of the fused output into contiguous q / k / v (row-strided copies, no host wait).
  Tensor q2 = saved.q.view({n, qd}), k2 = saved.k.view({n, kvd}), v2 = saved.v.view({n, kvd});
  ops::cast(fused.slice(1, 0, qd), q2);
  ops::cast(fused.slice(1, qd, qd + kvd), k2);
  ops::cast(fused.slice(1, qd + kvd, qd + 2 * kvd), v2);
  if (q_norm.defined()) {
    saved.q_raw = saved.q.clone();
    saved.k_raw = saved.k.clone();
    Tensor qr = saved.q.view({n * cfg.n_heads, cfg.head_dim});
    Tensor kr = saved.k.view({n * cfg.n_kv_heads, cfg.head_dim});
    ops::rms_norm(saved.q_raw.view({n * cfg.n_heads, cfg.head_dim}), q_norm, cfg.norm_eps, qr);
    ops::rms_norm(saved.k_raw.view({n * cfg.n_kv_heads, cfg.head_dim}), k_norm, cfg.norm_eps, kr);
  }
  ops::rotary(saved.q, positions, rope_table);
  ops::rotary(saved.k, positions, rope_table);
}

void Attention::forward_dense_train(const Tensor& x, const Tensor& positions,
                                    const Tensor& rope_table, const Tensor& doc_ids, Tensor& out,
                                    AttentionSaved& saved) const {
  const int64_t b = x.size(0), t = x.size(1), n = b * t;
  project_qkv_train(x.view({n, cfg.hidden}), positions, rope_table, saved);
  saved.attn = Tensor::empty({n, cfg.n_heads, cfg.head_dim}, x.dtype(), x.device());
  saved.lse = Tensor::empty({b, cfg.n_heads, t}, DType::kF32, x.device());
  const float scale = 1.0f / std::sqrt(static_cast<float>(cfg.head_dim));
  Tensor attn4 = saved.attn.view({b, t, cfg.n_heads, cfg.head_dim});
  ops::causal_attention(saved.q.view({b, t, cfg.n_heads, cfg.head_dim}),
                        saved.k.view({b, t, cfg.n_kv_heads, cfg.head_dim}),
                        saved.v.view({b, t, cfg.n_kv_heads, cfg.head_dim}), doc_ids, scale, attn4,
                        saved.lse);
  Tensor out2 = out.view({n, cfg.hidden});
  o.forward(saved.attn.view({n, cfg.q_dim()}), out2);
}

void Attention::backward_dense(const Tensor& x, const Tensor& positions, const Tensor& rope_table,
                               const Tensor& doc_ids, const AttentionSaved& saved,
                               const Tensor& dout, Tensor& dx, AttentionGrads& grads) const {
  const int64_t b = x.size(0), t = x.size(1), n = b * t;
  const int64_t h = cfg.n_heads, hkv = cfg.n_kv_heads, d = cfg.head_dim;
  const int64_t qd = cfg.q_dim(), kvd = cfg.kv_dim();
  const DType dt = dout.dtype();
  const Device dev = dout.device();
  // o_proj
  Tensor dattn = Tensor::empty({n, h, d}, dt, dev);  // [n, H, D]
  Tensor dattn2 = dattn.view({n, qd});
  o.backward(saved.attn.view({n, qd}), dout.view({n, cfg.hidden}), dattn2, grads.do_weight,
             grads.do_bias);
  // attention
  Tensor dq = Tensor::empty({n, h, d}, dt, dev);
  Tensor dk = Tensor::empty({n, hkv, d}, dt, dev);
  Tensor dv = Tensor::empty({n, hkv, d}, dt, dev);
  Tensor dq4 = dq.view({b, t, h, d}), dk4 = dk.view({b, t, hkv, d}), dv4 = dv.view({b, t, hkv, d});
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  ops::causal_attention_backward(saved.q.view({b, t, h, d}), saved.k.view({b, t, hkv, d}),
                                 saved.v.view({b, t, hkv, d}), doc_ids, scale,
                                 saved.attn.view({b, t, h, d}), dattn.view({b, t, h, d}), dq4, dk4,
                                 dv4, saved.lse);
  ops::rotary_backward(dq, positions, rope_table);
  ops::rotary_backward(dk, positions, rope_table);
  if (q_norm.defined()) {
    Tensor dqr = dq.view({n * h, d}), dkr = dk.view({n * hkv, d});
    ops::rms_norm_backward(saved.q_raw.view({n * h, d}), q_norm, cfg.norm_eps, dqr, dqr,
                           grads.dq_norm);
    ops::rms_norm_backward(saved.k_raw.view({n * hkv, d}), k_norm, cfg.norm_eps, dkr, dkr,
                           grads.dk_norm);
  }
  // The fused qkv projection as one GEMM pair: dq | dk | dv gathered into the fused layout
  // (row-strided copies), then dx = dqkv Wqkv, dWqkv += dqkv^T x, dbqkv += sum_rows(dqkv). One
  // wide GEMM each runs several times faster than three narrow ones (k / v are only kv_dim wide).
  Tensor dqkv = Tensor::empty({n, qd + 2 * kvd}, dt, dev);
  Tensor dqkv_q = dqkv.slice(1, 0, qd), dqkv_k = dqkv.slice(1, qd, qd + kvd);
  Tensor dqkv_v = dqkv.slice(1, qd + kvd, qd + 2 * kvd);
  ops::cast(dq.view({n, qd}), dqkv_q);
  ops::cast(dk.view({n, kvd}), dqkv_k);
  ops::cast(dv.view({n, kvd}), dqkv_v);
  Tensor dx2 = dx.view({n, cfg.hidden});
  qkv.backward(x.view({n, cfg.hidden}), dqkv, dx2, grads.dqkv_weight, grads.dqkv_bias);
}

}  // namespace vela
