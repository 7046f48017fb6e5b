// CPU cast between f32 / bf16 / f16 (round to nearest even, inf and NaN kept) and same-dtype
// copies of any dtype; contiguous tensors, parallel over blocks, conversions through f32.
#include <algorithm>
#include <cstring>

#include "core/parallel.h"
#include "ops/checks.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/vec.h"

namespace vela::ops::cpu {

namespace {

constexpr int64_t kBlock = 2048;

template <typename S, typename D>
void convert(const Tensor& x, Tensor& out) {
  const S* src = static_cast<const S*>(x.data_ptr());
  D* dst = static_cast<D*>(out.data_ptr());
  const int64_t n = x.numel();
  parallel_for((n + kBlock - 1) / kBlock, 8, [&](int64_t b0, int64_t b1) {
    float buf[kBlock];
    for (int64_t blk = b0; blk < b1; ++blk) {
      int64_t e0 = blk * kBlock, len = std::min(kBlock, n - e0);
      if constexpr (std::is_same_v<S, float>) {
        store_f32(src + e0, dst + e0, len);
      } else if constexpr (std::is_same_v<D, float>) {
        load_f32(src + e0, dst + e0, len);
      } else {
        load_f32(src + e0, buf, len);
        store_f32(buf, dst + e0, len);
      }
    }
  });
}

}  // namespace

void cast(const Tensor& x, Tensor& out) {
  if (x.numel() == 0) return;
  if (x.dtype() == out.dtype()) {
    if (x.data_ptr() == out.data_ptr()) return;
    if (x.is_contiguous() && out.is_contiguous()) {
      std::memcpy(out.data_ptr(), x.data_ptr(), x.nbytes());
      return;
    }
    const RowLayout rx = rows_of(x), ro = rows_of(out);  // row-strided (checked by ops::cast)
    const size_t es = x.element_size(), row_bytes = static_cast<size_t>(rx.n_cols) * es;
    const auto* src = static_cast<const char*>(x.data_ptr());
    auto* dst = static_cast<char*>(out.data_ptr());
    for (int64_t r = 0; r < rx.n_rows; ++r)
      std::memcpy(dst + static_cast<size_t>(r * ro.row_stride) * es,
                  src + static_cast<size_t>(r * rx.row_stride) * es, row_bytes);
    return;
  }
  visit_float(x.dtype(), [&](auto src_tag) {
    visit_float(out.dtype(), [&](auto dst_tag) {
      using S = typename decltype(src_tag)::type;
      using D = typename decltype(dst_tag)::type;
      if constexpr (!std::is_same_v<S, D>) convert<S, D>(x, out);
    });
  });
}

}  // namespace vela::ops::cpu
