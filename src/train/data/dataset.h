// Datasets: dense [batch, seq_len] TrainBatches read from the token shards `vela preprocess`
// writes (train/data/shard_reader.h). Two kinds:
//   seq  next-token prediction over packed sequences: every real token is a target (the shard's
//        loss mask is ignored);
//   sft  masked loss: targets[b, t] = kIgnoreIndex unless token t + 1 lies in a trained section
//        (assistant turns in chat data).
//   pair preference data (`vela preprocess` format "preference"): each item is two sft-style rows,
//        prompt + chosen then prompt + rejected, so a batch of batch_size items has 2 * batch_size
//        rows [c0, r0, c1, r1, ...] (DPO);
//   prompt RL prompts (format "prompt"): the rendered prompt's tokens and no targets (GRPO
//        generates the responses); TrainBatch::rows names each row's sequence (for its answer).
// In both, a target never crosses a document boundary (the last token of a document predicts
// nothing), positions restart at 0 at each document start and doc_ids number the documents of a
// row 0, 1, ...; padding after a row's last sequence has id 0 (kPadTokenId), target kIgnoreIndex,
// doc_id -1 and position 0.
//
// Order: a row is one shard sequence. Each epoch visits the dataset's sequences in a permutation
// drawn from (seed, epoch) with Philox (train/data/sampler.h), so batch(epoch, idx) is a pure
// function and the whole position is {seed, epoch, cursor}: state() / restore() round-trip it as
// JSON and the batches after a restore are identical to an uninterrupted run. With world_size > 1
// each rank takes its own rows of every global batch (rank, rank + world, ...), so the ranks
// together see exactly what one process with batch_size * world_size would.
//
// The last batch of an epoch may have fewer real rows than batch_size; it is filled with fully
// padded rows (no targets) so shapes stay fixed, unless drop_last drops it.
//
// A Dataset is not thread-safe (next_batch advances the cursor); batch() is const and may run
// concurrently. Construction throws IoError / InvalidArgument (missing or malformed shards, bad
// config) with a message naming the file or key.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "train/train_batch.h"

namespace vela {

class ShardSet;
class EpochSampler;

inline constexpr int32_t kPadTokenId = 0;

struct DatasetConfig {
  std::string kind = "seq";  // "seq" | "sft" | "pair" | "prompt"
  std::string path;          // a directory written by `vela preprocess` (holds index.json)
  int64_t batch_size = 8;    // rows per batch on this rank
  int64_t seq_len = 0;       // row length; 0 = the shards' seq_len (must be >= it)
  uint64_t seed = 0;         // permutation seed (and the validation split's)
  bool shuffle = true;       // false: sequences in file order every epoch
  bool drop_last = false;    // drop an epoch's incomplete last batch instead of padding it
  int rank = 0, world_size = 1;
  // Validation: a fraction of the sequences held out (chosen by `seed`, disjoint from training),
  // or a separate preprocessed directory. At most one of the two.
  double validation_fraction = 0.0;
  std::string validation_path;

  // Strict parse: unknown keys and wrong types are InvalidArgument naming the key. Keys are the
  // member names above.
  static DatasetConfig from_json(const json& j);
  json to_json() const;
};

class Dataset {
 public:
  virtual ~Dataset();

  // The next batch of the current epoch; past the last batch it moves to the next epoch (new
  // permutation). The trainer reads epoch() / cursor() to know where it is.
  TrainBatch next_batch();
  // Batch `batch_idx` (0 <= batch_idx < batches_per_epoch()) of epoch `epoch`; no state change.
  TrainBatch batch(int64_t epoch, int64_t batch_idx) const;

  int64_t batches_per_epoch() const;
  int64_t n_sequences() const;  // sequences this dataset draws from (all ranks)
  int64_t batch_size() const { return config_.batch_size; }
  int64_t seq_len() const { return seq_len_; }
  int64_t epoch() const;   // epoch of the next batch next_batch() returns
  int64_t cursor() const;  // index of that batch within its epoch
  // {"kind", "seed", "epoch", "cursor", "n_sequences", "global_batch_size"}; restore() checks
  // that kind, seed, n_sequences and global batch size match (a different dataset or batching is
  // an InvalidArgument naming the field) and sets epoch / cursor.
  json state() const;
  void restore(const json& state);

  const DatasetConfig& config() const { return config_; }
  const ShardSet& shards() const { return *shards_; }

 protected:
  // `items`: the shard sequence indices this dataset draws from (a split of the shard set).
  Dataset(const DatasetConfig& config, std::shared_ptr<const ShardSet> shards,
          std::vector<int64_t> items);
  // Fills row `row` ([seq_len_] slices of the batch tensors) from shard sequence `seq_idx`,
  // returning the number of target tokens written. Rows start zeroed to padding.
  virtual int64_t fill_row(int64_t seq_idx, int32_t* ids, int32_t* targets, int32_t* doc_ids,
                           int32_t* positions) const = 0;
  virtual const char* kind() const = 0;
  // Batch rows per item (2 for preference pairs); item i fills rows i * n .. i * n + n - 1 from
  // sequences items_[i] * n + j.
  virtual int64_t rows_per_item() const { return 1; }

  DatasetConfig config_;
  std::shared_ptr<const ShardSet> shards_;
  std::vector<int64_t> items_;  // shard sequence index of each dataset item
  int64_t seq_len_ = 0;
  std::unique_ptr<EpochSampler> sampler_;
  int64_t epoch_ = 0, cursor_ = 0;  // position of the next batch
};

// A dataset and its validation counterpart (null when none is configured). The validation set
// uses the same kind and batch_size, shuffle = false, drop_last = false: iterate batch(0, i) for
// i < batches_per_epoch() to score it.
struct DatasetSplit {
  std::unique_ptr<Dataset> train;
  std::unique_ptr<Dataset> validation;
};

DatasetSplit make_datasets(const DatasetConfig& config);

}  // namespace vela
