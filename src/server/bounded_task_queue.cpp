// BoundedTaskQueue: workers drain jobs_; the overflow thread drains overflow_jobs_ with a
// thread-local flag set. shutdown() lets queued connections finish, then joins everything.
#include "server/bounded_task_queue.h"

namespace vela {

namespace {
thread_local bool tl_overflow = false;
}

bool BoundedTaskQueue::in_overflow_thread() { return tl_overflow; }

BoundedTaskQueue::BoundedTaskQueue(size_t n_threads, size_t max_pending)
    : max_pending_(max_pending) {
  for (size_t i = 0; i < n_threads; ++i) {
    workers_.emplace_back([this] {
      while (true) {
        std::function<void()> fn;
        {
          std::unique_lock<std::mutex> lock(mu_);
          cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
          if (jobs_.empty()) return;  // stop_ and nothing left
          fn = std::move(jobs_.front());
          jobs_.pop_front();
        }
        fn();
      }
    });
  }
  overflow_ = std::thread([this] {
    tl_overflow = true;
    while (true) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        overflow_cv_.wait(lock, [&] { return stop_ || !overflow_jobs_.empty(); });
        if (overflow_jobs_.empty()) return;
        fn = std::move(overflow_jobs_.front());
        overflow_jobs_.pop_front();
      }
      fn();
    }
  });
}

BoundedTaskQueue::~BoundedTaskQueue() { shutdown(); }

void BoundedTaskQueue::enqueue(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  // jobs_ only holds connections no worker has picked up yet.
  if (jobs_.size() >= max_pending_) {
    overflow_jobs_.push_back(std::move(fn));
    overflow_cv_.notify_one();
    return;
  }
  jobs_.push_back(std::move(fn));
  cv_.notify_one();
}

void BoundedTaskQueue::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ && workers_.empty()) return;
    stop_ = true;
  }
  cv_.notify_all();
  overflow_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  if (overflow_.joinable()) overflow_.join();
}

}  // namespace vela
