// WorkerPool: one queue, threads added while none is idle and the cap allows.
#include "server/worker_pool.h"

namespace vela {

WorkerPool::WorkerPool(size_t max_threads, size_t max_pending)
    : max_threads_(max_threads), max_pending_(max_pending) {}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

bool WorkerPool::submit(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return false;
    // Running + queued tasks: at most one per thread (the cap) plus max_pending.
    if (n_running_ + jobs_.size() >= max_threads_ + max_pending_) return false;
    jobs_.push_back(std::move(fn));
    if (jobs_.size() > n_idle_ && threads_.size() < max_threads_)
      threads_.emplace_back([this] { work(); });
  }
  cv_.notify_one();
  return true;
}

size_t WorkerPool::n_threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_.size();
}

void WorkerPool::work() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    ++n_idle_;
    cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    --n_idle_;
    if (jobs_.empty()) return;  // stopping and drained
    std::function<void()> fn = std::move(jobs_.front());
    jobs_.pop_front();
    ++n_running_;
    lock.unlock();
    fn();
    fn = nullptr;  // release captures before sleeping again
    lock.lock();
    --n_running_;
  }
}

}  // namespace vela
