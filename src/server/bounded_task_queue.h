// BoundedTaskQueue: cpp-httplib's connection queue with a bound. A fixed set of worker threads
// serves connections; at most `max_pending` more wait. Past that, connections go to one overflow
// thread that answers every request on them at once with 503 + Retry-After (HttpServer checks
// in_overflow_thread()), so neither threads nor queued sockets grow without limit under a flood.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace vela {

class BoundedTaskQueue : public httplib::TaskQueue {
 public:
  BoundedTaskQueue(size_t n_threads, size_t max_pending);
  ~BoundedTaskQueue() override;
  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

  // True on the overflow thread (its connections are refused).
  static bool in_overflow_thread();

 private:
  size_t max_pending_;
  std::mutex mu_;
  std::condition_variable cv_, overflow_cv_;
  std::deque<std::function<void()>> jobs_, overflow_jobs_;
  std::vector<std::thread> workers_;
  std::thread overflow_;
  bool stop_ = false;
};

}  // namespace vela
