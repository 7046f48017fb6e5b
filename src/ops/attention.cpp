// Attention dispatchers: validate shapes/dtypes/devices, then run the backend, plus the host-side
// planners of the CUDA kernels (decode split count, prefill tile list). The inference ops run on
// CPU and CUDA (ops/cuda/attention_*.cu); dense causal_attention runs on CUDA through the training
// path's dispatcher (ops/cuda/attention_dense.cu: flash kernels, or the GEMM / recompute paths). On
// CUDA the dispatchers read no device data; the graph-friendly ops trust device metadata.
#include "ops/attention.h"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "core/env.h"
#include "core/error.h"
#include "ops/dispatch.h"
#if defined(VELA_HAS_CUDA)
#include "core/cuda/cuda_api.h"
#include "core/cuda/stream.h"
#include "ops/cuda/cuda_backward_ops.h"
#include "ops/cuda/cuda_ops.h"
#endif

namespace vela::ops {
namespace {

void check_cpu(const char* op, const Tensor& t) {
  VELA_CHECK_T(Unsupported, t.is_cpu(), op, ": CUDA attention is not implemented yet (tensor ",
               t.str(), ")");
}

void check_i32(const char* op, const char* name, const Tensor& t, int rank) {
  VELA_CHECK(t.defined() && t.dtype() == DType::kI32 && t.dim() == rank && t.is_contiguous(), op,
             ": ", name, " must be a contiguous i32 tensor of rank ", rank, ", got ", t.str());
}

void check_devices(const char* op, const Tensor& ref, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    VELA_CHECK(t->device() == ref.device(), op, ": tensor ", t->str(), " is on ", t->device().str(),
               " but q is on ", ref.device().str());
}

// Shapes, dtypes and devices shared by the paged ops (q/out [n_q, n_heads, head_dim] over the
// cache); n_seqs from seq_lens.
void check_paged(const char* op, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                 const Tensor& req_to_token, const Tensor& req_pool_indices, const Tensor& seq_lens,
                 const Tensor& out) {
  VELA_CHECK(q.dim() == 3 && out.shape() == q.shape(), op, ": q ", q.str(), " and out ", out.str(),
             " must be [n_tokens, n_heads, head_dim]");
  VELA_CHECK(q.stride(2) == 1 && q.stride(1) == q.size(2), op, ": q rows must be contiguous");
  VELA_CHECK(out.is_contiguous(), op, ": out must be contiguous");
  VELA_CHECK(k_cache.dim() == 3 && k_cache.shape() == v_cache.shape() && k_cache.is_contiguous() &&
                 v_cache.is_contiguous() && k_cache.size(2) == q.size(2),
             op, ": caches ", k_cache.str(), " must be contiguous [n_slots, n_kv_heads, ",
             q.size(2), "]");
  VELA_CHECK(k_cache.size(1) > 0 && q.size(1) % k_cache.size(1) == 0, op, ": n_heads ", q.size(1),
             " is not a multiple of n_kv_heads ", k_cache.size(1));
  VELA_CHECK(q.dtype() == out.dtype() && k_cache.dtype() == v_cache.dtype() &&
                 is_floating(q.dtype()) && is_floating(k_cache.dtype()),
             op, ": q/out and cache dtypes must be floating and match pairwise");
  check_i32(op, "req_to_token", req_to_token, 2);
  check_i32(op, "req_pool_indices", req_pool_indices, 1);
  check_i32(op, "seq_lens", seq_lens, 1);
  VELA_CHECK(seq_lens.size(0) == req_pool_indices.size(0), op, ": ", seq_lens.size(0),
             " seq_lens but ", req_pool_indices.size(0), " req_pool_indices");
  check_devices(op, q, {&k_cache, &v_cache, &req_to_token, &req_pool_indices, &seq_lens, &out});
  if (q.is_cuda()) {
    VELA_CHECK_T(Unsupported, q.dtype() == k_cache.dtype(), op,
                 ": on CUDA q and the caches must share one dtype, got ", dtype_name(q.dtype()),
                 " and ", dtype_name(k_cache.dtype()));
    const int64_t d = q.size(2);
    VELA_CHECK_T(Unsupported, cuda_attention_head_dim_ok(d), op,
                 ": CUDA attention kernels support head_dim a multiple of 8 up to ",
                 kMaxCudaHeadDim, ", got ", d);
  }
}

// Host checks of CPU metadata: qo (n_seqs + 1 entries, or null for one query per sequence) against
// seq_lens, the req_to_token width and its rows.
void check_host_metadata(const char* op, const Tensor& q, const Tensor& req_to_token,
                         const Tensor& req_pool_indices, const Tensor& seq_lens,
                         const int32_t* qo) {
  const int32_t* lens = seq_lens.data<int32_t>();
  const int32_t* rows = req_pool_indices.data<int32_t>();
  const int64_t n_seqs = seq_lens.size(0);
  if (qo != nullptr)
    VELA_CHECK(qo[0] == 0 && qo[n_seqs] == q.size(0), op,
               ": qo_indptr must run from 0 to n_tokens (", q.size(0), ")");
  for (int64_t s = 0; s < n_seqs; ++s) {
    const int32_t q_len = qo != nullptr ? qo[s + 1] - qo[s] : (lens[s] > 0 ? 1 : 0);
    VELA_CHECK(q_len >= 0 && q_len <= lens[s], op, ": sequence ", s, " has ", q_len,
               " queries but only ", lens[s], " cached tokens");
    VELA_CHECK(lens[s] <= req_to_token.size(1), op, ": sequence ", s, " length ", lens[s],
               " exceeds req_to_token width ", req_to_token.size(1));
    VELA_CHECK(rows[s] >= 0 && rows[s] < req_to_token.size(0), op, ": req_pool_index ", rows[s],
               " out of range");
  }
}

}  // namespace

void causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_ids,
                      float scale, Tensor& out, const Tensor& lse) {
  const char* op = "causal_attention";
  VELA_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && out.dim() == 4, op,
             ": q, k, v, out must be [batch, seq, heads, head_dim]");
  VELA_CHECK(k.shape() == v.shape(), op, ": k ", k.str(), " and v ", v.str(), " differ");
  VELA_CHECK(q.size(0) == k.size(0) && q.size(1) == k.size(1) && q.size(3) == k.size(3), op, ": q ",
             q.str(), " and k ", k.str(), " disagree on batch, seq or head_dim");
  VELA_CHECK(k.size(2) > 0 && q.size(2) % k.size(2) == 0, op, ": n_heads ", q.size(2),
             " is not a multiple of n_kv_heads ", k.size(2));
  VELA_CHECK(out.shape() == q.shape(), op, ": out ", out.str(), " must match q ", q.str());
  VELA_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype() && q.dtype() == out.dtype() &&
                 is_floating(q.dtype()),
             op, ": q, k, v, out must share one floating dtype");
  VELA_CHECK(q.is_contiguous() && k.is_contiguous() && v.is_contiguous() && out.is_contiguous(), op,
             ": tensors must be contiguous");
  if (doc_ids.defined()) {
    check_i32(op, "doc_ids", doc_ids, 2);
    VELA_CHECK(doc_ids.size(0) == q.size(0) && doc_ids.size(1) == q.size(1), op, ": doc_ids ",
               doc_ids.str(), " must be [batch, seq]");
  }
  if (lse.defined()) {
    const Shape lse_shape({q.size(0), q.size(2), q.size(1)});  // [batch, n_heads, seq]
    VELA_CHECK(lse.dtype() == DType::kF32 && lse.is_contiguous() && lse.shape() == lse_shape, op,
               ": lse must be a contiguous f32 [batch, n_heads, seq] = ", lse_shape.str(),
               " tensor, got ", lse.str());
    check_devices(op, q, {&lse});
  }
#if defined(VELA_HAS_CUDA)
  if (q.is_cuda()) {  // ops/cuda/attention_dense.cu (the training path's kernels)
    check_devices(op, q, {&k, &v, &out});
    if (doc_ids.defined()) check_devices(op, q, {&doc_ids});
    cuda::causal_attention(q, k, v, doc_ids, scale, out, lse);
    return;
  }
#endif
  for (const Tensor* t : std::initializer_list<const Tensor*>{&q, &k, &v, &out}) check_cpu(op, *t);
  cpu::causal_attention(q, k, v, doc_ids, scale, out, lse);
}

void kv_write(const Tensor& k, const Tensor& v, const Tensor& out_cache_loc, Tensor& k_cache,
              Tensor& v_cache) {
  const char* op = "kv_write";
  VELA_CHECK(k.dim() == 3 && k.shape() == v.shape(), op, ": k ", k.str(), " and v ", v.str(),
             " must both be [n_tokens, n_kv_heads, head_dim]");
  VELA_CHECK(k_cache.dim() == 3 && k_cache.shape() == v_cache.shape() &&
                 k_cache.size(1) == k.size(1) && k_cache.size(2) == k.size(2),
             op, ": caches ", k_cache.str(), " must be [n_slots, ", k.size(1), ", ", k.size(2),
             "]");
  VELA_CHECK(k.dtype() == k_cache.dtype() && v.dtype() == v_cache.dtype() && k.dtype() == v.dtype(),
             op, ": K/V and cache dtypes differ");
  VELA_CHECK(k_cache.is_contiguous() && v_cache.is_contiguous(), op, ": caches must be contiguous");
  VELA_CHECK(
      k.stride(2) == 1 && v.stride(2) == 1 && k.stride(1) == k.size(2) && v.stride(1) == v.size(2),
      op, ": each token's K/V rows must be contiguous");
  check_i32(op, "out_cache_loc", out_cache_loc, 1);
  VELA_CHECK(out_cache_loc.size(0) == k.size(0), op, ": out_cache_loc has ", out_cache_loc.size(0),
             " entries for ", k.size(0), " tokens");
  check_devices(op, k, {&v, &k_cache, &v_cache, &out_cache_loc});
  VELA_DISPATCH(k.device(), kv_write, k, v, out_cache_loc, k_cache, v_cache);
}

void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                     const Tensor& req_to_token, const Tensor& req_pool_indices,
                     const Tensor& seq_lens, const Tensor& qo_indptr, float scale, Tensor& out) {
  const char* op = "paged_attention";
  check_paged(op, q, k_cache, v_cache, req_to_token, req_pool_indices, seq_lens, out);
  check_i32(op, "qo_indptr", qo_indptr, 1);
  VELA_CHECK(qo_indptr.size(0) == seq_lens.size(0) + 1, op,
             ": need n_seqs seq_lens/req_pool_indices and n_seqs + 1 qo_indptr");
  check_devices(op, q, {&qo_indptr});
  if (q.is_cpu())  // the CUDA backend validates its host copy of the metadata itself
    check_host_metadata(op, q, req_to_token, req_pool_indices, seq_lens, qo_indptr.data<int32_t>());
  VELA_DISPATCH(q.device(), paged_attention, q, k_cache, v_cache, req_to_token, req_pool_indices,
                seq_lens, qo_indptr, scale, out);
}

bool decode_on_tensor_cores(DType dtype, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim) {
  if (dtype != DType::kBF16 && dtype != DType::kF16) return false;
  if (n_kv_heads <= 0 || n_heads % n_kv_heads != 0) return false;
  const int64_t group = n_heads / n_kv_heads;
  return head_dim <= 64 && group >= 2 && group <= 16;
}

int decode_num_splits(int64_t n_seqs, int64_t n_kv_heads, int64_t max_len, int sm_count,
                      bool tensor_core) {
  VELA_CHECK(n_seqs >= 0 && n_kv_heads > 0 && max_len >= 0 && sm_count > 0,
             "decode_num_splits: bad arguments (n_seqs ", n_seqs, ", n_kv_heads ", n_kv_heads,
             ", max_len ", max_len, ", sm_count ", sm_count, ")");
  // A/B runs of the policy: VELA_DECODE_SPLIT_KEYS, the fewest keys per split (default 64), and
  // VELA_DECODE_SPLIT_FILL, the blocks per SM it aims at (default 4).
  static const int64_t min_keys = env_int("VELA_DECODE_SPLIT_KEYS", 64, 16, 1 << 20);
  static const int64_t fill = env_int("VELA_DECODE_SPLIT_FILL", 4, 1, 64);
  // VELA_DECODE_SPLIT_FULL_KEYS: the keys per split of a batch that covers the SMs (default 1024).
  static const int64_t full_keys = env_int("VELA_DECODE_SPLIT_FULL_KEYS", 1024, 16, 1 << 20);
  // VELA_DECODE_SPLIT_COVER_ROWS: where the row kernel's batch covers the device, in quarters of
  // the SM count (default 12 = 3 x sm_count; 3 is the tensor-core kernel's 3/4).
  static const int64_t cover_rows = env_int("VELA_DECODE_SPLIT_COVER_ROWS", 12, 1, 1024);
  const int64_t blocks = std::max<int64_t>(n_seqs * n_kv_heads, 1);
  const int64_t want = (fill * static_cast<int64_t>(sm_count) + blocks - 1) / blocks;
  const int64_t by_len = (max_len + min_keys - 1) / min_keys;
  // A batch whose (sequence, KV head) blocks alone cover the device splits only per 1024 keys:
  // there the merge kernel and the shorter blocks cost more than the fill gains. Measured with
  // the keys in HBM (bench/results/decode_attention_hbm_h200.txt). The tensor-core kernel covers
  // it from 3/4 of the SMs: bench-1b B=64 x 512 keys 13.1 us unsplit vs 19.9-23.4 us at 2-4
  // splits, the engine at 2-5 splits a sequence 1.85-1.88 vs 1.62 ms a batch-64 step. The row
  // kernel (one key row per thread group, fewer bytes in flight a block) from 3 x the SMs: the
  // Qwen3-1.7B shape (16q / 8kv / d128) at batch 16 (128 blocks) ran 2.87 ms a step unsplit
  // against 2.41-2.42 at 8 splits, at batch 64 (512 blocks) 3.14 unsplit against 3.35 at 4.
  const int64_t cover_quarters = tensor_core ? 3 : cover_rows;
  if (4 * blocks >= cover_quarters * static_cast<int64_t>(sm_count)) {
    const int64_t by_full = (max_len + full_keys - 1) / full_keys;
    return static_cast<int>(std::clamp<int64_t>(std::min(want, by_full), 1, kMaxDecodeSplits));
  }
  return static_cast<int>(std::clamp<int64_t>(std::min(want, by_len), 1, kMaxDecodeSplits));
}

void paged_decode_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const Tensor& req_to_token, const Tensor& req_pool_indices,
                            const Tensor& seq_lens, float scale, int n_splits, Tensor& o_part,
                            Tensor& lse_part, Tensor& out, const L2Warm& warm) {
  const char* op = "paged_decode_attention";
  check_paged(op, q, k_cache, v_cache, req_to_token, req_pool_indices, seq_lens, out);
  VELA_CHECK(q.size(0) == seq_lens.size(0), op, ": q has ", q.size(0), " rows for ",
             seq_lens.size(0), " sequences (one query per sequence)");
  VELA_CHECK(n_splits >= 1 && n_splits <= kMaxDecodeSplits, op, ": n_splits ", n_splits,
             " outside [1, ", kMaxDecodeSplits, "]");
  if (n_splits > 1) {
    const int64_t n_o = decode_o_part_numel(q.size(0), q.size(1), q.size(2), n_splits);
    const int64_t n_lse = decode_lse_part_numel(q.size(0), q.size(1), n_splits);
    VELA_CHECK(o_part.defined() && o_part.dtype() == DType::kF32 && o_part.is_contiguous() &&
                   o_part.numel() >= n_o,
               op, ": o_part must be a contiguous f32 buffer of >= ", n_o, " elements, got ",
               o_part.str());
    VELA_CHECK(lse_part.defined() && lse_part.dtype() == DType::kF32 && lse_part.is_contiguous() &&
                   lse_part.numel() >= n_lse,
               op, ": lse_part must be a contiguous f32 buffer of >= ", n_lse, " elements, got ",
               lse_part.str());
    check_devices(op, q, {&o_part, &lse_part});
  }
  check_l2_warm(op, q, warm);
  if (q.is_cpu()) check_host_metadata(op, q, req_to_token, req_pool_indices, seq_lens, nullptr);
  VELA_DISPATCH(q.device(), paged_decode_attention, q, k_cache, v_cache, req_to_token,
                req_pool_indices, seq_lens, scale, n_splits, o_part, lse_part, out, warm);
}

int64_t plan_prefill_tiles(const int32_t* qo_indptr, int64_t n_seqs, int tile_q,
                           int32_t* tile_seq_idx, int32_t* tile_q_start, int64_t capacity,
                           int64_t first_seq) {
  const char* op = "plan_prefill_tiles";
  VELA_CHECK(qo_indptr != nullptr && n_seqs >= 0 && tile_q > 0, op, ": bad arguments (n_seqs ",
             n_seqs, ", tile_q ", tile_q, ")");
  VELA_CHECK(qo_indptr[0] == 0, op, ": qo_indptr[0] must be 0, got ", qo_indptr[0]);
  VELA_CHECK(first_seq >= 0 && first_seq <= n_seqs, op, ": first_seq ", first_seq,
             " outside [0, ", n_seqs, "]");
  int64_t n_tiles = 0;
  for (int64_t s = first_seq; s < n_seqs; ++s) {
    const int32_t q_len = qo_indptr[s + 1] - qo_indptr[s];
    VELA_CHECK(q_len >= 0, op, ": qo_indptr decreases at sequence ", s);
    const int32_t n = (q_len + tile_q - 1) / tile_q;
    VELA_CHECK(n_tiles + n <= capacity, op, ": the plan needs more than ", capacity,
               " tiles (see prefill_max_tiles)");
    for (int32_t t = n - 1; t >= 0; --t) {  // later tiles see more keys: schedule them first
      tile_seq_idx[n_tiles] = static_cast<int32_t>(s);
      tile_q_start[n_tiles] = t * tile_q;
      ++n_tiles;
    }
  }
  return n_tiles;
}

int prefill_tile_q(DType dtype, int64_t head_dim, Device device) {
  static const bool force_64 = [] {
    const char* env = std::getenv("VELA_PREFILL_TILE");
    if (env == nullptr || *env == '\0') return false;
    VELA_CHECK(std::string_view(env) == "64", "VELA_PREFILL_TILE=", env,
               ": expected 64 (force the 64-row prefill kernel) or unset");
    return true;
  }();
  if (!device.is_cuda() || force_64 || (dtype != DType::kBF16 && dtype != DType::kF16))
    return kPrefillTileQ;
  if (head_dim <= kPrefillWideMaxHeadDim) return kPrefillWideTileQ;
#ifdef VELA_HAS_SM90A
  // The Hopper wgmma kernel runs 128-row tiles at head_dim 128 too (asked only of a GPU that is
  // there: plans are made for CUDA devices on machines without one, e.g. in tests).
  if (device.index >= 0 && device.index < vela::cuda::device_count()) {
    vela::cuda::DeviceGuard guard(device.index);
    if (cuda::prefill_wgmma_takes(dtype, head_dim)) return kPrefillWideTileQ;
  }
#endif
  return kPrefillTileQ;
}

void paged_prefill_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                             const Tensor& req_to_token, const Tensor& req_pool_indices,
                             const Tensor& seq_lens, const Tensor& qo_indptr,
                             const Tensor& tile_seq_idx, const Tensor& tile_q_start,
                             int64_t n_tiles, int tile_q, float scale, Tensor& out) {
  const char* op = "paged_prefill_attention";
  check_paged(op, q, k_cache, v_cache, req_to_token, req_pool_indices, seq_lens, out);
  check_i32(op, "qo_indptr", qo_indptr, 1);
  VELA_CHECK(qo_indptr.size(0) == seq_lens.size(0) + 1, op,
             ": need n_seqs seq_lens/req_pool_indices and n_seqs + 1 qo_indptr");
  check_i32(op, "tile_seq_idx", tile_seq_idx, 1);
  check_i32(op, "tile_q_start", tile_q_start, 1);
  VELA_CHECK(n_tiles >= 0 && tile_seq_idx.size(0) >= n_tiles && tile_q_start.size(0) >= n_tiles, op,
             ": ", n_tiles, " tiles but the work arrays hold ", tile_seq_idx.size(0), " and ",
             tile_q_start.size(0));
  check_devices(op, q, {&qo_indptr, &tile_seq_idx, &tile_q_start});
  // A plan cut into other tiles than the kernel's would skip or repeat query rows.
  if (q.is_cuda()) {
    const int want = prefill_tile_q(q.dtype(), q.size(2), q.device());
    VELA_CHECK(tile_q == want, op, ": the plan has ", tile_q, "-row tiles but the kernel for ",
               dtype_name(q.dtype()), " head_dim ", q.size(2), " takes ", want,
               " (plan with ops::prefill_tile_q)");
  } else {
    VELA_CHECK(tile_q > 0, op, ": tile_q must be positive, got ", tile_q);
  }
  if (q.is_cpu())
    check_host_metadata(op, q, req_to_token, req_pool_indices, seq_lens, qo_indptr.data<int32_t>());
  VELA_DISPATCH(q.device(), paged_prefill_attention, q, k_cache, v_cache, req_to_token,
                req_pool_indices, seq_lens, qo_indptr, tile_seq_idx, tile_q_start, n_tiles, tile_q,
                scale, out);
}

}  // namespace vela::ops
