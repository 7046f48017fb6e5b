// The CPU worker team behind core/parallel.h. A region is a set of tasks 0 .. n_tasks - 1 that the
// calling thread and up to width - 1 workers claim one at a time; the caller works too and returns
// as soon as every task is done. A worker that has not woken yet (its core busy with an HTTP
// thread or a co-located client) costs the region nothing: the caller runs the tasks it would
// have taken. OpenMP's join waits for every thread of the team instead, which on a 2-vCPU server
// made a decode step wait for a descheduled worker ~60 times (docs/serving.md).
//
// Workers spin for VELA_SPIN_US microseconds (default 100) after a region before they sleep on a
// futex, so the next region of a step finds them awake. One region runs at a time: a second
// thread asking while one runs (another engine, a tokenizer thread) runs its tasks itself, and
// so does a task that asks (no nested teams). An exception thrown by a task is rethrown in the
// caller once the region's other tasks are done.
#pragma once

#include <cstdint>

namespace vela {

class ThreadPool {
 public:
  using TaskFn = void (*)(void* ctx, int64_t task_idx);

  // The process's pool. Its size starts at OMP_NUM_THREADS or the CPUs this process may use.
  static ThreadPool& instance();

  int size() const;      // threads a region may use, the caller included
  void set_size(int n);  // n >= 1; workers are started on demand and never stopped

  // Runs fn(ctx, i) for every i in [0, n_tasks) on up to `width` threads, the caller one of
  // them; returns when all are done. Runs them all on the calling thread when width <= 1,
  // when called from inside a region, or while another thread's region runs.
  void run(int64_t n_tasks, int width, TaskFn fn, void* ctx);

  // True on a pool worker and on a caller inside run().
  static bool in_region();
  // 0 on a caller, 1 .. size() - 1 on the workers: an index for per-thread scratch.
  static int thread_index();

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

 private:
  ThreadPool();
  struct State;
  State* s_;  // never freed: workers may still be asleep in it when the process exits
};

}  // namespace vela
