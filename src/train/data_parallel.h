// DataParallel: the trainer's side of a data-parallel job (docs/distributed.md). One per rank,
// over the rank's ProcessGroup (dist/process_group.h) and the TrainableModel's parameters:
//   DDP     every rank holds the whole model and optimizer; after the step's LAST micro-batch the
//           gradients are summed over the ranks in buckets (dist/bucket_layout.h), each bucket
//           launched from the backward hook as soon as its parameters' gradients are final, so
//           the communication overlaps the rest of the backward; earlier micro-batches only
//           accumulate locally (no communication).
//   ZeRO-1  (zero = 1) the same buckets are reduce-scattered instead: rank r receives the summed
//           gradients of the parameters it owns, and the optimizer (AdamW or Muon, with their
//           fp32 masters and moments) is built over those parameters only, so its state is
//           sharded 1 / world_size; after the step the updated compute weights are all-gathered.
// The loss scale of every micro-batch uses the step's GLOBAL target count, so the summed gradient
// is that of the mean loss over the global batch. Clipping uses the global norm: each rank's
// squared norm over the parameters it owns, summed in rank order (the same number in DDP and
// ZeRO-1, so the two modes take bit-identical steps). Not thread-safe; the trainer thread drives
// it.
#pragma once

#include <memory>
#include <vector>

#include "dist/bucket_layout.h"
#include "dist/process_group.h"
#include "train/parameter.h"

namespace vela {

struct DataParallelConfig {
  int zero = 0;             // 0: DDP; 1: ZeRO-1 (optimizer state sharded)
  double bucket_mb = 25.0;  // gradient bucket size (MiB of f32)
};

class DataParallel {
 public:
  // `backward_order`: parameter indices in the order the backward finishes their gradients
  // (TrainableModel::backward_order()).
  DataParallel(std::shared_ptr<dist::ProcessGroup> pg, ParameterList& params,
               const DataParallelConfig& config, const std::vector<size_t>& backward_order);

  int rank() const { return pg_->rank(); }
  int world_size() const { return pg_->world_size(); }
  bool zero() const { return config_.zero > 0; }
  dist::ProcessGroup& group() { return *pg_; }
  const dist::BucketLayout& layout() const { return layout_; }
  // What the optimizer updates: every parameter (DDP) or the ones this rank owns (ZeRO-1; copies
  // of the Parameters, sharing their tensors).
  ParameterList& optimizer_params() { return zero() ? owned_ : params_; }

  // Rank 0's weights to every rank (start of training: all ranks begin from the same bits).
  void broadcast_parameters();
  // The next micro-batch is the step's last: its backward hook launches the buckets.
  void arm() { armed_ = true; }
  // The backward hook: these parameters' gradients are final for the running micro-batch.
  void grads_ready(const std::vector<size_t>& params);
  // After the last micro-batch: launches what is left, waits for every bucket and writes the
  // summed gradients back (DDP: all of them; ZeRO-1: the owned ones).
  void finish_gradients();
  // Global-norm clipping (max_norm <= 0: no scaling); returns the norm before clipping.
  double clip_grad_norm(double max_norm);
  // ZeRO-1: all-gathers the updated weights after the optimizer step (DDP: nothing to do).
  void after_optimizer_step();
  // Buckets launched so far (all steps): tests check that only the last micro-batch communicates.
  int64_t n_bucket_launches() const { return n_launches_; }

 private:
  void launch(size_t bucket);

  std::shared_ptr<dist::ProcessGroup> pg_;
  ParameterList& params_;
  DataParallelConfig config_;
  dist::BucketLayout layout_;
  ParameterList owned_;
  std::vector<Tensor> grad_buf_;    // per bucket [world * shard_numel] f32
  std::vector<Tensor> grad_shard_;  // per bucket [shard_numel] f32 (ZeRO-1)
  std::vector<Tensor> w_shard_;     // per bucket [shard_numel] compute dtype (ZeRO-1)
  std::vector<Tensor> w_full_;      // per bucket [world * shard_numel] compute dtype (ZeRO-1)
  std::vector<dist::WorkHandle> work_;
  std::vector<int> n_ready_;  // per bucket: parameters final in this micro-batch
  std::vector<char> ready_;   // per parameter
  size_t next_launch_ = 0;
  int64_t n_launches_ = 0;
  bool armed_ = false;
};

}  // namespace vela
