// BucketLayout; see bucket_layout.h.
#include "dist/bucket_layout.h"

#include <algorithm>

#include "core/error.h"

namespace vela::dist {

BucketLayout::BucketLayout(const std::vector<int64_t>& numels,
                           const std::vector<size_t>& backward_order, int world_size,
                           int64_t bucket_bytes)
    : world_size_(world_size), where_(numels.size(), {SIZE_MAX, SIZE_MAX}) {
  VELA_CHECK(world_size >= 1, "BucketLayout: world_size must be >= 1, got ", world_size);
  VELA_CHECK(bucket_bytes > 0, "BucketLayout: bucket size must be positive, got ", bucket_bytes);
  VELA_CHECK(backward_order.size() == numels.size(), "BucketLayout: the backward order names ",
             backward_order.size(), " parameters, there are ", numels.size());
  const int64_t cap = std::max<int64_t>(1, bucket_bytes / 4);
  std::vector<size_t> cur;
  int64_t cur_numel = 0;
  auto close = [&] {
    if (cur.empty()) return;
    Bucket b;
    std::vector<int64_t> load(static_cast<size_t>(world_size), 0);
    for (size_t p : cur) {
      const int owner = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
      b.entries.push_back({p, owner, load[static_cast<size_t>(owner)], numels[p]});
      load[static_cast<size_t>(owner)] += numels[p];
    }
    b.shard_numel = std::max<int64_t>(1, *std::max_element(load.begin(), load.end()));
    for (size_t e = 0; e < b.entries.size(); ++e) where_[b.entries[e].param] = {buckets_.size(), e};
    buckets_.push_back(std::move(b));
    cur.clear();
    cur_numel = 0;
  };
  for (size_t p : backward_order) {
    VELA_CHECK(p < numels.size() && where_[p].first == SIZE_MAX && numels[p] > 0,
               "BucketLayout: parameter ", p, " is out of range, repeated or empty");
    where_[p] = {0, 0};  // seen (set for real when its bucket closes)
    cur.push_back(p);
    cur_numel += numels[p];
    if (cur_numel >= cap) close();
  }
  close();
}

std::vector<size_t> BucketLayout::owned_by(int rank) const {
  std::vector<size_t> out;
  for (const Bucket& b : buckets_)
    for (const BucketEntry& e : b.entries)
      if (e.owner == rank) out.push_back(e.param);
  std::sort(out.begin(), out.end());
  return out;
}

int64_t BucketLayout::owned_numel(int rank) const {
  int64_t n = 0;
  for (const Bucket& b : buckets_)
    for (const BucketEntry& e : b.entries)
      if (e.owner == rank) n += e.numel;
  return n;
}

}  // namespace vela::dist
