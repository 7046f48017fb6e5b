// BucketLayout: how a data-parallel job packs gradients into communication buckets, and (ZeRO-1)
// which rank owns which parameter. Built from the parameters' sizes in BACKWARD order (the order
// their gradients become final), identically on every rank:
//   - consecutive parameters fill a bucket until it holds >= bucket_bytes of f32 (a parameter is
//     never split; one larger than bucket_bytes gets a bucket of its own);
//   - inside a bucket each parameter gets an owner rank: the rank with the fewest elements of this
//     bucket so far (ties: the lowest rank), so every rank owns about 1 / world_size of every
//     bucket and of the whole model;
//   - the bucket's flat buffer is world_size shards of shard_numel elements each; shard r holds
//     the parameters rank r owns, in bucket order, zero padded to shard_numel.
// DDP all-reduces the whole buffer; ZeRO-1 reduce-scatters it (rank r receives the summed shard
// r: exactly the gradients of the parameters it updates) and all-gathers the updated weights
// through the same layout. Owning whole parameters keeps Muon's Newton-Schulz on one rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace vela::dist {

struct BucketEntry {
  size_t param = 0;    // index into the caller's parameter list
  int owner = 0;       // rank that updates it under ZeRO-1
  int64_t offset = 0;  // element offset inside its owner's shard
  int64_t numel = 0;
};

struct Bucket {
  std::vector<BucketEntry> entries;  // in backward order
  int64_t shard_numel = 0;           // elements per rank shard (max over ranks, >= 1)
};

class BucketLayout {
 public:
  // `numels[i]` = elements of parameter i; `backward_order` = parameter indices in the order their
  // gradients are finished (each exactly once).
  BucketLayout(const std::vector<int64_t>& numels, const std::vector<size_t>& backward_order,
               int world_size, int64_t bucket_bytes);

  const std::vector<Bucket>& buckets() const { return buckets_; }
  int world_size() const { return world_size_; }
  // bucket index and entry index of parameter i.
  std::pair<size_t, size_t> locate(size_t param) const { return where_[param]; }
  // Parameters owned by `rank`, ascending by index.
  std::vector<size_t> owned_by(int rank) const;
  // Total elements rank r owns, for balance reports.
  int64_t owned_numel(int rank) const;

 private:
  int world_size_;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<size_t, size_t>> where_;
};

}  // namespace vela::dist
