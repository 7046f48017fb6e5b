// Counter-based random numbers (Philox-4x32-10), identical on host and device: the value at
// (seed, stream, index) does not depend on who computes it or in which order, so a CUDA sampler
// and its CPU twin draw the same numbers, and a checkpoint restores a generator by two integers.
#pragma once

#include <cstdint>

#include "core/macros.h"

namespace vela {

struct PhiloxOut {
  uint32_t x[4];
};

// One Philox-4x32-10 block: key = seed, counter = (block, stream).
VELA_HOST_DEVICE VELA_INLINE PhiloxOut philox4x32(uint64_t seed, uint64_t block, uint64_t stream) {
  uint32_t c0 = static_cast<uint32_t>(block), c1 = static_cast<uint32_t>(block >> 32);
  uint32_t c2 = static_cast<uint32_t>(stream), c3 = static_cast<uint32_t>(stream >> 32);
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    uint32_t n1 = static_cast<uint32_t>(p1);
    uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    uint32_t n3 = static_cast<uint32_t>(p0);
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += kW0;
    k1 += kW1;
  }
  return {{c0, c1, c2, c3}};
}

// The index-th 32-bit word of stream `stream` under `seed`.
VELA_HOST_DEVICE VELA_INLINE uint32_t philox_u32(uint64_t seed, uint64_t stream, uint64_t index) {
  return philox4x32(seed, index >> 2, stream).x[index & 3];
}

// A 32-bit word as a uniform float in [0, 1) with 24 random bits.
VELA_HOST_DEVICE VELA_INLINE float word_to_uniform(uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}

// Uniform float in [0, 1) with 24 random bits.
VELA_HOST_DEVICE VELA_INLINE float philox_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  return word_to_uniform(philox_u32(seed, stream, index));
}

// A host-side generator: (seed, stream) fixed, `offset` advances. Its whole state is these three
// integers, which is what a checkpoint stores.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0, uint64_t stream = 0) : seed_(seed), stream_(stream) {}
  uint32_t next_u32() { return philox_u32(seed_, stream_, offset_++); }
  uint64_t next_u64() {
    uint64_t hi = next_u32();
    return (hi << 32) | next_u32();
  }
  float uniform() { return philox_uniform(seed_, stream_, offset_++); }
  // Standard normal by Box-Muller (two uniforms per call).
  float normal();
  uint64_t seed() const { return seed_; }
  uint64_t stream() const { return stream_; }
  uint64_t offset() const { return offset_; }
  void set_offset(uint64_t offset) { offset_ = offset; }
  // Reserves `n` values for a device kernel and returns the first index (kernels then compute
  // philox_*(seed, stream, first + i) themselves).
  uint64_t reserve(uint64_t n) {
    uint64_t first = offset_;
    offset_ += n;
    return first;
  }

 private:
  uint64_t seed_;
  uint64_t stream_;
  uint64_t offset_ = 0;
};

}  // namespace vela
