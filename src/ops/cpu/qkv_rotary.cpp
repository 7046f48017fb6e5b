// CPU twin of qkv_rotary_kv_write (ops/qkv_rotary.h): the unfused ops in sequence.
#include "core/scratch_arena.h"
#include "ops/cpu/cpu_ops.h"

namespace vela::ops::cpu {

void qkv_rotary_kv_write(const Tensor& qkv, const Tensor& positions, const Tensor& table,
                         const Tensor& q_norm, const Tensor& k_norm, float eps,
                         const Tensor& out_cache_loc, Tensor& q_out, Tensor& k_cache,
                         Tensor& v_cache) {
  const int64_t n = qkv.size(0), h = q_out.size(1), d = q_out.size(2), hkv = k_cache.size(1);
  const int64_t qd = h * d, kvd = hkv * d;
  ScratchMark temporaries;
  Tensor k = scratch_tensor({n, hkv, d}, qkv.dtype(), qkv.device());
  Tensor v = scratch_tensor({n, hkv, d}, qkv.dtype(), qkv.device());
  q_out.view({n, qd}).copy_(qkv.slice(1, 0, qd));
  k.view({n, kvd}).copy_(qkv.slice(1, qd, qd + kvd));
  v.view({n, kvd}).copy_(qkv.slice(1, qd + kvd, qd + 2 * kvd));
  if (q_norm.defined()) {
    Tensor qr = q_out.view({n * h, d}), kr = k.view({n * hkv, d});
    rms_norm(qr, q_norm, eps, qr);
    rms_norm(kr, k_norm, eps, kr);
  }
  rotary(q_out, positions, table);
  rotary(k, positions, table);
  kv_write(k, v, out_cache_loc, k_cache, v_cache);
}

}  // namespace vela::ops::cpu
