// CPU rms_norm backward (f32). With r = 1/rms(x), x_hat = x * r:
//   dw += sum_rows(dout * x_hat)   (parallel over column blocks: deterministic, no atomics)
//   dx = r * (dout * w - x_hat * mean(dout * w * x_hat))   (parallel over rows)
#include <cmath>
#include <vector>

#include "core/parallel.h"
#include "ops/checks.h"
#include "ops/cpu/cpu_backward_ops.h"
#include "ops/cpu/vec.h"

namespace vela::ops::cpu {

void rms_norm_backward(const Tensor& x, const Tensor& w, float eps, const Tensor& dout, Tensor& dx,
                       Tensor& dw, bool accumulate_dx) {
  RowLayout rx = rows_of(x), rd = rows_of(dout), rdx = rows_of(dx);
  const int64_t n_rows = rx.n_rows, n = rx.n_cols;
  const float* px = x.data<float>();
  const float* pd = dout.data<float>();
  float* pdx = dx.data<float>();
  std::vector<float> wf(static_cast<size_t>(n));
  if (w.dtype() == DType::kF32) {
    std::copy_n(w.data<float>(), n, wf.data());
  } else {
    visit_float(w.dtype(), [&](auto tag) {
      using W = typename decltype(tag)::type;
      load_f32(static_cast<const W*>(w.data_ptr()), wf.data(), n);
    });
  }
  // Pass 1 (rows): 1 / rms of every row.
  std::vector<float> rstd(static_cast<size_t>(n_rows));
  parallel_for(
      n_rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const float* xr = px + r * rx.row_stride;
          double ss = 0.0;
          for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
          rstd[r] = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(n)) + eps);
        }
      });
  // Pass 2 (column blocks, deterministic): dw += sum_rows(dout * x_hat). Before pass 3, because
  // dx may alias dout.
  if (dw.defined()) {
    float* pdw = dw.data<float>();
    constexpr int64_t kBlock = 64;
    const int64_t n_blocks = (n + kBlock - 1) / kBlock;
    parallel_for(n_blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t c0 = b * kBlock, c1 = std::min(n, c0 + kBlock);
        double acc[kBlock] = {};
        for (int64_t r = 0; r < n_rows; ++r) {
          const float* xr = px + r * rx.row_stride;
          const float* dr = pd + r * rd.row_stride;
          const float inv = rstd[r];
          for (int64_t c = c0; c < c1; ++c) acc[c - c0] += static_cast<double>(dr[c]) * xr[c] * inv;
        }
        for (int64_t c = c0; c < c1; ++c) pdw[c] += static_cast<float>(acc[c - c0]);
      }
    });
  }
  // Pass 3 (rows): dx.
  parallel_for(n_rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   const float* xr = px + r * rx.row_stride;
                   const float* dr = pd + r * rd.row_stride;
                   float* dxr = pdx + r * rdx.row_stride;
                   const float inv = rstd[r];
                   double dot = 0.0;  // sum(dout * w * x_hat)
                   for (int64_t i = 0; i < n; ++i)
                     dot += static_cast<double>(dr[i]) * wf[i] * xr[i] * inv;
                   const float m = static_cast<float>(dot / static_cast<double>(n));
                   for (int64_t i = 0; i < n; ++i) {
                     float g = inv * (dr[i] * wf[i] - xr[i] * inv * m);
                     dxr[i] = accumulate_dx ? dxr[i] + g : g;
                   }
                 }
               });
}

}  // namespace vela::ops::cpu
