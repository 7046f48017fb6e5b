// CudaGraphRunner: captured CUDA graphs of the decode forward, one per (batch bucket, KV split
// count), replayed with the metadata the executor updates in place in the InferenceWorkspace.
// Everything a decode forward touches lives at fixed addresses (weights, KV storage, workspace,
// the executor's activation arena, which hands out the same addresses for the same batch shape),
// so a replay only needs the new metadata uploaded before it. The runner owns the engine's CUDA
// stream: every engine launch goes to it (capture needs a non-default stream). In a CPU-only build
// it exists but is never enabled.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <utility>

#include "core/tensor.h"

namespace vela {

class CudaGraphRunner {
 public:
  // Decode batch buckets up to max_seqs: 1, 2, 4, 8, then multiples of 8 (then 16 past 64).
  static std::vector<int32_t> buckets(int32_t max_seqs);

  explicit CudaGraphRunner(Device device);
  ~CudaGraphRunner();
  CudaGraphRunner(const CudaGraphRunner&) = delete;
  CudaGraphRunner& operator=(const CudaGraphRunner&) = delete;

  // Makes the engine stream current on the calling thread for good (the scheduler loop).
  void enter_thread() const;
  // Makes the engine stream current on this thread for a scope, then restores the previous one
  // (a caller's thread outlives the engine and must not keep its stream).
  class Scope {
   public:
    explicit Scope(const CudaGraphRunner& runner);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    void* previous_ = nullptr;
  };
  void* stream() const { return stream_; }  // cudaStream_t

  using Key = std::pair<int32_t, int32_t>;  // (batch bucket, n_splits)
  bool has(Key key) const { return graphs_.count(key) != 0; }
  // The captured graph of `key`'s bucket whose split count is nearest to key's (by ratio; a tie
  // goes to the larger count), if any. A decode graph is correct at any split count: every split
  // takes its share of each row's keys from the seq_lens read at replay.
  std::optional<Key> nearest(Key key) const;
  // Runs `forward` once under stream capture and keeps the graph; returns its output (the logits
  // tensor in the arena, valid after every replay of this key).
  Tensor capture(Key key, const std::function<Tensor()>& forward);
  // Launches the graph of `key` on the engine stream; returns its output.
  Tensor replay(Key key) const;
  size_t size() const { return graphs_.size(); }
  double capture_seconds() const { return capture_seconds_; }
  void clear();

 private:
  struct Graph {
    void* exec = nullptr;  // cudaGraphExec_t
    Tensor output;
  };
  Device device_;
  void* stream_ = nullptr;
  std::map<Key, Graph> graphs_;
  double capture_seconds_ = 0;
};

}  // namespace vela
