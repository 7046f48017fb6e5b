// Sampler: turns one row of logits per sequence into the next token, on the logits' own device
// (CPU or CUDA), through the one sampling op (ops/sampling.h). Pipeline per row: raw logprobs
// (only when asked; kTempered ones after the bias) -> penalties -> logit bias -> temperature ->
// top-k -> top-p -> min-p -> inverse-CDF draw with one Philox uniform at (seed, stream, step), or
// argmax when greedy. A row's token depends only on its logits, params and (seed, stream, step),
// never on the other rows of the batch, nor on the device (up to exp rounding at CDF boundaries:
// see docs/engine.md). Token masks (structured output) are applied to the logits before this
// (constrain::BatchMasks); speculative verify rows are ordinary rows (engine/spec/rejection.h).
//
// A step is stage(rows) on the host (validates and packs every row's params, logit bias and
// penalty history into one staging buffer, pinned on CUDA, then ONE async upload), launch(logits)
// (one op on the current stream: no allocation, no host sync, graph-capturable once it has run
// once), and finish(out) (one async download of the ids, or ids + logprobs, and one stream sync).
// sample() chains the three. finish() is download() (enqueues the read-back, returns a ticket)
// then collect(ticket, out) (waits for it): between the two the engine launches its next step
// (engine/scheduler.h, overlapped steps). Two steps can be in flight: the host staging and
// read-back buffers are double, so stage() and download() of step N + 1 never wait for step N's
// forward. On CUDA the upload and the read-back run on two side streams (events order them after
// the launch that last read the params / wrote the ids, and a launch after both), so between two
// forwards on the engine's stream there is only the sampling kernel; VELA_SIDE_COPIES=0 keeps
// them on the current stream.
//
// Penalties (repetition over prompt + output, frequency / presence over output) come from:
//  - the rows' histories (the default, what the engine uses): stage() packs one (token, (output
//    count << 1) | in_prompt) entry per distinct token of SamplerRow::prompt / output, so a row
//    costs O(history) on the host and the op touches only those logits;
//  - or a token-count table counts [max_slots, vocab] i32 kept incrementally: reset_slot(slot,
//    prompt, output) at admission, then each row's slot passed to stage(); the op adds every token
//    it samples for a penalized row to its slot, so a decode step uploads nothing per token.
//    Slots of one step must be distinct. The table is allocated on the first reset_slot().
// Buffers are sized at construction from (vocab, max_rows); nothing is allocated per step (the
// entry buffer grows, once, if a step's bias + histories outgrow it; finish() grows `out` only the
// first time a caller passes a smaller vector). Not thread-safe (one Sampler per scheduler loop).
// Throws InvalidArgument on bad rows or shapes; a CUDA device in a CPU-only build is Unsupported.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "engine/sampling_params.h"

namespace vela::cuda {
class SideStream;
class StreamEvent;
}

namespace vela {

struct SamplerRow {
  const SamplingParams* params;
  const std::vector<int32_t>* prompt;  // for the repetition penalty (may be null: empty)
  const std::vector<int32_t>* output;  // generated so far (penalties; may be null: empty)
  uint64_t seed;        // the request's seed (the engine picks one when params->seed is empty)
  uint64_t step;        // index of the token being sampled: the Philox index
  uint64_t stream = 0;  // distinguishes the n parallel samples of one request: the Philox stream
  // Also report the row's sampling distribution (probabilities(), after masks, penalties, bias,
  // temperature, top-k, top-p and min-p): the target p of speculative verification.
  bool want_probs = false;
};

struct SampleResult {
  int32_t token = 0;
  // log_softmax of the model's RAW logits at `token` (params->logprobs_mode kRaw), or of the
  // processed logits / T (kTempered: after penalties and bias, before truncation); filled only
  // when params->logprobs (else 0).
  float logprob = 0.0f;
  // The params->top_logprobs best tokens of that row with their logprobs, descending (ties:
  // lower id). Cleared, not reallocated, when not requested.
  std::vector<std::pair<int32_t, float>> top_logprobs;
};

class Sampler {
 public:
  // max_slots: rows of the count table (0: max_rows). max_entries: logit-bias + penalty-history
  // entries of one step over all rows before the buffer grows (0: max(vocab, 1024 * max_rows)).
  Sampler(int64_t vocab_size, int32_t max_rows, Device device = Device::cpu(),
          int32_t max_slots = 0, int64_t max_entries = 0);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Sets the count-table row `slot` to the tokens of `prompt` (membership) and `output` (counts).
  // Enqueued on the current stream; throws InvalidArgument on a slot or token id out of range.
  void reset_slot(int32_t slot, const std::vector<int32_t>& prompt,
                  const std::vector<int32_t>& output = {});

  // Validates and uploads the rows of the next launch. `slots` (optional, one per row): the
  // count-table row of each row (-1: none); rows with penalties then must have one. Without
  // `slots`, penalized rows take their penalties from their prompt / output.
  void stage(const std::vector<SamplerRow>& rows, const std::vector<int32_t>* slots = nullptr);
  // logits: [n_rows, vocab] f32 on this sampler's device, unit column stride (rows may be
  // strided), n_rows == the staged row count; read only. Graph-capturable. chunk_max (optional):
  // ops::argmax_chunks of these logits (the LM head's, Executor::decode_chunk_max), so greedy
  // rows need no pass over the logits. next_ids (optional, i32 on this device, >= n_rows): each
  // row's token is also written there (the next decode step's input ids, in place).
  void launch(const Tensor& logits, const Tensor& chunk_max = Tensor(), Tensor* next_ids = nullptr);
  // Reads back the ids (+ logprobs for rows that asked) of the staged rows, once the launch (or
  // the replay of a graph that captured it) is enqueued; waits for the stream.
  void finish(std::vector<SampleResult>& out);
  // finish() in two halves. download(): enqueues the read-back of the staged rows (CUDA: async
  // into a pinned buffer; CPU: a copy, so the next launch cannot overwrite it) and returns its
  // ticket; at most two read-backs are outstanding. collect(): waits for that read-back and fills
  // `out` (one result per staged row).
  int download();
  void collect(int ticket, std::vector<SampleResult>& out);
  // Drops the outstanding read-backs (an engine step failed): waits for their copies, frees them.
  void abandon();
  // stage + launch + finish.
  void sample(const Tensor& logits, const std::vector<SamplerRow>& rows,
              std::vector<SampleResult>& out);

  // The last launch's ids on the device: [max_rows] i32 (a view; valid until the next launch), to
  // feed the next step's input ids without a host round trip.
  Tensor device_tokens() const;
  // [max_rows, vocab] f32 on the device: after a launch, row r holds the distribution row r was
  // drawn from when it asked (SamplerRow::want_probs: p_i = kept weight / kept mass, zero outside
  // the kept set; one-hot for greedy rows), else its processed logits (penalties and bias
  // applied) when it had penalties or bias; other rows are stale. Valid until the next launch.
  const Tensor& probabilities() const { return work_; }
  const Tensor& processed_logits() const { return work_; }
  // CPU sampler only: what sample() would draw each row from, as probabilities on the host:
  // probs[r * vocab + i] (rows with want_probs set, see probabilities()); with `processed`, also
  // each row's logits after penalties and bias (processed[r * vocab + i]). For speculative
  // decoding's rejection rule (engine/spec/draft_model.h). Reuses its scratch once warm.
  void distribution(const Tensor& logits, const std::vector<SamplerRow>& rows, float* probs,
                    float* processed = nullptr);
  // The count table [max_slots, vocab] i32 (empty until the first reset_slot(); for tests).
  const Tensor& counts() const { return counts_; }

  int64_t vocab_size() const { return vocab_size_; }
  int32_t max_rows() const { return max_rows_; }
  int32_t max_slots() const { return max_slots_; }
  Device device() const { return device_; }

 private:
  void upload(const Tensor& host, Tensor& dev, size_t bytes);  // async H2D (no-op on the CPU)
  void alloc_upload(int64_t max_entries);                      // (re)sizes the staging buffers
  void ensure_counts();                                        // allocates the count table
  // Appends row's distinct history tokens as (id, (count << 1) | in_prompt) at entries[at..);
  // returns the new end.
  int32_t pack_history(const SamplerRow& row, int32_t* entries, int32_t at);

  int64_t vocab_size_;
  int32_t max_rows_, max_slots_;
  int64_t max_entries_ = 0;
  Device device_;

  static constexpr int kBuffers = 2;  // host staging / read-back buffers: two steps in flight
  Tensor upload_dev_;   // [params bytes + 8 * max_entries] u8: params then entries, one upload
  Tensor params_dev_;   // [max_rows * sizeof(SampleRowParams)] u8 (view of upload_dev_)
  Tensor entries_dev_;  // [max_entries, 2] i32 (view of upload_dev_)
  Tensor counts_;       // [max_slots, vocab] i32 once used, [0, vocab] before
  Tensor work_;         // [max_rows, vocab] f32 penalized / biased rows
  Tensor out_dev_;      // [kSampleOutRows, max_rows] i32
  Tensor reset_dev_;    // [3 + 2 * vocab] i32: (slot, begin, end) then (id, value) pairs

  // Host mirrors (the device tensors themselves on the CPU; two pinned buffers on CUDA, stage()
  // alternates between them).
  std::array<Tensor, kBuffers> upload_host_;  // like upload_dev_
  int upload_at_ = 0;                         // the buffer the last stage() filled
  Tensor reset_host_;                         // like reset_dev_
  // CUDA: each staging buffer's last upload / the last reset_slot() upload has left its host
  // buffer (null on the CPU).
  std::array<std::unique_ptr<cuda::StreamEvent>, kBuffers> upload_done_;
  std::unique_ptr<cuda::StreamEvent> reset_done_;
  // CUDA side copies (null without): the params upload waits on up_ for `launched_` (the last
  // launch has read them), the read-back waits on down_ for it (the ids are written), and a launch
  // waits for its upload and for `read_back_` (the last read-back has left out_dev_).
  std::unique_ptr<cuda::SideStream> up_, down_;
  std::unique_ptr<cuda::StreamEvent> launched_;   // after each launch (a captured one: at download)
  std::unique_ptr<cuda::StreamEvent> read_back_;  // on down_, after each read-back
  std::unique_ptr<cuda::StreamEvent> staged_;     // on up_, after each params upload
  bool launch_marked_ = false;  // launched_ was recorded after the last launch (not captured)
  // One read-back: the out table's rows it needs, and what collect() needs about its rows.
  struct Readback {
    Tensor host;                               // like out_dev_ (pinned on CUDA)
    std::unique_ptr<cuda::StreamEvent> ready;  // CUDA: the download has landed
    int32_t n = -1;                            // rows; -1: free
    std::vector<int32_t> top_logprobs;         // [max_rows] -1: no logprobs, else how many top
  };
  std::array<Readback, kBuffers> readback_;
  int next_readback_ = 0;

  std::vector<int32_t> mark_;       // [vocab] history scratch, zero between calls
  std::vector<int32_t> touched_;    // [vocab] tokens marked
  std::vector<uint8_t> slot_used_;  // [max_slots] stage() duplicate check, zero between calls
  // What download() needs about the staged rows.
  int32_t n_staged_ = -1;  // rows staged and not yet downloaded; -1: none
  bool any_logprobs_ = false;
  std::vector<int32_t> row_top_logprobs_;  // [max_rows] -1: no logprobs, else how many top
  std::vector<SamplerRow> dist_rows_;       // distribution(): the rows with want_probs set
  std::vector<SampleResult> dist_out_;      // distribution(): the draws (discarded)
};

// Argmax of row[0..n) with ties to the lower index (NaN never wins; 0 when all are NaN).
int32_t argmax_lower_id(const float* row, int64_t n);

}  // namespace vela
