// CPU parallelism: the worker team of core/thread_pool.h under a small API so call sites read the
// same everywhere. parallel_for(n, grain, fn) calls fn(begin, end) over disjoint chunks of [0, n);
// runs inline when n is small or when already inside a parallel region. parallel_for_dynamic
// hands out chunks of `chunk` items one at a time instead, for items of uneven cost (causal
// attention blocks). parallel_for_balanced keeps parallel_for's contiguous shares but lets a thread
// that finished its own take chunks from the back of the others' (streaming kernels on cores that
// do not keep pace). In all three the caller works too and returns once every chunk is done,
// whether or not every worker woke up for the region.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>

#include "core/thread_pool.h"

namespace vela {

inline int num_threads() { return ThreadPool::instance().size(); }
inline void set_num_threads(int n) {
  ThreadPool::instance().set_size(n);
  omp_set_num_threads(n);  // the OpenMP loops left (data preprocessing)
}
// The calling thread's index in the region running it (0 outside one): per-thread scratch.
inline int thread_index() { return ThreadPool::thread_index(); }

namespace detail {
// Threads a region over n items with at least `grain` each may use (1: run inline).
inline int region_threads(int64_t n, int64_t grain) {
  if (ThreadPool::in_region()) return 1;
  return static_cast<int>(
      std::min<int64_t>(num_threads(), (n + grain - 1) / std::max<int64_t>(grain, 1)));
}
// Runs task(i) for i in [0, n_tasks) on up to `width` threads of the pool.
template <typename Task>
void run_tasks(int64_t n_tasks, int width, Task& task) {
  ThreadPool::instance().run(
      n_tasks, width, [](void* ctx, int64_t i) { (*static_cast<Task*>(ctx))(i); }, &task);
}
}  // namespace detail

template <typename Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  const int nt = detail::region_threads(n, grain);
  if (nt <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  // nt shares, as OpenMP's static schedule gave them (the same bits whoever runs a share).
  const int64_t chunk = (n + nt - 1) / nt;
  auto share = [&](int64_t t) {
    const int64_t b = std::min<int64_t>(n, t * chunk), e = std::min<int64_t>(n, b + chunk);
    if (b < e) fn(b, e);
  };
  detail::run_tasks(nt, nt, share);
}

// parallel_for's shares, each walked front to back in chunks of `chunk` items; a thread whose own
// share is done takes chunks from the back of the share with the most left. While the threads
// keep pace each streams its share in order, as parallel_for; when one falls behind (a busy core
// of a shared VM) or has not woken yet, the others finish its share instead of waiting for it.
// Allocates nothing; more than kMaxShares threads fall back to parallel_for.
template <typename Fn>
void parallel_for_balanced(int64_t n, int64_t grain, int64_t chunk, Fn&& fn) {
  constexpr int kMaxShares = 64;
  if (n <= 0) return;
  chunk = std::max<int64_t>(chunk, 1);
  const int64_t n_chunks = (n + chunk - 1) / chunk;
  const int nt = static_cast<int>(std::min<int64_t>(detail::region_threads(n, grain), n_chunks));
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
  // Task t: share t from the front, then the back of whichever share has the most left.
  auto participant = [&](int64_t t) {
    for (int64_t c = take(static_cast<int>(t), true); c >= 0; c = take(static_cast<int>(t), true))
      run(c);
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
  };
  detail::run_tasks(nt, nt, participant);
}

template <typename Fn>
void parallel_for_dynamic(int64_t n, int64_t chunk, Fn&& fn) {
  if (n <= 0) return;
  chunk = std::max<int64_t>({chunk, 1, (n >> 31) + 1});  // fewer than 2^31 chunks
  const int64_t n_chunks = (n + chunk - 1) / chunk;
  const int nt = static_cast<int>(std::min<int64_t>(detail::region_threads(n, 1), n_chunks));
  if (nt <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  auto piece = [&](int64_t c) { fn(c * chunk, std::min<int64_t>(n, (c + 1) * chunk)); };
  detail::run_tasks(n_chunks, nt, piece);
}

}  // namespace vela
