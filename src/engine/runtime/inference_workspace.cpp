// InferenceWorkspace: one-time allocation of the per-step buffers and the host -> device upload.
#include "engine/runtime/inference_workspace.h"

#include "core/cuda/cuda_api.h"
#include "ops/attention.h"

namespace vela {

InferenceWorkspace::InferenceWorkspace(const WorkspaceConfig& c) : config_(c) {
  VELA_CHECK(c.max_seqs > 0 && c.max_tokens_per_step > 0 && c.vocab_size > 0,
             "InferenceWorkspace: max_seqs, max_tokens_per_step and vocab_size must be positive "
             "(got ",
             c.max_seqs, ", ", c.max_tokens_per_step, ", ", c.vocab_size, ")");
  VELA_CHECK(c.max_tokens_per_step >= c.max_seqs, "InferenceWorkspace: max_tokens_per_step (",
             c.max_tokens_per_step, ") must cover one token for each of max_seqs (", c.max_seqs,
             ")");
  const int64_t n_tok = c.max_tokens_per_step, n_seq = c.max_seqs;
  VELA_CHECK(c.max_logit_rows == 0 || c.max_logit_rows >= c.max_seqs,
             "InferenceWorkspace: max_logit_rows (", c.max_logit_rows, ") must be 0 or cover max_seqs (",
             c.max_seqs, ")");
  const int64_t n_logit = c.max_logit_rows > 0 ? c.max_logit_rows : n_seq;
  // All int32 metadata lives in one buffer (and one host mirror), so a step uploads it with a
  // single copy: [input_ids | positions | out_cache_loc | req_pool_indices | seq_lens | qo_indptr |
  // kv_indptr | logits_indices | tile_seq_idx | tile_q_start].
  const int64_t n_tiles = ops::prefill_max_tiles(n_tok, n_seq);
  const int64_t sizes[10] = {n_tok,     n_tok,     n_tok, n_seq,   n_seq,
                             n_seq + 1, n_seq + 1, n_logit, n_tiles, n_tiles};
  int64_t total = 0;
  for (int64_t n : sizes) total += n;
  auto carve = [&](const Tensor& buf, Tensor* out[10]) {
    int64_t off = 0;
    for (int i = 0; i < 10; ++i) {
      *out[i] = buf.slice(0, off, off + sizes[i]);
      off += sizes[i];
    }
  };
  meta_ = Tensor::zeros({total}, DType::kI32, c.device);
  Tensor* dev[10] = {&input_ids, &positions, &out_cache_loc,  &req_pool_indices, &seq_lens,
                     &qo_indptr, &kv_indptr, &logits_indices, &tile_seq_idx,     &tile_q_start};
  carve(meta_, dev);
  logits = Tensor::zeros({n_logit, c.vocab_size}, DType::kF32, c.device);
  if (c.n_heads > 0 && c.head_dim > 0) {
    o_part = Tensor::empty({ops::decode_o_part_numel(n_seq, c.n_heads, c.head_dim, ops::kMaxDecodeSplits)},
                           DType::kF32, c.device);
    lse_part = Tensor::empty({ops::decode_lse_part_numel(n_seq, c.n_heads, ops::kMaxDecodeSplits)},
                             DType::kF32, c.device);
    split_tickets =
        Tensor::zeros({ops::decode_split_tickets_numel(n_seq, c.n_heads)}, DType::kI32, c.device);
  }
  if (c.device.is_cpu()) {
    host_meta_ = meta_;
  } else {
    host_meta_ = Tensor::zeros_pinned({total}, DType::kI32);
    upload_done_ = std::make_unique<cuda::StreamEvent>(c.device.index);
  }
  Tensor* hst[10] = {&host.input_ids,      &host.positions,    &host.out_cache_loc,
                     &host.req_pool_indices, &host.seq_lens,     &host.qo_indptr,
                     &host.kv_indptr,        &host.logits_indices, &host.tile_seq_idx,
                     &host.tile_q_start};
  carve(host_meta_, hst);
}

void InferenceWorkspace::upload(int32_t n_tokens, int32_t n_seqs) {
  VELA_ASSERT(n_tokens >= 0 && n_tokens <= max_tokens() && n_seqs >= 0 && n_seqs <= max_seqs(),
              "InferenceWorkspace::upload: ", n_tokens, " tokens / ", n_seqs, " sequences exceed ",
              "the workspace");
  if (!has_host_mirror()) return;
  // One asynchronous copy of every entry (unused tails are harmless), ordered before the forward
  // on the same stream; wait_staging() keeps the next step's host writes behind it.
  cuda::copy_bytes_async(meta_.data_ptr(), meta_.device(), host_meta_.data_ptr(), Device::cpu(),
                         host_meta_.nbytes());
  upload_done_->record();
}

void InferenceWorkspace::wait_staging() const {
  if (upload_done_) upload_done_->synchronize();
}

InferenceWorkspace::~InferenceWorkspace() = default;

}  // namespace vela
