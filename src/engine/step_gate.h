// StepGate: the one lock between the scheduler loop and everyone else who needs the engine
// between two steps (weight updates, pause(), integrity checks).
//
// The loop holds the gate for exactly one step at a time. Without care, a loop that releases and
// re-takes a plain mutex at once starves other threads (measured: weight updates waited 20-160 ms,
// hundreds of steps). Here an outside caller first announces itself; the loop, before its next
// step, waits while anyone is announced, so an outside caller gets the gate at the next step
// boundary: it waits for at most the step in flight (two with overlapped steps: the loop keeps
// the gate until none is in flight, engine/scheduler.h). Outside callers among themselves take
// turns in mutex order. Hold is a movable RAII guard. Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>

namespace vela {

class StepGate {
 public:
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& o) noexcept : gate_(o.gate_), outside_(o.outside_) { o.gate_ = nullptr; }
    Hold& operator=(Hold&& o) noexcept;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold() { release(); }
    void release();
    bool held() const { return gate_ != nullptr; }

   private:
    friend class StepGate;
    Hold(StepGate* gate, bool outside) : gate_(gate), outside_(outside) {}
    StepGate* gate_ = nullptr;
    bool outside_ = false;
  };

  // The scheduler loop, before each step: waits until no outside caller is announced, then holds.
  Hold enter_step();
  // Anyone else: announces itself, waits for the step in flight (at most one; two with overlapped
  // steps), then holds; the
  // loop stays out until the Hold is released. `on_announced`, when given, runs right after the
  // announcement (before the wait): what it reads can change by the step in flight at most.
  Hold enter_outside(const std::function<void()>& on_announced = {});
  // Outside callers announced or holding now (a hint for the loop's idle wait).
  int n_outside() const { return n_outside_.load(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;     // the loop waits here for n_outside_ == 0
  std::atomic<int> n_outside_{0};  // announced or holding outside callers
};

}  // namespace vela
