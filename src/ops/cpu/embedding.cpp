// CPU embedding gather: out[i, :] = weight[ids[i], :], converting to f32 when out is f32; parallel
// over tokens. Ids were range-checked by the dispatcher.
#include <algorithm>
#include <cstring>

#include "core/parallel.h"
#include "ops/checks.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/vec.h"

namespace vela::ops::cpu {

namespace {

template <typename T, typename I>
void gather(const Tensor& weight, const Tensor& ids, Tensor& out) {
  RowLayout rw = rows_of(weight), ro = rows_of(out);
  const int64_t hidden = rw.n_cols;
  const T* pw = static_cast<const T*>(weight.data_ptr());
  const I* pid = ids.data<I>();
  const bool widen = out.dtype() != weight.dtype();  // only ever to f32
  parallel_for(ids.size(0), std::max<int64_t>(1, 32768 / std::max<int64_t>(hidden, 1)),
               [&](int64_t i0, int64_t i1) {
                 for (int64_t i = i0; i < i1; ++i) {
                   const T* src = pw + static_cast<int64_t>(pid[i]) * rw.row_stride;
                   if (widen) {
                     load_f32(src, static_cast<float*>(out.data_ptr()) + i * ro.row_stride, hidden);
                   } else {
                     std::memcpy(static_cast<T*>(out.data_ptr()) + i * ro.row_stride, src,
                                 static_cast<size_t>(hidden) * sizeof(T));
                   }
                 }
               });
}

}  // namespace

void embedding(const Tensor& weight, const Tensor& ids, Tensor& out) {
  visit_float(weight.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (ids.dtype() == DType::kI32) {
      gather<T, int32_t>(weight, ids, out);
    } else {
      gather<T, int64_t>(weight, ids, out);
    }
  });
}

}  // namespace vela::ops::cpu
