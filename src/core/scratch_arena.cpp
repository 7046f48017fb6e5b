// ScratchArena implementation and the thread's current-arena slot.
#include "core/scratch_arena.h"

#include "core/allocator.h"
#include "core/error.h"

namespace vela {

namespace {
thread_local ScratchArena* t_arena = nullptr;
}  // namespace

ScratchArena::ScratchArena(int64_t capacity_bytes, Device device)
    : device_(device), capacity_(capacity_bytes) {
  VELA_CHECK(capacity_bytes > 0, "ScratchArena: capacity must be positive, got ", capacity_bytes);
  storage_ = Storage::allocate(static_cast<size_t>(capacity_bytes), device);
}

Tensor ScratchArena::take(const Shape& shape, DType dtype) {
  VELA_ASSERT(storage_ != nullptr, "ScratchArena::take on an empty arena");
  const int64_t bytes = shape.numel() * static_cast<int64_t>(dtype_size(dtype));
  const int64_t begin = (used_ + kAlignment - 1) / kAlignment * kAlignment;
  if (begin + bytes > capacity_) {
    VELA_THROW(OutOfMemory, "scratch arena of ", capacity_, " bytes on ", device_.str(),
               " is exhausted: ", used_, " in use, ", bytes, " more requested for ",
               shape.str());
  }
  used_ = begin + bytes;
  if (used_ > high_water_) high_water_ = used_;
  return Tensor::alias(storage_, begin, shape, dtype);
}

void ScratchArena::release(int64_t mark) {
  VELA_ASSERT(mark >= 0 && mark <= used_, "ScratchArena::release(", mark, ") past used ", used_);
  used_ = mark;
}

ScratchScope::ScratchScope(ScratchArena* arena) : previous_(t_arena) { t_arena = arena; }
ScratchScope::~ScratchScope() { t_arena = previous_; }

ScratchMark::ScratchMark() : arena_(t_arena), mark_(t_arena ? t_arena->mark() : 0) {}
ScratchMark::~ScratchMark() {
  if (arena_ != nullptr) arena_->release(mark_);
}

ScratchArena* current_scratch_arena() { return t_arena; }

Tensor scratch_tensor(const Shape& shape, DType dtype, Device device) {
  if (t_arena != nullptr && t_arena->device() == device) return t_arena->take(shape, dtype);
  return Tensor::empty(shape, dtype, device);
}

}  // namespace vela
