// InferenceWorkspace: every per-step buffer of the inference engine, allocated once at engine start
// and sized by the batch limits; TaskCacheManager::bind and the scheduler update the contents in
// place and hand out `.slice(0, 0, n)` views, so addresses never change (CUDA graphs capture them).
// On the CPU the `host` mirrors are the device tensors themselves; on CUDA they are one pinned host
// buffer that upload() copies asynchronously, and wait_staging() must precede the next step's
// writes to it. A decode step on CUDA uses decode_meta(rows) instead: its metadata packed into
// 8 * rows + 2 ints (upload_decode), so it copies ~2 KB rather than the whole buffer. The copies
// run on a side stream that waits for the last forward to have read the metadata (mark_consumed)
// and that the engine's stream then waits for: their start latency overlaps the sampler's kernel
// instead of following it (VELA_SIDE_COPIES=0: on the current stream). Owned by the scheduler
// loop thread; not thread-safe.
#pragma once

#include <cstdint>
#include <memory>

#include "core/tensor.h"

namespace vela {

namespace cuda {
class SideStream;
class StreamEvent;
}

struct WorkspaceConfig {
  int32_t max_seqs = 0;             // sequences per step (batch rows)
  int32_t max_tokens_per_step = 0;  // packed tokens per step (prefill chunks + decodes)
  int64_t vocab_size = 0;
  Device device = Device::cpu();
  int64_t n_heads = 0, head_dim = 0;  // for the split-KV decode partials (0: none)
  // Logits rows of one step (speculative verification wants several per sequence); 0: max_seqs.
  int32_t max_logit_rows = 0;
};

class InferenceWorkspace {
 public:
  explicit InferenceWorkspace(const WorkspaceConfig& config);
  ~InferenceWorkspace();
  InferenceWorkspace(const InferenceWorkspace&) = delete;
  InferenceWorkspace& operator=(const InferenceWorkspace&) = delete;

  const WorkspaceConfig& config() const { return config_; }
  int32_t max_seqs() const { return config_.max_seqs; }
  int32_t max_tokens() const { return config_.max_tokens_per_step; }
  int32_t max_logit_rows() const {
    return config_.max_logit_rows > 0 ? config_.max_logit_rows : config_.max_seqs;
  }
  int64_t max_tiles() const { return tile_seq_idx.size(0); }
  Device device() const { return config_.device; }
  bool has_host_mirror() const { return !config_.device.is_cpu(); }

  Tensor input_ids;         // [max_tokens] i32
  Tensor positions;         // [max_tokens] i32
  Tensor out_cache_loc;     // [max_tokens] i32
  Tensor req_pool_indices;  // [max_seqs] i32
  Tensor seq_lens;          // [max_seqs] i32
  Tensor qo_indptr;         // [max_seqs + 1] i32
  Tensor kv_indptr;         // [max_seqs + 1] i32
  Tensor logits_indices;    // [max_logit_rows] i32
  Tensor logits;            // [max_logit_rows, vocab] f32: one row per sample (sampler scratch)
  Tensor tile_seq_idx;      // [max_tiles] i32: prefill Q-tile work list (ops::plan_prefill_tiles)
  Tensor tile_q_start;      // [max_tiles] i32
  Tensor o_part;            // [max_seqs * n_heads * kMaxDecodeSplits * head_dim] f32 decode partials
  Tensor lse_part;          // [max_seqs * n_heads * kMaxDecodeSplits] f32

  // Host staging for the int32 metadata (same tensors as above on the CPU).
  struct Host {
    Tensor input_ids;         // [max_tokens] i32
    Tensor positions;         // [max_tokens] i32
    Tensor out_cache_loc;     // [max_tokens] i32
    Tensor req_pool_indices;  // [max_seqs] i32
    Tensor seq_lens;          // [max_seqs] i32
    Tensor qo_indptr;         // [max_seqs + 1] i32
    Tensor kv_indptr;         // [max_seqs + 1] i32
    Tensor logits_indices;    // [max_logit_rows] i32
    Tensor tile_seq_idx;      // [max_tiles] i32
    Tensor tile_q_start;      // [max_tiles] i32
  } host;

  // Raw pointers to the host metadata, in Host's order, for the loops that fill a step.
  struct HostPointers {
    int32_t *input_ids, *positions, *out_cache_loc, *req_pool_indices, *seq_lens, *qo_indptr,
        *kv_indptr, *logits_indices;
  };
  HostPointers host_pointers() {
    return {host.input_ids.data<int32_t>(),  host.positions.data<int32_t>(),
            host.out_cache_loc.data<int32_t>(), host.req_pool_indices.data<int32_t>(),
            host.seq_lens.data<int32_t>(),   host.qo_indptr.data<int32_t>(),
            host.kv_indptr.data<int32_t>(),  host.logits_indices.data<int32_t>()};
  }

  // Copies the host metadata (input ids included) to the device in one asynchronous copy ordered
  // before the current stream's next work; a no-op on the CPU. n_tokens / n_seqs are checked
  // against the limits (entries past them are stale but unread).
  void upload(int32_t n_tokens, int32_t n_seqs);

  // A decode step's metadata (one token per row): on CUDA `rows` rows of each tensor packed
  // together, ending where input_ids begins (input_ids is the full tensor's head), so one copy
  // carries them; on the CPU the full tensors' heads. The addresses depend only on `rows` (a CUDA
  // graph of a bucket captures them).
  struct DecodeMeta {
    Tensor input_ids, positions, out_cache_loc, req_pool_indices, seq_lens, qo_indptr, kv_indptr,
        logits_indices;
  };
  DecodeMeta decode_meta(int32_t rows) const;
  // Packs the host metadata's first `rows` rows (as a decode step's bind and padding left them)
  // into decode_meta(rows) and uploads it in one copy, with the input ids or without (the device
  // holds them already: the sampler wrote them in place, or the caller copies them after this).
  // The CPU: nothing to do.
  void upload_decode(int32_t rows, bool with_ids);
  // After a forward is enqueued: the next upload may overwrite the metadata once the current
  // stream has passed this point.
  void mark_consumed();
  // After a launch that writes the input ids in place (Sampler::launch's next_ids): an upload
  // that carries ids waits for it too (the engine's steps read that launch's tokens on the host
  // first anyway; this keeps an error path or another caller from racing the kernel).
  void mark_ids_written();
  // Waits until the last upload has left the host buffer (usually long done: the step's sampling
  // read-back synchronized); call before writing the host metadata of a new step.
  void wait_staging() const;

 private:
  WorkspaceConfig config_;
  // Copies host_meta_[begin, end) (ints) to the device: on the side stream after `consumed_` (and
  // `ids_written_` when the range holds input ids), the current stream ordered after it; without
  // side copies on the current stream.
  void copy_up(int64_t begin, int64_t end);
  // The decode area's sections before the input ids, in order: positions, out_cache_loc,
  // req_pool_indices, seq_lens, qo_indptr, kv_indptr, logits_indices; each holds rows + extra.
  static constexpr int kDecodeSections = 7;
  static constexpr int kDecodeExtra[kDecodeSections] = {0, 0, 0, 0, 1, 1, 0};
  // Where decode_meta(rows)'s sections start (they end at decode_area_).
  int64_t decode_begin(int32_t rows) const;

  Tensor meta_;       // i32: [decode area | input_ids | the full tensors ...]; all are slices of it
  Tensor host_meta_;  // its host mirror (== meta_ on the CPU; pinned on CUDA)
  // Ints before input_ids: the decode sections at max_seqs rows on CUDA, 0 on the CPU.
  int64_t decode_area_ = 0;
  std::unique_ptr<cuda::StreamEvent> upload_done_;  // CUDA: recorded after each upload
  std::unique_ptr<cuda::SideStream> side_;          // CUDA side copies (null without)
  std::unique_ptr<cuda::StreamEvent> consumed_;     // the last forward has read the metadata
  std::unique_ptr<cuda::StreamEvent> ids_written_;  // the last in-place write of the input ids
};

}  // namespace vela
