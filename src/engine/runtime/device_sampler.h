// DeviceSampler: the Sampler's pipeline (sampler.h) on the logits' own device, so a decode step
// reads back only the sampled ids (and logprobs when asked). Kernels: ops/sampling.h (CUDA in
// ops/cuda/sampling.cu, the CPU twin in ops/cpu/sampling.cpp; on Device::cpu() this class runs
// the twin, which is how its tests run without a GPU).
//
// A step is stage(rows) on the host (validates and packs every row's params and logit bias into
// one staging buffer, pinned on CUDA, then ONE async upload), launch(logits) (one kernel on the
// current stream: no allocation, no host sync, graph-capturable once it has run once), and
// finish(out) (one async download of the ids, or ids + logprobs, and one stream sync). sample()
// chains the three. Results match the CPU Sampler exactly for greedy rows and up to
// floating-point boundary cases for sampled rows (see docs/engine.md).
//
// Penalties read a device token-count table counts [max_slots, vocab] i32 holding
// (output count << 1) | in_prompt for each token of a request. Two ways to keep it:
//  - incremental (the engine): reset_slot(slot, prompt, output) at admission, then pass each
//    row's slot to stage(); the kernel adds every token it samples for a penalized row to its slot,
//    so a decode step uploads nothing per token. Slots of one step must be distinct.
//  - stateless (sample()/stage() without slots): each penalized row's table row (slot = row
//    index) is rebuilt from SamplerRow::prompt / output at stage() time: simple, costs an upload
//    per penalized row. Do not mix both modes on the same slots.
// All buffers are sized at construction from (max_rows, vocab, max_slots); nothing is allocated
// per step (finish() grows `out` only the first time a caller passes a smaller vector). Not
// thread-safe (one DeviceSampler per scheduler loop). Throws InvalidArgument on bad rows or
// shapes; a CUDA device in a CPU-only build is Unsupported.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "engine/runtime/sampler.h"

namespace vela::cuda {
class StreamEvent;
}

namespace vela {

class DeviceSampler {
 public:
  // max_slots: rows of the count table (0: max_rows). max_bias_entries: logit-bias pairs of one
  // step over all rows (0: max(vocab, 1024 * max_rows)).
  DeviceSampler(int64_t vocab_size, int32_t max_rows, Device device, int32_t max_slots = 0,
                int64_t max_bias_entries = 0);
  ~DeviceSampler();
  DeviceSampler(const DeviceSampler&) = delete;
  DeviceSampler& operator=(const DeviceSampler&) = delete;

  // Sets the count-table row `slot` to the tokens of `prompt` (membership) and `output` (counts).
  // Enqueued on the current stream (an async upload + one kernel); throws InvalidArgument on a slot
  // or token id out of range.
  void reset_slot(int32_t slot, const std::vector<int32_t>& prompt,
                  const std::vector<int32_t>& output = {});

  // Validates and uploads the rows of the next launch. `slots` (optional, one per row): the
  // count-table row of each row (-1: none); rows with penalties then must have one. Without
  // `slots`, penalized rows are rebuilt from their prompt/output (stateless mode).
  void stage(const std::vector<SamplerRow>& rows, const std::vector<int32_t>* slots = nullptr);
  // logits: [n_rows, vocab] f32 on this sampler's device, unit column stride, n_rows == the staged
  // row count; read only. Graph-capturable.
  void launch(const Tensor& logits);
  // Reads back the ids (+ logprobs for rows that asked) of the staged rows, once the launch (or
  // the replay of a graph that captured it) is enqueued; waits for the stream.
  void finish(std::vector<SampleResult>& out);
  // stage + launch + finish.
  void sample(const Tensor& logits, const std::vector<SamplerRow>& rows,
              std::vector<SampleResult>& out);

  // The last launch's ids on the device: [max_rows] i32 (a view; valid until the next launch), to
  // feed the next step's input ids without a host round trip.
  Tensor device_tokens() const;
  // The count table [max_slots, vocab] i32 (for tests and debugging).
  const Tensor& counts() const { return counts_; }

  int64_t vocab_size() const { return vocab_size_; }
  int32_t max_rows() const { return max_rows_; }
  int32_t max_slots() const { return max_slots_; }
  Device device() const { return device_; }

 private:
  void upload(const Tensor& host, Tensor& dev, size_t bytes);  // async H2D (no-op on the CPU)

  int64_t vocab_size_;
  int32_t max_rows_, max_slots_;
  int64_t max_bias_;
  Device device_;

  Tensor upload_dev_;  // [params_bytes + bias bytes] u8: params then bias, one upload
  Tensor params_dev_;  // [max_rows * sizeof(SampleRowParams)] u8 (view of upload_dev_)
  Tensor bias_dev_;    // [max_bias, 2] i32 (view of upload_dev_)
  Tensor counts_;      // [max_slots, vocab] i32
  Tensor work_;        // [max_rows, vocab] f32 penalized / biased rows
  Tensor out_dev_;     // [kSampleOutRows, max_rows] i32
  Tensor reset_dev_;   // [3 + 2 * vocab] i32: (slot, begin, end) then (id, value) pairs

  // Host mirrors (the device tensors themselves on the CPU).
  Tensor upload_host_;  // like upload_dev_
  Tensor out_host_;     // like out_dev_
  Tensor reset_host_;   // like reset_dev_
  // CUDA: the last stage() / reset_slot() upload has left its host buffer (null on the CPU).
  std::unique_ptr<cuda::StreamEvent> upload_done_, reset_done_;

  std::vector<int32_t> mark_;       // [vocab] reset_slot scratch, zero between calls
  std::vector<int32_t> touched_;    // [vocab] tokens marked
  std::vector<uint8_t> slot_used_;  // [max_slots] stage() duplicate check, zero between calls
  // What finish() needs about the staged rows.
  int32_t n_staged_ = -1;  // rows staged and not yet finished; -1: none
  bool any_logprobs_ = false;
  std::vector<int32_t> row_top_logprobs_;  // [max_rows] -1: no logprobs, else how many top
};

}  // namespace vela
