// DType: the element types vela stores, and the 16-bit float storage types bf16 / f16 with exact
// (round-to-nearest-even) conversions usable on host and device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/macros.h"

namespace vela {

enum class DType : uint8_t { kF32, kBF16, kF16, kI32, kI64, kU8 };

size_t dtype_size(DType dt);
const char* dtype_name(DType dt);  // "f32", "bf16", ...
// Parses vela names ("f32", "bf16", ...) and torch/safetensors names ("float32", "BF16", ...).
DType parse_dtype(const std::string& s);
inline bool is_floating(DType dt) { return dt == DType::kF32 || dt == DType::kBF16 || dt == DType::kF16; }

VELA_HOST_DEVICE VELA_INLINE uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
VELA_HOST_DEVICE VELA_INLINE float bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// bfloat16 storage: the top 16 bits of an IEEE f32. Conversion rounds to nearest even; NaN stays NaN.
struct bf16 {
  uint16_t bits;
  bf16() = default;
  VELA_HOST_DEVICE explicit bf16(float f) : bits(from_f32(f)) {}
  VELA_HOST_DEVICE operator float() const { return bits_f32(static_cast<uint32_t>(bits) << 16); }
  VELA_HOST_DEVICE static uint16_t from_f32(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
  VELA_HOST_DEVICE static bf16 from_bits(uint16_t b) { bf16 r; r.bits = b; return r; }
};

// IEEE binary16 storage. Conversion rounds to nearest even, handles subnormals, inf and NaN.
struct f16 {
  uint16_t bits;
  f16() = default;
  VELA_HOST_DEVICE explicit f16(float f) : bits(from_f32(f)) {}
  VELA_HOST_DEVICE operator float() const { return to_f32(bits); }
  VELA_HOST_DEVICE static f16 from_bits(uint16_t b) { f16 r; r.bits = b; return r; }
  VELA_HOST_DEVICE static uint16_t from_f32(float f) {
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
    if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
    if (ax < 0x38800000u) {                                               // subnormal or zero
      if (ax < 0x33000000u) return static_cast<uint16_t>(sign);         // rounds to zero
      uint32_t e = ax >> 23;                      // biased f32 exponent, 102..112
      uint32_t m = (ax & 0x7fffffu) | 0x800000u;  // 24-bit significand
      uint32_t drop = 126u - e;                   // value / 2^-24 = m >> drop
      uint32_t half = 1u << (drop - 1);
      uint32_t rem = m & ((1u << drop) - 1u);
      uint32_t r = m >> drop;
      if (rem > half || (rem == half && (r & 1u))) ++r;
      return static_cast<uint16_t>(sign | r);
    }
    uint32_t r = ((ax >> 13) - (112u << 10));  // rebias exponent 127 -> 15
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  VELA_HOST_DEVICE static float to_f32(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    if (e == 0x1f) return bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
      if (m == 0) return bits_f32(sign);
      float v = static_cast<float>(m) * 5.9604644775390625e-8f;  // m * 2^-24
      return sign ? -v : v;
    }
    return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
  }
};

// Maps a C++ element type to its DType.
template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kF32; };
template <> struct DTypeOf<bf16> { static constexpr DType value = DType::kBF16; };
template <> struct DTypeOf<f16> { static constexpr DType value = DType::kF16; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kI32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kI64; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::kU8; };

}  // namespace vela
