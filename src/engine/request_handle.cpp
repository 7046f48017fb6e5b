// RequestHandle implementation.
#include "engine/request_handle.h"

#include <chrono>

namespace vela {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
  }
  return "?";
}

void RequestHandle::push(StreamEvent ev, const Completion* final_completion) {
  std::function<void()> listener;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (final_completion != nullptr) {
      result_.completions[static_cast<size_t>(ev.index)] = *final_completion;
      --n_open_;
    }
    events_.push_back(std::move(ev));
    cv_.notify_all();
    listener = listener_;
  }
  if (listener) listener();
}

void RequestHandle::set_listener(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  listener_ = std::move(fn);
}

bool RequestHandle::next(StreamEvent& ev) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !events_.empty() || n_open_ == 0; });
  if (events_.empty()) return false;
  ev = std::move(events_.front());
  events_.pop_front();
  return true;
}

bool RequestHandle::next_for(StreamEvent& ev, int64_t timeout_ms, bool& timed_out) {
  std::unique_lock<std::mutex> lock(mu_);
  timed_out = !cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                            [&] { return !events_.empty() || n_open_ == 0; });
  if (timed_out || events_.empty()) return false;
  ev = std::move(events_.front());
  events_.pop_front();
  return true;
}

RequestResult RequestHandle::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return n_open_ == 0; });
  events_.clear();
  return result_;
}

}  // namespace vela
