// EpochSampler: Philox-seeded Fisher-Yates permutations per epoch.
#include "train/data/sampler.h"

#include <numeric>

#include "core/error.h"
#include "core/rng.h"

namespace vela {

EpochSampler::EpochSampler(int64_t n_items, uint64_t seed, bool shuffle)
    : n_items_(n_items), seed_(seed), shuffle_(shuffle) {
  VELA_CHECK(n_items > 0, "a sampler needs at least one item, got ", n_items);
}

std::vector<int64_t> EpochSampler::permutation(int64_t n, uint64_t seed, uint64_t stream) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), int64_t{0});
  Rng rng(seed, stream);
  for (int64_t i = n - 1; i > 0; --i) {
    // Lemire's multiply-shift maps 32 random bits to [0, i] (bias < 2^-32 * n: immaterial).
    uint64_t bound = static_cast<uint64_t>(i) + 1;
    uint64_t j =
        bound <= 0xFFFFFFFFull ? (uint64_t{rng.next_u32()} * bound) >> 32 : rng.next_u64() % bound;
    std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(j)]);
  }
  return p;
}

const std::vector<int64_t>& EpochSampler::cached(int64_t epoch) const {
  if (cached_epoch_ != epoch) {
    cached_order_ = permutation(n_items_, seed_, static_cast<uint64_t>(epoch));
    cached_epoch_ = epoch;
  }
  return cached_order_;
}

int64_t EpochSampler::item(int64_t epoch, int64_t pos) const {
  VELA_CHECK(epoch >= 0 && pos >= 0 && pos < n_items_, "sampler position (epoch ", epoch, ", ", pos,
             ") out of range for ", n_items_, " items");
  if (!shuffle_) return pos;
  std::lock_guard<std::mutex> lock(mu_);
  return cached(epoch)[static_cast<size_t>(pos)];
}

std::vector<int64_t> EpochSampler::order(int64_t epoch) const {
  VELA_CHECK(epoch >= 0, "epoch must be >= 0, got ", epoch);
  if (!shuffle_) {
    std::vector<int64_t> p(static_cast<size_t>(n_items_));
    std::iota(p.begin(), p.end(), int64_t{0});
    return p;
  }
  std::lock_guard<std::mutex> lock(mu_);
  return cached(epoch);
}

}  // namespace vela
