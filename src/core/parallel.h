// CPU parallelism: OpenMP under a small API so call sites read the same everywhere.
// parallel_for(n, grain, fn) calls fn(begin, end) over disjoint chunks of [0, n); runs inline when
// n is small or when already inside a parallel region. parallel_for_dynamic hands out chunks of
// `chunk` items from a shared counter instead, for items of uneven cost (causal attention blocks).
// parallel_for_balanced keeps parallel_for's contiguous shares but lets a thread that finished its
// own take chunks from the back of the others' (streaming kernels on cores that do not keep pace).
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>

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

// parallel_for's shares, each walked front to back in chunks of `chunk` items; a thread whose own
// share is done takes chunks from the back of the share with the most left. While the threads
// keep pace each streams its share in order, as parallel_for; when one falls behind (a busy core
// of a shared VM), the others finish its tail instead of waiting at the join. Allocates nothing;
// more than kMaxShares threads fall back to parallel_for.
template <typename Fn>
void parallel_for_balanced(int64_t n, int64_t grain, int64_t chunk, Fn&& fn) {
  constexpr int kMaxShares = 64;
  if (n <= 0) return;
  chunk = std::max<int64_t>(chunk, 1);
  const int64_t n_chunks = (n + chunk - 1) / chunk;
  const int nt =
      omp_in_parallel()
          ? 1
          : static_cast<int>(std::min<int64_t>(
                {num_threads(), (n + grain - 1) / std::max<int64_t>(grain, 1), n_chunks}));
  if (nt <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  if (nt > kMaxShares || n_chunks >= (int64_t{1} << 31)) {
    parallel_for(n, grain, std::forward<Fn>(fn));
    return;
  }
  // Share t's chunks left to do: [front, back), packed as front << 32 | back.
  struct alignas(64) Share {
    std::atomic<uint64_t> range;
  };
  Share shares[kMaxShares];
  for (int t = 0; t < nt; ++t)
    shares[t].range.store(static_cast<uint64_t>(t * n_chunks / nt) << 32 |
                              static_cast<uint64_t>((t + 1) * n_chunks / nt),
                          std::memory_order_relaxed);
  // Takes one chunk of share s from the front (its owner) or the back; -1 when it is empty.
  auto take = [&](int s, bool front) -> int64_t {
    uint64_t r = shares[s].range.load(std::memory_order_relaxed);
    for (;;) {
      const uint64_t f = r >> 32, b = r & 0xffffffffu;
      if (f >= b) return -1;
      const uint64_t next = front ? (f + 1) << 32 | b : f << 32 | (b - 1);
      if (shares[s].range.compare_exchange_weak(r, next, std::memory_order_relaxed))
        return static_cast<int64_t>(front ? f : b - 1);
    }
  };
  auto run = [&](int64_t c) { fn(c * chunk, std::min(n, (c + 1) * chunk)); };
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num();
    for (int64_t c = take(t, true); c >= 0; c = take(t, true)) run(c);
    for (;;) {
      int victim = -1;
      uint64_t most = 0;
      for (int s = 0; s < nt; ++s) {
        const uint64_t r = shares[s].range.load(std::memory_order_relaxed);
        const uint64_t f = r >> 32, b = r & 0xffffffffu;
        if (b > f && b - f > most) {
          most = b - f;
          victim = s;
        }
      }
      if (victim < 0) break;
      const int64_t c = take(victim, false);
      if (c >= 0) run(c);
    }
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
