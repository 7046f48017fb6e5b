// qkv_rotary_kv_write: shape, dtype and device checks, then dispatch.
#include "ops/qkv_rotary.h"

#include "ops/checks.h"
#include "ops/dispatch.h"

namespace vela::ops {

void check_qkv_rotary_operands(const char* op, int64_t n, int64_t qkv_width, DType dtype,
                               Device device, const Tensor& positions, const Tensor& table,
                               const Tensor& q_norm, const Tensor& k_norm,
                               const Tensor& out_cache_loc, const Tensor& q_out,
                               const Tensor& k_cache, const Tensor& v_cache) {
  check_defined(op, "q_out", q_out);
  check_defined(op, "k_cache", k_cache);
  check_defined(op, "v_cache", v_cache);
  check_rank(op, "q_out", q_out, 3);
  check_rank(op, "k_cache", k_cache, 3);
  VELA_CHECK(q_out.dtype() == dtype && k_cache.dtype() == dtype, op, ": q_out ", q_out.str(),
             " and k_cache ", k_cache.str(), " must have the projection's dtype ",
             dtype_name(dtype));
  check_same_shape(op, "v_cache", v_cache, "k_cache", k_cache);
  check_same_dtype(op, "v_cache", v_cache, "k_cache", k_cache);
  const int64_t h = q_out.size(1), d = q_out.size(2), hkv = k_cache.size(1);
  VELA_CHECK(k_cache.size(2) == d, op, ": k_cache ", k_cache.str(), " head_dim differs from q_out ",
             q_out.str());
  VELA_CHECK(q_out.size(0) == n && qkv_width == (h + 2 * hkv) * d, op, ": the projection [", n,
             ", ", qkv_width, "] must be [n_tokens, (H + 2 * Hkv) * D] for q_out ", q_out.str(),
             " and cache ", k_cache.str());
  check_contiguous(op, "q_out", q_out);
  check_contiguous(op, "k_cache", k_cache);
  check_contiguous(op, "v_cache", v_cache);
  check_shape(op, "positions", positions, {n});
  check_dtype(op, "positions", positions, DType::kI32);
  check_shape(op, "out_cache_loc", out_cache_loc, {n});
  check_dtype(op, "out_cache_loc", out_cache_loc, DType::kI32);
  check_rank(op, "table", table, 2);
  check_dtype(op, "table", table, DType::kF32);
  check_contiguous(op, "table", table);
  VELA_CHECK(table.size(1) % 2 == 0 && table.size(1) <= d, op, ": rotary table ", table.str(),
             " must have an even width <= head_dim ", d);
  VELA_CHECK(q_norm.defined() == k_norm.defined(), op, ": q_norm and k_norm come together");
  VELA_CHECK(!q_norm.defined() || q_norm.dtype() == k_norm.dtype(), op, ": q_norm ", q_norm.str(),
             " and k_norm ", k_norm.str(), " must share a dtype");
  for (const Tensor* w : {&q_norm, &k_norm}) {
    if (!w->defined()) continue;
    check_shape(op, "q_norm / k_norm", *w, {d});
    VELA_CHECK(w->dtype() == DType::kF32 || w->dtype() == dtype, op, ": QK-norm weight ",
               w->str(), " must be f32 or the dtype of qkv");
    check_contiguous(op, "q_norm / k_norm", *w);
    VELA_CHECK(w->device() == device, op, ": QK-norm weight ", w->str(), " is on another device");
  }
  const Tensor* operands[] = {&positions, &table, &out_cache_loc, &q_out, &k_cache, &v_cache};
  for (const Tensor* t : operands)
    VELA_CHECK(t->device() == device, op, ": operand ", t->str(),
               " is not on the projection's device");
  check_positions_in_table(op, positions, table);
}

void qkv_rotary_kv_write(const Tensor& qkv, const Tensor& positions, const Tensor& table,
                         const Tensor& q_norm, const Tensor& k_norm, float eps,
                         const Tensor& out_cache_loc, Tensor& q_out, Tensor& k_cache,
                         Tensor& v_cache) {
  const char* op = "qkv_rotary_kv_write";
  check_defined(op, "qkv", qkv);
  check_rank(op, "qkv", qkv, 2);
  check_floating(op, "qkv", qkv);
  check_rows(op, "qkv", qkv);
  check_qkv_rotary_operands(op, qkv.size(0), qkv.size(1), qkv.dtype(), qkv.device(), positions,
                            table, q_norm, k_norm, out_cache_loc, q_out, k_cache, v_cache);
  VELA_DISPATCH(qkv.device(), qkv_rotary_kv_write, qkv, positions, table, q_norm, k_norm, eps,
                out_cache_loc, q_out, k_cache, v_cache);
}

}  // namespace vela::ops
