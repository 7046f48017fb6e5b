// The CPU worker team (thread_pool.h). A region is published as an epoch: the caller writes the
// job (its task count tagged with the epoch), then the claim word (epoch << 32 | next task) and
// the epoch itself; a worker claims tasks by compare-and-swap on the claim word, bounded by the
// count of the same epoch, so a worker that wakes after its region ended (the epoch in the claim
// word moved on) claims nothing, and the job's fields cannot change under a claimed task (the
// caller waits for every claimed task before it publishes the next region).
#include "core/thread_pool.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/env.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define VELA_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define VELA_CPU_RELAX() asm volatile("yield" ::: "memory")
#else
#define VELA_CPU_RELAX() ((void)0)
#endif

namespace vela {

namespace {
thread_local bool t_in_region = false;
thread_local int t_index = 0;
}  // namespace

struct ThreadPool::State {
  std::mutex region_mu;  // one region at a time (try_lock: a second caller runs its tasks itself)
  std::mutex start_mu;   // guards workers
  std::vector<std::thread> workers;
  std::atomic<int> n_workers{0};  // workers.size(), read without start_mu
  std::atomic<int> size{1};
  int64_t spin_ns = 100'000;

  // The region, written by its caller before the epoch is published.
  std::atomic<TaskFn> fn{nullptr};
  std::atomic<void*> ctx{nullptr};
  std::atomic<int> width{0};
  std::mutex error_mu;
  std::exception_ptr error;

  alignas(64) std::atomic<uint64_t> claim{0};  // epoch << 32 | next task to claim
  // epoch << 32 | the region's task count. Tagged with the epoch like the claim word: a worker
  // still holding the previous region's claim word must not read the next region's count (its
  // compare-and-swap on the old word succeeds until the caller publishes the new one, and it then
  // ran a task of the new region that the new claim word hands out again).
  std::atomic<uint64_t> limit{0};
  alignas(64) std::atomic<int64_t> done{0};    // tasks finished in this region
  alignas(64) std::atomic<uint32_t> epoch{0};  // futex word the idle workers sleep on
  std::atomic<int> sleepers{0};

  void run_task(int64_t i) {
    try {
      fn.load(std::memory_order_relaxed)(ctx.load(std::memory_order_relaxed), i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!error) error = std::current_exception();
    }
    done.fetch_add(1, std::memory_order_release);
  }

  // Claims and runs tasks of region `e` until none is left or the region is over.
  void participate(uint32_t e) {
    uint64_t c = claim.load(std::memory_order_acquire);
    // Region e's task count, published before its claim word (or a later region's: then leave).
    const uint64_t lim = limit.load(std::memory_order_acquire);
    if (static_cast<uint32_t>(lim >> 32) != e) return;
    const int64_t n = static_cast<int64_t>(lim & 0xffffffffu);
    for (;;) {
      if (static_cast<uint32_t>(c >> 32) != e) return;
      const int64_t i = static_cast<int64_t>(c & 0xffffffffu);
      if (i >= n) return;
      if (!claim.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel,
                                       std::memory_order_acquire))
        continue;
      run_task(i);
      c = claim.load(std::memory_order_acquire);
    }
  }

  // Returns the first epoch other than `seen`: spins for spin_ns, then sleeps on the futex.
  uint32_t wait_for_region(uint32_t seen) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(spin_ns);
    for (int k = 1;; ++k) {
      const uint32_t e = epoch.load(std::memory_order_acquire);
      if (e != seen) return e;
      VELA_CPU_RELAX();
      if (k % 64 == 0 && std::chrono::steady_clock::now() >= until) break;
    }
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    epoch.wait(seen, std::memory_order_seq_cst);
    sleepers.fetch_sub(1, std::memory_order_relaxed);
    return epoch.load(std::memory_order_acquire);
  }

  void worker_main(int idx, uint32_t seen) {
    t_in_region = true;
    t_index = idx;
    for (;;) {
      seen = wait_for_region(seen);
      if (seen != 0 && idx < width.load(std::memory_order_relaxed)) participate(seen);
    }
  }

  void ensure_workers(int n) {
    if (n_workers.load(std::memory_order_acquire) >= n) return;  // every region but the first
    std::lock_guard<std::mutex> lock(start_mu);
    while (static_cast<int>(workers.size()) < n) {
      const int idx = static_cast<int>(workers.size()) + 1;
      workers.emplace_back(
          [this, idx, seen = epoch.load(std::memory_order_acquire)] { worker_main(idx, seen); });
    }
    n_workers.store(static_cast<int>(workers.size()), std::memory_order_release);
  }
};

ThreadPool::ThreadPool() : s_(new State) {
  s_->size.store(std::max(1, omp_get_max_threads()), std::memory_order_relaxed);
  // VELA_SPIN_US: how long an idle worker polls for the next region before it sleeps.
  s_->spin_ns = env_int("VELA_SPIN_US", 100, 0, 1'000'000) * 1000;
}

ThreadPool& ThreadPool::instance() {
  static ThreadPool* pool = new ThreadPool;  // never destroyed: its workers may be asleep in it
  return *pool;
}

int ThreadPool::size() const { return s_->size.load(std::memory_order_relaxed); }

void ThreadPool::set_size(int n) { s_->size.store(std::max(1, n), std::memory_order_relaxed); }

bool ThreadPool::in_region() { return t_in_region; }

int ThreadPool::thread_index() { return t_index; }

void ThreadPool::run(int64_t n_tasks, int width, TaskFn fn, void* ctx) {
  if (n_tasks <= 0) return;
  auto serial = [&] {
    for (int64_t i = 0; i < n_tasks; ++i) fn(ctx, i);
  };
  width = static_cast<int>(std::min<int64_t>(std::min(width, size()), n_tasks));
  if (width <= 1 || t_in_region || n_tasks >= (int64_t{1} << 32)) return serial();
  State& s = *s_;
  std::unique_lock<std::mutex> region(s.region_mu, std::try_to_lock);
  if (!region.owns_lock()) return serial();
  s.ensure_workers(width - 1);

  uint32_t e = s.epoch.load(std::memory_order_relaxed) + 1;  // only a region's caller writes it
  if (e == 0) e = 1;                                         // 0: no region yet
  s.fn.store(fn, std::memory_order_relaxed);
  s.ctx.store(ctx, std::memory_order_relaxed);
  s.limit.store(static_cast<uint64_t>(e) << 32 | static_cast<uint64_t>(n_tasks),
                std::memory_order_relaxed);
  s.width.store(width, std::memory_order_relaxed);
  s.done.store(0, std::memory_order_relaxed);
  s.error = nullptr;
  // Task 0 is the caller's (the first share stays on one thread region after region).
  s.claim.store(static_cast<uint64_t>(e) << 32 | 1, std::memory_order_release);
  s.epoch.store(e, std::memory_order_seq_cst);
  if (s.sleepers.load(std::memory_order_seq_cst) > 0) s.epoch.notify_all();

  t_in_region = true;
  s.run_task(0);
  s.participate(e);
  // Every task is claimed; wait for those still running on workers.
  for (int k = 0; s.done.load(std::memory_order_acquire) < n_tasks; ++k) {
    if (k < 4096) {
      VELA_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }
  t_in_region = false;
  if (s.error) {
    std::exception_ptr err = std::exchange(s.error, nullptr);
    region.unlock();
    std::rethrow_exception(err);
  }
}

}  // namespace vela
