// CPU kernel helpers: span conversions between f32 and bf16/f16, a vectorized exp, the kernels'
// widening vector loads and horizontal sums, and per-thread scratch buffers. AVX-512 / AVX2 / F16C
// intrinsics when the build targets them, scalar loops otherwise; every path rounds to nearest even
// exactly like bf16::from_f32 / f16::from_f32.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

#if defined(__AVX512F__) || defined(__AVX2__) || defined(__F16C__)
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _mm*_undefined_* helpers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace vela::ops::cpu {

// ---- scalar conversions (tails and reference paths) ----
inline float to_f32(float v) { return v; }
inline float to_f32(bf16 v) { return static_cast<float>(v); }
inline float to_f32(f16 v) { return f16::to_f32(v.bits); }
template <typename T>
inline T from_f32(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return T(v);
  }
}

// ---- span conversions ----
inline void load_f32(const float* src, float* dst, int64_t n) {
  if (src != dst) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

inline void load_f32(const bf16* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    __m512i w = _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
    _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(w));
  }
#elif defined(__AVX2__)
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(w));
  }
#endif
  for (; i < n; ++i) dst[i] = bits_f32(static_cast<uint32_t>(src[i].bits) << 16);
}

inline void load_f32(const f16* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(h));
  }
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
#endif
  for (; i < n; ++i) dst[i] = f16::to_f32(src[i].bits);
}

inline void store_f32(const float* src, float* dst, int64_t n) {
  if (src != dst) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

inline void store_f32(const float* src, bf16* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
  const __m512i k7fff = _mm512_set1_epi32(0x7fff), k1 = _mm512_set1_epi32(1),
                k40 = _mm512_set1_epi32(0x40);
  for (; i + 16 <= n; i += 16) {
    __m512 x = _mm512_loadu_ps(src + i);
    __m512i u = _mm512_castps_si512(x);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), k1);
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, k7fff), lsb), 16);
    __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    r = _mm512_mask_blend_epi32(nan, r, _mm512_or_si512(_mm512_srli_epi32(u, 16), k40));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(r));
  }
#elif defined(__AVX2__)
  const __m256i k7fff = _mm256_set1_epi32(0x7fff), k1 = _mm256_set1_epi32(1),
                k40 = _mm256_set1_epi32(0x40);
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_loadu_ps(src + i);
    __m256i u = _mm256_castps_si256(x);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), k1);
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, k7fff), lsb), 16);
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(u, 16), k40), nan);
    // 8 x 32-bit -> 8 x 16-bit: the values fit in 16 bits, so the unsigned saturating pack is exact
    // (it packs within 128-bit lanes: the permute puts the two halves in order).
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_castsi256_si128(packed));
  }
#endif
  for (; i < n; ++i) dst[i].bits = bf16::from_f32(src[i]);
}

inline void store_f32(const float* src, f16* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), h);
  }
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
#endif
  for (; i < n; ++i) dst[i].bits = f16::from_f32(src[i]);
}

// ---- math ----
// The vector exps' constants (exp512 / exp256): the input clamp, log2(e), ln 2 split in two for
// the Cody-Waite reduction, and the Cephes degree-6 polynomial's coefficients, highest first.
namespace exp_poly {
constexpr float kMax = 89.0f, kMin = -104.0f, kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                         4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
}  // namespace exp_poly

#if defined(__AVX512F__)
// exp(x) for 16 lanes: Cody-Waite range reduction and the Cephes degree-6 polynomial (about 1 ulp),
// scalef for the 2^n step so overflow gives inf and underflow gives (sub)normals / 0. NaN stays
// NaN.
inline __m512 exp512(__m512 x) {
  using namespace exp_poly;
  const __m512 xc = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(kMax)), _mm512_set1_ps(kMin));
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(kLog2e)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kP[0]);
  for (int c = 1; c < 6; ++c) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP[c]));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  __m512 y = _mm512_scalef_ps(p, n);
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
}
#elif defined(__AVX2__) && defined(__FMA__)
// exp(x) for 8 lanes: exp512's reduction and polynomial. AVX2 has no scalef, so 2^n (n in
// [-150, 128] after the clamp) is two exact power-of-two factors 2^(n>>1) * 2^(n - (n>>1)), each a
// normal float: overflow still gives inf and underflow (sub)normals / 0, rounded once.
inline __m256 exp256(__m256 x) {
  using namespace exp_poly;
  const __m256 xc = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(kMax)), _mm256_set1_ps(kMin));
  __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(kLog2e)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kP[0]);
  for (int c = 1; c < 6; ++c) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP[c]));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  const __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
#endif

#if defined(__AVX512F__)
// Horizontal sum of 16 lanes in a fixed order (GCC 12's _mm512_reduce_add_ps trips
// -Wuninitialized in its own header once inlined into the kernels).
inline float hsum512(__m512 v) {
#if defined(__AVX512DQ__)
  const __m256 s8 = _mm256_add_ps(_mm512_extractf32x8_ps(v, 0), _mm512_extractf32x8_ps(v, 1));
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
  return _mm_cvtss_f32(s4);
#else
  return _mm512_reduce_add_ps(v);
#endif
}
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__)
// 16 consecutive values as f32 lanes (the AVX-512 kernels' loads of weights, keys and values);
// with a mask, the masked-off lanes read nothing and are zero.
inline __m512 widen16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 widen16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 widen16(const bf16* p) {
  __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline __m512 widen16(const f16* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 widen16(const bf16* p, __mmask16 m) {
  __m256i h = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline __m512 widen16(const f16* p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}
#endif

#if defined(__AVX2__) && defined(__FMA__)
// 8 consecutive values as f32 lanes (the AVX2 kernels' loads of weights, keys and values).
inline __m256 widen8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 widen8(const bf16* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline __m256 widen8(const f16* p) {
#if defined(__F16C__)
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#else
  alignas(32) float f[8];
  for (int e = 0; e < 8; ++e) f[e] = to_f32(p[e]);
  return _mm256_load_ps(f);
#endif
}
// The n < 8 values at p as f32 lanes, zero-padded.
template <typename T>
inline __m256 widen8_tail(const T* p, int64_t n) {
  alignas(32) float f[8] = {};
  for (int64_t e = 0; e < n; ++e) f[e] = to_f32(p[e]);
  return _mm256_load_ps(f);
}
// Horizontal sum of 8 lanes in a fixed order.
inline float hsum256(__m256 v) {
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
  return _mm_cvtss_f32(s4);
}
#endif

// dst[i] = exp(src[i] - shift); returns the sum of dst in double. dst may alias src.
inline double exp_shift_sum(const float* src, float* dst, int64_t n, float shift) {
  int64_t i = 0;
  double total = 0.0;
#if defined(__AVX512F__)
  __m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
  const __m512 s = _mm512_set1_ps(shift);
  for (; i + 16 <= n; i += 16) {
    __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(src + i), s));
    _mm512_storeu_ps(dst + i, e);
#if defined(__AVX512DQ__)  // GCC 12's castps512_ps256 / extractf64x4 trip -Wuninitialized inlined
    acc0 = _mm512_add_pd(acc0, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 0)));
    acc1 = _mm512_add_pd(acc1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
#else
    acc0 = _mm512_add_pd(acc0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    acc1 = _mm512_add_pd(
        acc1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
#endif
  }
  alignas(64) double lanes[8];
  _mm512_store_pd(lanes, _mm512_add_pd(acc0, acc1));
  total = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
#elif defined(__AVX2__) && defined(__FMA__)
  __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
  const __m256 s = _mm256_set1_ps(shift);
  for (; i + 8 <= n; i += 8) {
    __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(src + i), s));
    _mm256_storeu_ps(dst + i, e);
    acc0 = _mm256_add_pd(acc0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    acc1 = _mm256_add_pd(acc1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(acc0, acc1));
  total = (lanes[0] + lanes[2]) + (lanes[1] + lanes[3]);
#endif
  for (; i < n; ++i) {
    dst[i] = std::exp(src[i] - shift);
    total += dst[i];
  }
  return total;
}

// Largest value of src[0..n) (n >= 1); NaN when any element is NaN.
inline float max_of(const float* src, int64_t n) {
  float m = -INFINITY;
  bool any_nan = false;
#pragma omp simd reduction(max : m) reduction(| : any_nan)
  for (int64_t i = 0; i < n; ++i) {
    m = src[i] > m ? src[i] : m;
    any_nan |= src[i] != src[i];
  }
  return any_nan ? NAN : m;
}

// Sum of src[0..n) in double.
inline double sum_of(const float* src, int64_t n) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(src[i]);
  return s;
}

// ---- scratch ----
// A per-thread float buffer of at least n elements, one per `slot` (0..3). Reused across calls so
// kernels in decode loops do not allocate; valid until the same thread asks for the same slot
// again.
inline float* scratch(size_t n, int slot = 0) {
  thread_local std::vector<float> bufs[4];
  std::vector<float>& b = bufs[slot];
  if (b.size() < n) b.resize(n);
  return b.data();
}

// Row pointer helpers: a row of T as f32, converted into scratch when T is not float.
template <typename T>
inline const float* row_as_f32(const T* row, int64_t n, int slot) {
  if constexpr (std::is_same_v<T, float>) {
    return row;
  } else {
    float* buf = scratch(static_cast<size_t>(n), slot);
    load_f32(row, buf, n);
    return buf;
  }
}

// Calls f(Tag<T>{}) with T the C++ type of a floating dtype (f32, bf16, f16).
template <typename T>
struct Tag {
  using type = T;
};
template <typename F>
void visit_float(DType dt, F&& f) {
  switch (dt) {
    case DType::kF32:
      f(Tag<float>{});
      return;
    case DType::kBF16:
      f(Tag<bf16>{});
      return;
    case DType::kF16:
      f(Tag<f16>{});
      return;
    default:
      VELA_THROW(InternalError, "cpu op: unexpected dtype ", dtype_name(dt));
  }
}

}  // namespace vela::ops::cpu
