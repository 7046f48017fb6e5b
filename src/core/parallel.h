// CPU parallelism: OpenMP under a small API so call sites read the same everywhere.
// parallel_for(n, grain, fn) calls fn(begin, end) over disjoint chunks of [0, n); runs inline when
// n is small or when already inside a parallel region.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace vela {

inline int num_threads() { return omp_get_max_threads(); }
inline void set_num_threads(int n) { omp_set_num_threads(n); }

template <typename Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  int nt = omp_in_parallel() ? 1 : static_cast<int>(std::min<int64_t>(num_threads(), (n + grain - 1) / std::max<int64_t>(grain, 1)));
  if (nt <= 1) {
    fn(int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    int t = omp_get_thread_num();
    int64_t chunk = (n + nt - 1) / nt;
    int64_t b = std::min<int64_t>(n, t * chunk), e = std::min<int64_t>(n, b + chunk);
    if (b < e) fn(b, e);
  }
}

}  // namespace vela
