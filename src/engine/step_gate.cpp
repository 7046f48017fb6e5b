// StepGate: a mutex the loop re-takes only when no outside caller is waiting for it.
#include "engine/step_gate.h"

namespace vela {

StepGate::Hold& StepGate::Hold::operator=(Hold&& o) noexcept {
  if (this != &o) {
    release();
    gate_ = o.gate_;
    outside_ = o.outside_;
    o.gate_ = nullptr;
  }
  return *this;
}

void StepGate::Hold::release() {
  if (gate_ == nullptr) return;
  StepGate* g = gate_;
  gate_ = nullptr;
  if (outside_) {
    // Decrement while holding the mutex: the loop's predicate check cannot miss the wake-up.
    g->n_outside_.fetch_sub(1);
    g->cv_.notify_all();
  }
  g->mu_.unlock();
}

StepGate::Hold StepGate::enter_step() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return n_outside_.load() == 0; });
  lock.release();  // the Hold unlocks
  return Hold(this, false);
}

StepGate::Hold StepGate::enter_outside(const std::function<void()>& on_announced) {
  n_outside_.fetch_add(1);
  if (on_announced) on_announced();
  mu_.lock();
  return Hold(this, true);
}

}  // namespace vela
