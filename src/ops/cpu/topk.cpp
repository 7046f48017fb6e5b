// CPU argmax / topk over the last dim, parallel over rows. Order: larger value first, NaN above
// everything (like torch), ties to the lower index. topk keeps a k-entry heap per row.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "core/parallel.h"
#include "ops/checks.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/vec.h"

namespace vela::ops::cpu {

namespace {

using Entry = std::pair<float, int32_t>;  // (value, column)

// Strict weak order "a ranks before b".
inline bool ranks_before(const Entry& a, const Entry& b) {
  bool an = std::isnan(a.first), bn = std::isnan(b.first);
  if (an != bn) return an;
  if (!an && a.first != b.first) return a.first > b.first;
  return a.second < b.second;
}

inline int32_t argmax_row(const float* x, int64_t n) {
  float m = max_of(x, n);
  if (std::isnan(m)) {
    for (int64_t i = 0; i < n; ++i)
      if (std::isnan(x[i])) return static_cast<int32_t>(i);
  }
  for (int64_t i = 0; i < n; ++i)
    if (x[i] == m) return static_cast<int32_t>(i);
  return 0;
}

template <typename T>
void argmax_typed(const Tensor& x, Tensor& out) {
  RowLayout rx = rows_of(x);
  const T* px = static_cast<const T*>(x.data_ptr());
  int32_t* po = out.data<int32_t>();
  parallel_for(rx.n_rows, std::max<int64_t>(1, 16384 / rx.n_cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      po[r] = argmax_row(row_as_f32(px + r * rx.row_stride, rx.n_cols, 0), rx.n_cols);
  });
}

template <typename T>
void topk_typed(const Tensor& x, int64_t k, Tensor& values, Tensor& indices) {
  RowLayout rx = rows_of(x), rv = rows_of(values), ri = rows_of(indices);
  const int64_t n = rx.n_cols;
  const T* px = static_cast<const T*>(x.data_ptr());
  float* pv = values.data<float>();
  int32_t* pi = indices.data<int32_t>();
  parallel_for(rx.n_rows, std::max<int64_t>(1, 16384 / n), [&](int64_t r0, int64_t r1) {
    thread_local std::vector<Entry> heap;
    for (int64_t r = r0; r < r1; ++r) {
      const float* xf = row_as_f32(px + r * rx.row_stride, n, 0);
      // Max-heap under ranks_before: the front is the worst of the k kept so far.
      heap.clear();
      for (int64_t i = 0; i < k; ++i) heap.emplace_back(xf[i], static_cast<int32_t>(i));
      std::make_heap(heap.begin(), heap.end(), ranks_before);
      for (int64_t i = k; i < n; ++i) {
        Entry e{xf[i], static_cast<int32_t>(i)};
        if (ranks_before(e, heap.front())) {
          std::pop_heap(heap.begin(), heap.end(), ranks_before);
          heap.back() = e;
          std::push_heap(heap.begin(), heap.end(), ranks_before);
        }
      }
      std::sort_heap(heap.begin(), heap.end(), ranks_before);
      for (int64_t j = 0; j < k; ++j) {
        pv[r * rv.row_stride + j] = heap[j].first;
        pi[r * ri.row_stride + j] = heap[j].second;
      }
    }
  });
}

}  // namespace

void argmax(const Tensor& x, Tensor& out) {
  visit_float(x.dtype(), [&](auto tag) { argmax_typed<typename decltype(tag)::type>(x, out); });
}

void topk(const Tensor& x, int64_t k, Tensor& values, Tensor& indices) {
  visit_float(x.dtype(),
              [&](auto tag) { topk_typed<typename decltype(tag)::type>(x, k, values, indices); });
}

}  // namespace vela::ops::cpu
