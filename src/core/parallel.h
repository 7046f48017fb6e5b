// CPU parallelism: OpenMP under a small API so call sites read the same everywhere.
// parallel_for(n, grain, fn) calls fn(begin, end) over disjoint chunks of [0, n); runs inline when
// n is small or when already inside a parallel region. parallel_for_dynamic hands out chunks of
// `chunk` items from a shared counter instead, for items of uneven cost (causal attention blocks).
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
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

template <typename Fn>
void parallel_for_dynamic(int64_t n, int64_t chunk, Fn&& fn) {
  if (n <= 0) return;
  chunk = std::max<int64_t>(chunk, 1);
  const int64_t n_chunks = (n + chunk - 1) / chunk;
  const int nt =
      omp_in_parallel() ? 1 : static_cast<int>(std::min<int64_t>(num_threads(), n_chunks));
  if (nt <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  std::atomic<int64_t> next{0};
#pragma omp parallel num_threads(nt)
  {
    for (int64_t c = next.fetch_add(1, std::memory_order_relaxed); c < n_chunks;
         c = next.fetch_add(1, std::memory_order_relaxed))
      fn(c * chunk, std::min<int64_t>(n, (c + 1) * chunk));
  }
}

}  // namespace vela
