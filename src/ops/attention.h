// Attention ops: causal scaled-dot-product attention for the dense training path and the packed
// (ragged) inference path over a KV cache addressed through a request-to-slot table.
//
// Scores are computed in fp32 with softmax max-subtraction; GQA maps query head h to KV head
// h / (n_heads / n_kv_heads). `scale` is usually 1/sqrt(head_dim).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/l2_warm.h"

namespace vela::ops {

// The largest head_dim the CUDA attention kernels (paged decode / prefill, flash) run.
inline constexpr int64_t kMaxCudaHeadDim = 256;

// Whether the CUDA paged attention kernels run head_dim (a multiple of 8 up to kMaxCudaHeadDim);
// the CPU kernels take any head_dim.
inline constexpr bool cuda_attention_head_dim_ok(int64_t head_dim) {
  return head_dim > 0 && head_dim % 8 == 0 && head_dim <= kMaxCudaHeadDim;
}

// Dense causal attention with optional document boundaries (packed training sequences).
//   q: [batch, seq, n_heads, head_dim]   k, v: [batch, seq, n_kv_heads, head_dim]
//   doc_ids: undefined, or [batch, seq] i32 — a query attends only to keys of the same doc id
//   out: [batch, seq, n_heads, head_dim]; all contiguous, f32/bf16/f16 (one dtype).
//   lse: undefined, or a contiguous f32 [batch, n_heads, seq] tensor on q's device that receives
//        each row's natural-log log-sum-exp of the scaled scores, log(sum_p exp(scale * q.k_p))
//        over the visible keys (head-major so that a query tile's entries are contiguous). The
//        handle is const; the elements are written.
// On CUDA, bf16/f16 with head_dim a multiple of 8 in [32, 256] run the fused flash kernels
// (ops/cuda/attention_flash.cu; other head sizes run the GEMM or recompute paths);
// VELA_CUDA_DENSE_ATTN=gemm|recompute|flash picks a path by hand.
void causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_ids,
                      float scale, Tensor& out, const Tensor& lse = Tensor());

// Writes new K/V rows into one layer's cache: k_cache[out_cache_loc[i]] = k[i].
//   k, v: [n_tokens, n_kv_heads, head_dim]   k_cache, v_cache: [n_slots, n_kv_heads, head_dim]
//   out_cache_loc: [n_tokens] i32
void kv_write(const Tensor& k, const Tensor& v, const Tensor& out_cache_loc, Tensor& k_cache,
              Tensor& v_cache);

// Packed attention of a ragged batch over the cache (after kv_write of this step's tokens).
//   q: [n_tokens, n_heads, head_dim]; sequence s owns q rows [qo_indptr[s], qo_indptr[s+1]) and
//   has seq_lens[s] cached tokens (this step's included) whose slots are
//   req_to_token[req_pool_indices[s], 0 : seq_lens[s]]. Query i of s sits at position
//   seq_lens[s] - q_len_s + i and attends causally to positions <= its own.
//   k_cache, v_cache: [n_slots, n_kv_heads, head_dim]   req_to_token: [max_reqs, max_ctx] i32
//   req_pool_indices, seq_lens: [n_seqs] i32   qo_indptr: [n_seqs + 1] i32
//   out: [n_tokens, n_heads, head_dim]
// On CUDA this is the non-graph path: it copies qo_indptr / seq_lens / req_pool_indices to the host
// (one synchronization), validates them, plans and runs the decode or prefill kernel below with
// temporary workspace.
void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                     const Tensor& req_to_token, const Tensor& req_pool_indices,
                     const Tensor& seq_lens, const Tensor& qo_indptr, float scale, Tensor& out);

// Backward of causal_attention (same masking), from the forward inputs and output:
//   dout: [batch, seq, n_heads, head_dim]; dq: like q; dk, dv: like k (all overwritten).
//   lse: undefined (softmax statistics are recomputed), or the forward's f32
//        [batch, n_heads, seq] log-sum-exp (read only; saves the flash path a forward pass).
// On CUDA the flash backward is deterministic (no atomics): the same inputs give bit-identical
// gradients.
void causal_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& doc_ids, float scale, const Tensor& out,
                               const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv,
                               const Tensor& lse = Tensor());

// ---- CUDA-graph-friendly paged decode and ragged prefill (FlashInfer-style plan / run split) ----
//
// Both ops read seq_lens, req_pool_indices and req_to_token on the device only, allocate nothing
// and never synchronize, so a CUDA graph captured once replays correctly while sequences grow.
// On CUDA, head_dim is any multiple of 8 up to kMaxCudaHeadDim (others: Unsupported; 16, 32,
// 64, 128 and 256 are the exact-tile fast paths, the rest run zero-padded tiles). q, caches and
// out share one dtype (f32, bf16 or f16) and every tensor lives on q's device. Slots read through
// req_to_token are trusted on the device (the CPU versions range-check them).

// The most splits paged_decode_attention accepts (and decode_num_splits returns).
inline constexpr int kMaxDecodeSplits = 128;

// Query rows per prefill work tile (the tensor-core kernel's Q tile): kPrefillTileQ in general,
// kPrefillWideTileQ for bf16/f16 with head_dim <= kPrefillWideMaxHeadDim on CUDA (each warp owns
// two 16-row mma tiles there) and at head_dim 128 on sm_90 (the wgmma kernel: two warpgroups of
// 64 rows). prefill_tile_q says which one a call uses.
inline constexpr int kPrefillTileQ = 64;
inline constexpr int kPrefillWideTileQ = 128;
inline constexpr int64_t kPrefillWideMaxHeadDim = 64;

// The tile_q that paged_prefill_attention needs for these operands (q's dtype, head_dim and
// device): kPrefillWideTileQ for bf16/f16 with head_dim <= 64 on CUDA, or 128 where the Hopper
// wgmma kernel runs (sm_90, VELA_WGMMA_PREFILL not 0), else kPrefillTileQ (the CPU twin ignores
// the plan). VELA_PREFILL_TILE=64 (read once) forces kPrefillTileQ everywhere, for A/B
// benchmarks; another value than 64 is an InvalidArgument error.
int prefill_tile_q(DType dtype, int64_t head_dim, Device device);

// Whether CUDA decode attention of these heads runs on the tensor-core GQA kernel (bf16/f16,
// head_dim <= 64, 2..16 query heads per KV head) rather than the row kernel; the split policy
// differs between them.
bool decode_on_tensor_cores(DType dtype, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim);

// Splits of each sequence's KV range for paged_decode_attention: enough blocks to fill the
// device (n_seqs * n_kv_heads * n_splits ~ 4 * sm_count) without splitting below ~64 keys, in
// [1, kMaxDecodeSplits]. A batch whose n_seqs * n_kv_heads blocks already cover the device
// (3/4 of sm_count on the tensor-core kernel, 3 x sm_count on the row kernel: tensor_core is
// decode_on_tensor_cores) splits at most once per 1024 keys (the merge costs more than the fill
// gains there). For a captured graph, pass the largest max_len the graph will replay with.
// VELA_DECODE_SPLIT_KEYS / VELA_DECODE_SPLIT_FILL / VELA_DECODE_SPLIT_FULL_KEYS /
// VELA_DECODE_SPLIT_COVER_ROWS (read once) replace the 64 keys, the 4 blocks per SM, the 1024 keys
// and the row kernel's 12 quarter-SMs, for A/B runs.
int decode_num_splits(int64_t n_seqs, int64_t n_kv_heads, int64_t max_len, int sm_count,
                      bool tensor_core);

// Workspace of paged_decode_attention, in f32 elements (the caller allocates it once for its
// largest batch and split count): o_part holds n_seqs * n_heads * n_splits * head_dim floats,
// lse_part n_seqs * n_heads * n_splits floats.
inline int64_t decode_o_part_numel(int64_t n_seqs, int64_t n_heads, int64_t head_dim,
                                   int n_splits) {
  return n_seqs * n_heads * n_splits * head_dim;
}
inline int64_t decode_lse_part_numel(int64_t n_seqs, int64_t n_heads, int n_splits) {
  return n_seqs * n_heads * n_splits;
}

// Attention of one query token per sequence (decode) over the paged cache, split-KV
// (flash-decoding): sequence s's keys 0..seq_lens[s]-1 are cut into n_splits chunks (sizes from
// the device-side seq_lens); each chunk's partial output and log-sum-exp go to the workspace, and
// a merge kernel combines the live chunks.
// With n_splits == 1 the workspace is not touched (it may be undefined). A sequence with
// seq_lens[s] == 0 (a padding row) gets a zero output.
//   q: [n_seqs, n_heads, head_dim] (token stride free)   out: [n_seqs, n_heads, head_dim]
//   k_cache, v_cache: [n_slots, n_kv_heads, head_dim]     req_to_token: [max_reqs, max_ctx] i32
//   req_pool_indices, seq_lens: [n_seqs] i32
//   o_part: f32, >= decode_o_part_numel(...) elements   lse_part: f32, >= decode_lse_part_numel
//   warm (optional, ops/l2_warm.h): memory the ops after this one read (a single-row decode
//     layer's next weights); the CUDA merge kernel pulls it into L2. Results do not depend on it.
void paged_decode_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const Tensor& req_to_token, const Tensor& req_pool_indices,
                            const Tensor& seq_lens, float scale, int n_splits, Tensor& o_part,
                            Tensor& lse_part, Tensor& out, const L2Warm& warm = L2Warm());

// Upper bound of plan_prefill_tiles's tile count for n_tokens query rows in n_seqs sequences
// (the default tile_q gives a bound for every tile size >= kPrefillTileQ).
inline int64_t prefill_max_tiles(int64_t n_tokens, int64_t n_seqs, int tile_q = kPrefillTileQ) {
  return n_tokens / tile_q + n_seqs;
}

// Host planner of paged_prefill_attention: cuts every sequence's query rows (from a host copy of
// qo_indptr, n_seqs + 1 entries) into tiles of tile_q rows and writes, per tile, its sequence index
// and first query row (relative to the sequence) into the caller's arrays (capacity entries
// each; prefill_max_tiles bounds the need). Within a sequence the later (costlier, causal) tiles
// come first. Sequences before `first_seq` get no tiles (a mixed step's decode rows, which run on
// the split-KV decode kernel). Returns the tile count; throws InvalidArgument on a bad qo_indptr
// or capacity.
int64_t plan_prefill_tiles(const int32_t* qo_indptr, int64_t n_seqs, int tile_q,
                           int32_t* tile_seq_idx, int32_t* tile_q_start, int64_t capacity,
                           int64_t first_seq = 0);

// Ragged causal prefill over the paged cache (any mix of prefill chunks and decode rows; same
// semantics as paged_attention), driven by a plan: tile t covers query rows
// [tile_q_start[t], tile_q_start[t] + tile_q) of sequence tile_seq_idx[t]. bf16/f16 run on
// tensor cores (mma.sync, fp32 accumulation, online softmax); f32 runs a CUDA-core kernel.
//   tile_seq_idx, tile_q_start: i32 with >= n_tiles entries, on q's device (the planner's output
//   copied there); other shapes as paged_attention.
//   tile_q: the tile size the plan was made with; on CUDA it must equal prefill_tile_q(q.dtype(),
//   head_dim, q.device()) (InvalidArgument otherwise), on the CPU any positive value.
void paged_prefill_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                             const Tensor& req_to_token, const Tensor& req_pool_indices,
                             const Tensor& seq_lens, const Tensor& qo_indptr,
                             const Tensor& tile_seq_idx, const Tensor& tile_q_start,
                             int64_t n_tiles, int tile_q, float scale, Tensor& out);

}  // namespace vela::ops
