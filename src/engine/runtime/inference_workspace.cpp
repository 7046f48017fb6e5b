// InferenceWorkspace: one-time allocation of the per-step buffers and the host -> device upload.
#include "engine/runtime/inference_workspace.h"

#include <cstring>

#include "core/cuda/cuda_api.h"
#include "core/env.h"
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
  // single copy: [decode area | input_ids | positions | out_cache_loc | req_pool_indices | seq_lens
  // | qo_indptr | kv_indptr | logits_indices | tile_seq_idx | tile_q_start]. The decode area (CUDA
  // only) holds a decode step's packed metadata (decode_meta), right before the input ids.
  const int64_t n_tiles = ops::prefill_max_tiles(n_tok, n_seq);
  const int64_t sizes[10] = {n_tok,     n_tok,     n_tok, n_seq,   n_seq,
                             n_seq + 1, n_seq + 1, n_logit, n_tiles, n_tiles};
  decode_area_ = 0;
  if (!c.device.is_cpu())
    for (int extra : kDecodeExtra) decode_area_ += n_seq + extra;
  int64_t total = decode_area_;
  for (int64_t n : sizes) total += n;
  auto carve = [&](const Tensor& buf, Tensor* out[10]) {
    int64_t off = decode_area_;
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
  }
  if (c.device.is_cpu()) {
    host_meta_ = meta_;
  } else {
    host_meta_ = Tensor::zeros_pinned({total}, DType::kI32);
    upload_done_ = std::make_unique<cuda::StreamEvent>(c.device.index);
    static const bool side = env_int("VELA_SIDE_COPIES", 1, 0, 1) != 0;
    if (side) {
      side_ = std::make_unique<cuda::SideStream>(c.device.index);
      consumed_ = std::make_unique<cuda::StreamEvent>(c.device.index);
      ids_written_ = std::make_unique<cuda::StreamEvent>(c.device.index);
      cuda::synchronize(c.device.index);  // the zero-fills (current stream) before any side copy
    }
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
  // One asynchronous copy of every entry but the decode area (unused tails are harmless);
  // wait_staging() keeps the next step's host writes behind it.
  copy_up(decode_area_, host_meta_.numel());
}

InferenceWorkspace::DecodeMeta InferenceWorkspace::decode_meta(int32_t rows) const {
  VELA_ASSERT(rows >= 0 && rows <= max_seqs(), "InferenceWorkspace::decode_meta: ", rows,
              " rows exceed the workspace");
  if (decode_area_ == 0)
    return {input_ids.slice(0, 0, rows),     positions.slice(0, 0, rows),
            out_cache_loc.slice(0, 0, rows), req_pool_indices.slice(0, 0, rows),
            seq_lens.slice(0, 0, rows),      qo_indptr.slice(0, 0, rows + 1),
            kv_indptr.slice(0, 0, rows + 1), logits_indices.slice(0, 0, rows)};
  DecodeMeta m;
  m.input_ids = input_ids.slice(0, 0, rows);
  Tensor* sections[kDecodeSections] = {&m.positions,     &m.out_cache_loc, &m.req_pool_indices,
                                       &m.seq_lens,      &m.qo_indptr,     &m.kv_indptr,
                                       &m.logits_indices};
  int64_t at = decode_begin(rows);
  for (int i = 0; i < kDecodeSections; ++i) {
    const int64_t n = rows + kDecodeExtra[i];
    *sections[i] = meta_.slice(0, at, at + n);
    at += n;
  }
  return m;
}

void InferenceWorkspace::upload_decode(int32_t rows, bool with_ids) {
  VELA_ASSERT(rows >= 0 && rows <= max_seqs(), "InferenceWorkspace::upload_decode: ", rows,
              " rows exceed the workspace");
  if (decode_area_ == 0) return;
  const Tensor* sections[kDecodeSections] = {
      &host.positions, &host.out_cache_loc, &host.req_pool_indices, &host.seq_lens,
      &host.qo_indptr, &host.kv_indptr,     &host.logits_indices};
  const int64_t begin = decode_begin(rows);
  int32_t* dst = host_meta_.data<int32_t>() + begin;
  for (int i = 0; i < kDecodeSections; ++i) {
    const int64_t n = rows + kDecodeExtra[i];
    std::memcpy(dst, sections[i]->data<int32_t>(), static_cast<size_t>(n) * sizeof(int32_t));
    dst += n;
  }
  copy_up(begin, decode_area_ + (with_ids ? rows : 0));
}

int64_t InferenceWorkspace::decode_begin(int32_t rows) const {
  int64_t n = 0;
  for (int extra : kDecodeExtra) n += rows + extra;
  return decode_area_ - n;
}

void InferenceWorkspace::copy_up(int64_t begin, int64_t end) {
  const auto offset = static_cast<size_t>(begin) * sizeof(int32_t);
  auto copy = [&] {
    cuda::copy_bytes_async(static_cast<char*>(meta_.data_ptr()) + offset, meta_.device(),
                           static_cast<const char*>(host_meta_.data_ptr()) + offset, Device::cpu(),
                           static_cast<size_t>(end - begin) * sizeof(int32_t));
    upload_done_->record();
  };
  if (!side_) return copy();
  {
    cuda::SideStream::Scope on_side(*side_);
    consumed_->make_current_stream_wait();  // the last forward has read the old metadata
    if (end > decode_area_) ids_written_->make_current_stream_wait();  // the range holds ids
    copy();
  }
  upload_done_->make_current_stream_wait();
}

void InferenceWorkspace::mark_consumed() {
  if (consumed_) consumed_->record();
}

void InferenceWorkspace::mark_ids_written() {
  if (ids_written_) ids_written_->record();
}

void InferenceWorkspace::wait_staging() const {
  if (upload_done_) upload_done_->synchronize();
}

InferenceWorkspace::~InferenceWorkspace() = default;

}  // namespace vela
