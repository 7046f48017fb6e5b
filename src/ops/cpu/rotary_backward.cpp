// CPU rotary backward (f32): each head rotated by -theta (the transpose of the forward rotation,
// with the table's attention scaling applied once more), in place, parallel over tokens.
#include "core/parallel.h"
#include "ops/cpu/cpu_backward_ops.h"

namespace vela::ops::cpu {

void rotary_backward(Tensor& dx, const Tensor& positions, const Tensor& table) {
  const int64_t n_tokens = dx.size(0), n_heads = dx.size(1), head_dim = dx.size(2);
  const int64_t rotary_dim = table.size(1), half = rotary_dim / 2;
  const int64_t token_stride = dx.stride(0);
  float* px = dx.data<float>();
  const int32_t* pos = positions.data<int32_t>();
  const float* tab = table.data<float>();
  parallel_for(n_tokens, 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* cos = tab + static_cast<int64_t>(pos[t]) * rotary_dim;
      const float* sin = cos + half;
      for (int64_t h = 0; h < n_heads; ++h) {
        float* v = px + t * token_stride + h * head_dim;
        // forward: y1 = x1 c - x2 s, y2 = x2 c + x1 s  =>  dx1 = dy1 c + dy2 s, dx2 = dy2 c - dy1 s
        for (int64_t i = 0; i < half; ++i) {
          float d1 = v[i], d2 = v[half + i];
          v[i] = d1 * cos[i] + d2 * sin[i];
          v[half + i] = d2 * cos[i] - d1 * sin[i];
        }
      }
    }
  });
}

}  // namespace vela::ops::cpu
