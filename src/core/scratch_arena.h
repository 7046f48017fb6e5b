// ScratchArena: a bump allocator over one buffer allocated once, for the temporaries of a forward
// pass (the inference engine's per-step activations). take() hands out aligned views, mark() /
// release() free everything taken since a mark (a decoder block frees its temporaries on exit),
// reset() frees all. Taking the same sequence of shapes yields the same addresses every time, which
// is what lets a captured CUDA graph be replayed.
//
// Layers ask for temporaries through scratch_tensor(): it takes from the arena installed on this
// thread by a ScratchScope, or falls back to Tensor::empty when none is (training, tests, tools).
#pragma once

#include <cstdint>
#include <memory>

#include "core/tensor.h"

namespace vela {

class ScratchArena {
 public:
  static constexpr int64_t kAlignment = 256;  // bytes: covers 16-byte vector loads and TMA

  ScratchArena() = default;
  ScratchArena(int64_t capacity_bytes, Device device);

  // A contiguous view of `shape`; throws OutOfMemory naming the sizes when the arena is full.
  Tensor take(const Shape& shape, DType dtype);
  int64_t mark() const { return used_; }
  void release(int64_t mark);
  void reset() { used_ = 0; }

  bool defined() const { return storage_ != nullptr; }
  Device device() const { return device_; }
  int64_t capacity() const { return capacity_; }
  int64_t used() const { return used_; }
  int64_t high_water() const { return high_water_; }

 private:
  std::shared_ptr<Storage> storage_;
  Device device_;
  int64_t capacity_ = 0;
  int64_t used_ = 0;
  int64_t high_water_ = 0;
};

// Installs `arena` as this thread's scratch source for the scope's lifetime (nestable).
class ScratchScope {
 public:
  explicit ScratchScope(ScratchArena* arena);
  ~ScratchScope();
  ScratchScope(const ScratchScope&) = delete;
  ScratchScope& operator=(const ScratchScope&) = delete;

 private:
  ScratchArena* previous_;
};

// Frees, on scope exit, what was taken from the current arena during the scope (no-op without one).
class ScratchMark {
 public:
  ScratchMark();
  ~ScratchMark();
  ScratchMark(const ScratchMark&) = delete;
  ScratchMark& operator=(const ScratchMark&) = delete;

 private:
  ScratchArena* arena_;
  int64_t mark_ = 0;
};

ScratchArena* current_scratch_arena();

// A temporary: from the current arena when one is installed for `device`, else Tensor::empty.
Tensor scratch_tensor(const Shape& shape, DType dtype, Device device);

}  // namespace vela
