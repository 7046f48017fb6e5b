// RequestHandle: the caller's side of one submitted request — a thread-safe queue of StreamEvents
// filled by the scheduler thread. next() blocks; cancel() asks the scheduler to stop the request
// (effective within one engine step). Dropping the handle does not cancel (the server cancels
// explicitly when its client disconnects).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

#include "engine/request.h"

namespace vela {

class RequestHandle {
 public:
  RequestHandle(uint64_t id, int32_t n_samples, int32_t prompt_tokens)
      : id_(id), n_open_(n_samples), result_{prompt_tokens, std::vector<Completion>(static_cast<size_t>(n_samples))} {}

  uint64_t id() const { return id_; }
  // Blocks for the next event; false once every sample has finished and all events were read.
  bool next(StreamEvent& ev);
  // Like next() but gives up after `timeout_ms` (returns false with timed_out = true).
  bool next_for(StreamEvent& ev, int64_t timeout_ms, bool& timed_out);
  // Blocks until every sample finished and returns the accumulated result (consumes events).
  RequestResult wait();
  void cancel() { cancel_requested_.store(true); }
  // `fn` runs after every pushed event (on the engine's thread, without the handle's lock held),
  // so an event-driven reader can be woken instead of blocking in next(). It must be cheap and
  // never block; an empty function removes it.
  void set_listener(std::function<void()> fn);
  bool cancel_requested() const { return cancel_requested_.load(); }

  // Scheduler side.
  void push(StreamEvent ev, const Completion* final_completion = nullptr);

 private:
  uint64_t id_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;
  int32_t n_open_;
  RequestResult result_;
  std::atomic<bool> cancel_requested_{false};
  std::function<void()> listener_;
};

using RequestHandlePtr = std::shared_ptr<RequestHandle>;

}  // namespace vela
