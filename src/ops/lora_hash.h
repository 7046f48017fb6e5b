// The counter-based hash behind LoRA dropout masks, shared by the CPU and CUDA twins so both draw
// the same mask: splitmix64 of (seed, stream, element index) -> a uniform in [0, 1) from 24 bits.
#pragma once

#include <cstdint>

#include "core/macros.h"

namespace vela::ops {

VELA_HOST_DEVICE inline uint64_t lora_mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

VELA_HOST_DEVICE inline float lora_uniform(uint64_t seed, uint64_t stream, uint64_t idx) {
  const uint64_t h = lora_mix64(lora_mix64(seed ^ lora_mix64(stream)) + idx);
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

}  // namespace vela::ops
