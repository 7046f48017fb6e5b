// Executor: runs the model on one bound batch. The scheduler stages token ids in the workspace's
// host mirror and calls forward(); the executor plans the step's attention (split-KV decode or a
// prefill Q-tile work list), pads a decode batch to its graph bucket (padding rows have seq_len 0
// and write their K/V into the storage's padding slot), uploads all metadata in one copy, and runs
// the forward eagerly or by replaying a captured CUDA graph. Every activation comes from one
// ScratchArena sized at construction, so a forward allocates nothing and a graph's addresses stay
// valid. On the CPU the attention is the generic op and nothing is padded. The model pointer is
// swapped by Engine::update_weights between steps (never during one).
#pragma once

#include <array>
#include <deque>
#include <memory>
#include <optional>

#include "core/scratch_arena.h"
#include "engine/cache/task_cache_manager.h"
#include "engine/runtime/cuda_graph_runner.h"
#include "engine/runtime/inference_workspace.h"
#include "model/transformer.h"

namespace vela {

namespace cuda {
class StreamEvent;
}

struct ExecutorOptions {
  bool cuda_graphs = true;   // replay captured decode graphs on CUDA
  int32_t padding_slot = -1; // KV slot padding rows write to (required on CUDA)
  bool time_device = false;  // CUDA: time every forward with stream events (device_time())
  bool exact_graph_splits = false;  // EngineConfig::exact_graph_splits
};

class Executor {
 public:
  Executor(const Transformer* model, InferenceWorkspace& ws, const ExecutorOptions& opts = {});
  ~Executor();
  // Logits [n_logits, vocab] f32 at each item's last BindItem::n_logits rows (one per item unless
  // speculating), on the model's device; valid until the next forward. `ids_on_device` (decode
  // batches only, i32 on the model's device, at least n_seqs long): the rows' input ids come from
  // it, copied on the stream after the metadata upload, instead of from the host staging (an
  // overlapped step feeds the tokens its predecessor sampled, which the host has not seen yet):
  // row i's id is ids_on_device[id_rows[i]] when `id_rows` is given (ascending: one copy per run
  // of consecutive rows), else ids_on_device[i]. ids_on_device may be next_decode_ids() itself,
  // which the sampler wrote in place (Sampler::launch's next_ids): then nothing is copied.
  Tensor forward(const BoundBatch& batch, const Tensor* ids_on_device = nullptr,
                 const int32_t* id_rows = nullptr);
  // Where a decode step's input ids live on the device ([max_seqs] i32, row i's id at i), for the
  // sampler to write the tokens of the rows it samples in place; undefined on the CPU (there the
  // host staging is the device buffer, and binding a step rewrites it).
  Tensor next_decode_ids() const;
  // Captures the decode graph of every batch bucket for sequences up to `max_len` long (engine
  // start; `cache` gives the KV storage and request table); returns the seconds it took. Other
  // split counts and buckets not captured yet: a step runs a stand-in (stand_in_graph) and queues
  // the exact graph for capture_queued_graph(); without a stand-in the step captures it (so does
  // every step with EngineConfig::exact_graph_splits). No-op without graphs.
  double capture_decode_graphs(const KVCacheView& cache, int32_t max_len);
  // The same graphs, captured later one at a time by capture_queued_graph() (the scheduler loop
  // calls it while idle). No-op without graphs.
  void queue_decode_graphs(const KVCacheView& cache, int32_t max_len);
  // Captures the next queued graph not captured yet (a step may have captured it); false when
  // none is left. Loop thread only, between steps.
  bool capture_queued_graph();
  // Makes the engine's CUDA stream current on the calling thread (the scheduler loop); no-op on CPU.
  void enter_thread() const;
  // The sampler's argmax pieces (ops::argmax_chunks) of the last forward's logits rows, written
  // by the LM head (ops::gemm_argmax_chunks) when that forward was a decode step on CUDA whose
  // row count the GEMM writes them for itself (ops::gemm_argmax_chunks_fused;
  // VELA_LM_HEAD_ARGMAX=0: never); undefined otherwise. Valid until the next forward.
  Tensor decode_chunk_max() const;
  // Tests: 1 / 0 makes executors built from now on ask for the pieces or not, -1 back to
  // VELA_LM_HEAD_ARGMAX (default on).
  static void set_lm_head_argmax(int on);

  void set_model(const Transformer* model);
  const Transformer& model() const { return *model_; }
  const ScratchArena& arena() const { return arena_; }
  bool graphs_enabled() const { return graphs_ != nullptr; }
  size_t n_graphs() const { return graphs_ ? graphs_->size() : 0; }
  double graph_capture_seconds() const { return graphs_ ? graphs_->capture_seconds() : 0.0; }
  // Stream time of the forwards timed so far (ExecutorOptions::time_device), decode steps and
  // the others apart. A forward is counted once the one after next starts (its end is then
  // reached even when the scheduler overlaps steps, without waiting on the stream);
  // *_launch_s is the host time spent enqueuing the same forwards. Stream time close to the
  // launch time means the host, not the GPU, set the pace.
  struct DeviceTime {
    int64_t decode_forwards = 0, other_forwards = 0;
    double decode_s = 0, other_s = 0;
    double decode_launch_s = 0, other_launch_s = 0;
  };
  const DeviceTime& device_time() const { return device_time_; }

  // Bytes of activations one forward of `n_tokens` tokens and `n_seqs` logits rows needs at most.
  static int64_t activation_bytes(const ModelConfig& config, DType dtype, int64_t n_tokens,
                                  int64_t n_seqs);

 private:
  Tensor run(const BoundBatch& b, Tensor* chunk_max = nullptr);
  Tensor forward_decode(const BoundBatch& batch);
  // Pads rows [n, bucket) and runs (or replays) the bucket's decode forward with `splits` KV
  // splits (0: graph_splits at the batch's max_len, or a captured neighbour: see above).
  Tensor decode_bucket(const BoundBatch& batch, int32_t n, int32_t bucket, int splits = 0);
  // The split count of a bucket's decode at max_len (a power of two with graphs).
  int graph_splits(int32_t bucket, int32_t max_len) const;
  // A captured graph that can run a decode of `bucket` rows at max_len, within 2x of the split
  // count wanted: of this bucket, or (when it has none yet) of the smallest larger one.
  std::optional<CudaGraphRunner::Key> stand_in_graph(int32_t bucket, int32_t max_len) const;
  // Queues the capture of `key` (the KV storage and request table from `cache`), first in line.
  void queue_capture(const KVCacheView& cache, CudaGraphRunner::Key key);
  Tensor forward_prefill(const BoundBatch& batch);
  int32_t bucket_for(int32_t n) const;
  // The batch's metadata views as a decode step of `rows` rows (InferenceWorkspace::decode_meta).
  BoundBatch decode_batch(const BoundBatch& batch, int32_t rows) const;

  const Transformer* model_;
  InferenceWorkspace& ws_;
  ExecutorOptions opts_;
  ScratchArena arena_;
  std::unique_ptr<CudaGraphRunner> graphs_;  // CUDA with graphs on
  std::unique_ptr<CudaGraphRunner> stream_;  // CUDA with graphs off: just the stream
  std::vector<int32_t> buckets_;
  std::deque<CudaGraphRunner::Key> queued_;  // graphs still to capture, in order
  KVCacheView queued_cache_;
  int32_t queued_len_ = 0;
  // Captures the graph of `bucket` for sequences up to max_len (an all-padding batch) with
  // `splits` KV splits (0: as a step at max_len would).
  void capture_bucket(const KVCacheView& cache, int32_t max_len, int32_t bucket, int splits = 0);
  int sm_count_ = 1;
  bool decode_tensor_cores_ = false;  // ops::decode_on_tensor_cores for the model's heads
  // time_device: events around the last two forwards (alternating), not yet counted in
  // device_time_.
  struct TimedForward {
    std::unique_ptr<cuda::StreamEvent> begin, end;
    bool pending = false, decode = false;
    double launch_s = 0;
  };
  std::array<TimedForward, 2> timed_;
  int timed_at_ = 0;
  DeviceTime device_time_;
  void count_time(TimedForward& f);
  Tensor chunk_max_;  // [>= the largest bucket, ceil(vocab / 128)] i64 (CUDA decode), or none
  std::vector<char> pieces_for_rows_;  // [bucket]: whether its LM head writes chunk_max_ itself
  int32_t chunk_max_rows_ = 0;  // rows of chunk_max_ the last forward wrote (0: none)
  const Tensor* ids_on_device_ = nullptr;  // forward()'s arguments, for decode_bucket
  const int32_t* id_rows_ = nullptr;
  void copy_device_ids(int32_t n);
};

}  // namespace vela
