// WorkerPool: the threads route handlers run on, off the HTTP I/O threads — parsing and
// tokenizing a request, rendering its chat template, submitting it. No worker waits for a
// generation (streamed or not, its events are pumped on the I/O threads), so a few serve
// thousands of requests. Threads start on demand up to `max_threads`; at most `max_pending` more
// tasks wait. submit() refuses past that (the server answers 503), so neither threads nor queued work
// grow without bound under a flood. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace vela {

class WorkerPool {
 public:
  WorkerPool(size_t max_threads, size_t max_pending);
  ~WorkerPool();  // finishes queued tasks, then joins
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `fn`; false when every thread is busy and `max_pending` tasks already wait.
  bool submit(std::function<void()> fn);
  size_t n_threads() const;

 private:
  size_t max_threads_, max_pending_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t n_idle_ = 0, n_running_ = 0;
  bool stop_ = false;
  void work();
};

}  // namespace vela
