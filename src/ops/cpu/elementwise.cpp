// CPU add / mul / scale: fp32 math over contiguous tensors, parallel over blocks; 16-bit inputs are
// widened a block at a time into stack buffers. `b` may broadcast over rows (a 1-D bias).
#include <algorithm>

#include "core/parallel.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/vec.h"

namespace vela::ops::cpu {

namespace {

constexpr int64_t kBlock = 1024;  // elements per conversion block

// out[i] = f(a[i], b[i]) for i < n.
template <typename T, typename F>
void binary_span(const T* a, const T* b, T* out, int64_t n, F f) {
  if constexpr (std::is_same_v<T, float>) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
  } else {
    float fa[kBlock], fb[kBlock];
    for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
      int64_t len = std::min(kBlock, n - i0);
      load_f32(a + i0, fa, len);
      load_f32(b + i0, fb, len);
#pragma omp simd
      for (int64_t i = 0; i < len; ++i) fa[i] = f(fa[i], fb[i]);
      store_f32(fa, out + i0, len);
    }
  }
}

template <typename T, typename F>
void binary(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  const T* pa = static_cast<const T*>(a.data_ptr());
  const T* pb = static_cast<const T*>(b.data_ptr());
  T* po = static_cast<T*>(out.data_ptr());
  const int64_t n = a.numel();
  if (b.numel() == n) {
    parallel_for((n + kBlock - 1) / kBlock, 16, [&](int64_t b0, int64_t b1) {
      int64_t e0 = b0 * kBlock, e1 = std::min(n, b1 * kBlock);
      binary_span(pa + e0, pb + e0, po + e0, e1 - e0, f);
    });
    return;
  }
  const int64_t n_cols = b.numel(), n_rows = n_cols == 0 ? 0 : n / n_cols;
  parallel_for(n_rows, std::max<int64_t>(1, 16 * kBlock / std::max<int64_t>(n_cols, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r)
                   binary_span(pa + r * n_cols, pb, po + r * n_cols, n_cols, f);
               });
}

template <typename T>
void scale_typed(const Tensor& x, float s, Tensor& out) {
  const T* px = static_cast<const T*>(x.data_ptr());
  T* po = static_cast<T*>(out.data_ptr());
  const int64_t n = x.numel();
  parallel_for((n + kBlock - 1) / kBlock, 16, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      int64_t e0 = blk * kBlock, len = std::min(kBlock, n - e0);
      if constexpr (std::is_same_v<T, float>) {
#pragma omp simd
        for (int64_t i = 0; i < len; ++i) po[e0 + i] = s * px[e0 + i];
      } else {
        float buf[kBlock];
        load_f32(px + e0, buf, len);
#pragma omp simd
        for (int64_t i = 0; i < len; ++i) buf[i] *= s;
        store_f32(buf, po + e0, len);
      }
    }
  });
}

}  // namespace

void add(const Tensor& a, const Tensor& b, Tensor& out) {
  visit_float(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    binary<T>(a, b, out, [](float x, float y) { return x + y; });
  });
}

void mul(const Tensor& a, const Tensor& b, Tensor& out) {
  visit_float(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    binary<T>(a, b, out, [](float x, float y) { return x * y; });
  });
}

void scale(const Tensor& x, float s, Tensor& out) {
  visit_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    scale_typed<T>(x, s, out);
  });
}

}  // namespace vela::ops::cpu
