// CPU rms_norm / add_rms_norm / the norm pieces: one row per iteration, parallel over rows,
// statistics in fp32 (with per-lane partial sums), 16-bit rows widened into per-thread scratch.
#include <algorithm>
#include <cmath>

#include "core/parallel.h"
#include "ops/checks.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/vec.h"
#include "ops/rms_norm.h"

namespace vela::ops::cpu {

namespace {

// Scratch slots used per thread.
constexpr int kSlotX = 0, kSlotW = 1, kSlotOut = 2, kSlotRes = 3;

inline float inv_rms(const float* x, int64_t n, float eps) {
  float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  return 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
}

// out_row = x * inv * w, x and w already f32.
template <typename T>
inline void write_normed(const float* x, const float* w, float inv, int64_t n, T* out_row) {
  if constexpr (std::is_same_v<T, float>) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out_row[i] = x[i] * inv * w[i];
  } else {
    float* buf = scratch(static_cast<size_t>(n), kSlotOut);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) buf[i] = x[i] * inv * w[i];
    store_f32(buf, out_row, n);
  }
}

template <typename W>
const float* weight_f32(const Tensor& w) {
  return row_as_f32(static_cast<const W*>(w.data_ptr()), w.numel(), kSlotW);
}

template <typename T>
void rms_norm_typed(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  RowLayout rx = rows_of(x), ro = rows_of(out);
  const int64_t n = rx.n_cols;
  const T* px = static_cast<const T*>(x.data_ptr());
  T* po = static_cast<T*>(out.data_ptr());
  bool w_f32 = w.dtype() == DType::kF32;
  parallel_for(rx.n_rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(n, 1)),
               [&](int64_t r0, int64_t r1) {
                 const float* wf = w_f32 ? weight_f32<float>(w) : weight_f32<T>(w);
                 for (int64_t r = r0; r < r1; ++r) {
                   const float* xf = row_as_f32(px + r * rx.row_stride, n, kSlotX);
                   write_normed(xf, wf, inv_rms(xf, n, eps), n, po + r * ro.row_stride);
                 }
               });
}

template <typename T>
void add_rms_norm_typed(const Tensor& x, Tensor& residual, const Tensor& w, float eps,
                        Tensor& out) {
  RowLayout rx = rows_of(x), rr = rows_of(residual), ro = rows_of(out);
  const int64_t n = rx.n_cols;
  const T* px = static_cast<const T*>(x.data_ptr());
  T* pr = static_cast<T*>(residual.data_ptr());
  T* po = static_cast<T*>(out.data_ptr());
  bool w_f32 = w.dtype() == DType::kF32;
  parallel_for(rx.n_rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(n, 1)),
               [&](int64_t r0, int64_t r1) {
                 const float* wf = w_f32 ? weight_f32<float>(w) : weight_f32<T>(w);
                 float* sum = scratch(static_cast<size_t>(n), kSlotRes);
                 for (int64_t r = r0; r < r1; ++r) {
                   const float* xf = row_as_f32(px + r * rx.row_stride, n, kSlotX);
                   T* res_row = pr + r * rr.row_stride;
                   load_f32(res_row, sum, n);
#pragma omp simd
                   for (int64_t i = 0; i < n; ++i) sum[i] += xf[i];
                   store_f32(sum, res_row, n);
                   // Normalize the residual as stored (rounded to T), like a separate rms_norm.
                   if constexpr (!std::is_same_v<T, float>) load_f32(res_row, sum, n);
                   write_normed(sum, wf, inv_rms(sum, n, eps), n, po + r * ro.row_stride);
                 }
               });
}

template <typename T>
void norm_pieces_typed(const Tensor& x, const Tensor& w, Tensor& scaled, Tensor& row_sq) {
  RowLayout rx = rows_of(x), rs = rows_of(scaled);
  const int64_t n = rx.n_cols, groups = row_sq.size(1);
  const T* px = static_cast<const T*>(x.data_ptr());
  T* pscaled = static_cast<T*>(scaled.data_ptr());
  float* psq = static_cast<float*>(row_sq.data_ptr());
  parallel_for(
      rx.n_rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
        const float* wf = w.dtype() == DType::kF32 ? weight_f32<float>(w) : weight_f32<T>(w);
        for (int64_t r = r0; r < r1; ++r) {
          const float* xf = row_as_f32(px + r * rx.row_stride, n, kSlotX);
          for (int64_t g = 0; g < groups; ++g) {
            float ss = 0.0f;
            for (int64_t i = g * kRowSqGroup; i < std::min(n, (g + 1) * kRowSqGroup); ++i)
              ss += xf[i] * xf[i];
            psq[r * groups + g] = ss;
          }
          write_normed(xf, wf, 1.0f, n, pscaled + r * rs.row_stride);  // round(x * w)
        }
      });
}

template <typename T>
void rms_scale_rows_typed(const Tensor& scaled, const Tensor& row_sq, float eps, Tensor& out) {
  RowLayout rs = rows_of(scaled), ro = rows_of(out);
  const int64_t n = rs.n_cols, groups = row_sq.size(1);
  const T* px = static_cast<const T*>(scaled.data_ptr());
  const float* psq = static_cast<const float*>(row_sq.data_ptr());
  T* po = static_cast<T*>(out.data_ptr());
  parallel_for(rs.n_rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(n, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   float ss = 0.0f;
                   for (int64_t g = 0; g < groups; ++g) ss += psq[r * groups + g];
                   const float rstd = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
                   const float* xf = row_as_f32(px + r * rs.row_stride, n, kSlotX);
                   float* buf = scratch(static_cast<size_t>(n), kSlotOut);
#pragma omp simd
                   for (int64_t i = 0; i < n; ++i) buf[i] = xf[i] * rstd;
                   store_f32(buf, po + r * ro.row_stride, n);
                 }
               });
}

}  // namespace

void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  visit_float(x.dtype(),
              [&](auto tag) { rms_norm_typed<typename decltype(tag)::type>(x, w, eps, out); });
}

void add_rms_norm(const Tensor& x, Tensor& residual, const Tensor& w, float eps, Tensor& out) {
  visit_float(x.dtype(), [&](auto tag) {
    add_rms_norm_typed<typename decltype(tag)::type>(x, residual, w, eps, out);
  });
}

void norm_pieces(const Tensor& x, const Tensor& w, Tensor& scaled, Tensor& row_sq) {
  visit_float(x.dtype(), [&](auto tag) {
    norm_pieces_typed<typename decltype(tag)::type>(x, w, scaled, row_sq);
  });
}

void rms_scale_rows(const Tensor& scaled, const Tensor& row_sq, float eps, Tensor& out) {
  visit_float(scaled.dtype(), [&](auto tag) {
    rms_scale_rows_typed<typename decltype(tag)::type>(scaled, row_sq, eps, out);
  });
}

}  // namespace vela::ops::cpu
