// EpochSampler: the order in which a dataset visits its items, epoch by epoch. Epoch e is a
// Fisher-Yates permutation of [0, n_items) drawn with Philox from (seed, stream = e) (core/rng.h),
// so any epoch's order is a pure function of (seed, e): nothing but {seed, epoch, cursor} is
// needed to resume exactly, and every rank of a data-parallel run computes the same order without
// talking. shuffle = false gives the identity order every epoch. The last permutation is cached;
// order() is thread-safe (the cache is guarded).
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

namespace vela {

class EpochSampler {
 public:
  EpochSampler(int64_t n_items, uint64_t seed, bool shuffle);

  int64_t n_items() const { return n_items_; }
  uint64_t seed() const { return seed_; }
  // The item at position `pos` of epoch `epoch`.
  int64_t item(int64_t epoch, int64_t pos) const;
  // The whole order of an epoch (a copy).
  std::vector<int64_t> order(int64_t epoch) const;

  // A deterministic permutation of [0, n) from (seed, stream): the building block (also used for
  // the validation split).
  static std::vector<int64_t> permutation(int64_t n, uint64_t seed, uint64_t stream);

 private:
  const std::vector<int64_t>& cached(int64_t epoch) const;  // caller holds mu_
  int64_t n_items_;
  uint64_t seed_;
  bool shuffle_;
  mutable std::mutex mu_;
  mutable int64_t cached_epoch_ = -1;
  mutable std::vector<int64_t> cached_order_;
};

}  // namespace vela
