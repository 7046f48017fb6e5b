// CPU silu_and_mul backward (f32): with s = sigmoid(g),
//   d gate = dout * up * s * (1 + g * (1 - s)),   d up = dout * g * s.
#include <cmath>

#include "core/parallel.h"
#include "ops/checks.h"
#include "ops/cpu/cpu_backward_ops.h"

namespace vela::ops::cpu {

void silu_and_mul_backward(const Tensor& x, const Tensor& dout, Tensor& dx) {
  RowLayout rx = rows_of(x), rd = rows_of(dout), rdx = rows_of(dx);
  const int64_t inter = rd.n_cols;
  const float* px = x.data<float>();
  const float* pd = dout.data<float>();
  float* pdx = dx.data<float>();
  parallel_for(rx.n_rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(inter, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   const float* g = px + r * rx.row_stride;
                   const float* u = g + inter;
                   const float* d = pd + r * rd.row_stride;
                   float* dg = pdx + r * rdx.row_stride;
                   float* du = dg + inter;
                   for (int64_t i = 0; i < inter; ++i) {
                     const float s = 1.0f / (1.0f + std::exp(-g[i]));
                     const float gi = g[i], ui = u[i], di = d[i];
                     dg[i] = di * ui * s * (1.0f + gi * (1.0f - s));
                     du[i] = di * gi * s;
                   }
                 }
               });
}

}  // namespace vela::ops::cpu
