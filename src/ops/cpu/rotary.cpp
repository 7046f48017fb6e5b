// CPU rotary: NeoX rotate_half on the first rotary_dim features of each head, in place, parallel
// over tokens; 16-bit heads are widened into a small per-thread buffer, rotated, rounded back.
#include <algorithm>

#include "core/parallel.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/vec.h"

namespace vela::ops::cpu {

namespace {
// Heads per thread at least: a decode step's 16 tokens of a few heads take microseconds, less than
// waking a second thread (see swiglu.cpp's kSwigluGrain).
constexpr int64_t kRotGrain = 256;

// x1 = v[0, half), x2 = v[half, 2*half): v1 = x1*cos - x2*sin, v2 = x2*cos + x1*sin.
inline void rotate(float* v, const float* cos, const float* sin, int64_t half) {
#pragma omp simd
  for (int64_t i = 0; i < half; ++i) {
    float x1 = v[i], x2 = v[half + i];
    v[i] = x1 * cos[i] - x2 * sin[i];
    v[half + i] = x2 * cos[i] + x1 * sin[i];
  }
}

template <typename T>
void rotary_typed(Tensor& x, const Tensor& positions, const Tensor& table) {
  const int64_t n_tokens = x.size(0), n_heads = x.size(1), head_dim = x.size(2);
  const int64_t rotary_dim = table.size(1), half = rotary_dim / 2;
  const int64_t token_stride = x.stride(0);
  T* px = static_cast<T*>(x.data_ptr());
  const int32_t* pos = positions.data<int32_t>();
  const float* tab = table.data<float>();
  parallel_for(n_tokens, std::max<int64_t>(1, kRotGrain / std::max<int64_t>(n_heads, 1)),
               [&](int64_t t0, int64_t t1) {
                 float* buf = scratch(static_cast<size_t>(rotary_dim), 0);
                 for (int64_t t = t0; t < t1; ++t) {
                   const float* cos = tab + static_cast<int64_t>(pos[t]) * rotary_dim;
                   const float* sin = cos + half;
                   for (int64_t h = 0; h < n_heads; ++h) {
                     T* v = px + t * token_stride + h * head_dim;
                     if constexpr (std::is_same_v<T, float>) {
                       rotate(v, cos, sin, half);
                     } else {
                       load_f32(v, buf, rotary_dim);
                       rotate(buf, cos, sin, half);
                       store_f32(buf, v, rotary_dim);
                     }
                   }
                 }
               });
}

}  // namespace

void rotary(Tensor& x, const Tensor& positions, const Tensor& table) {
  visit_float(x.dtype(),
              [&](auto tag) { rotary_typed<typename decltype(tag)::type>(x, positions, table); });
}

}  // namespace vela::ops::cpu
