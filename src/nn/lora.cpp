// LoraLinear forward (both paths), the dropout scope and the serving row slots; the backward is in
// lora_backward.cpp.
#include "nn/lora.h"

#include "core/scratch_arena.h"
#include "ops/gemm.h"
#include "ops/lora.h"

namespace vela {

namespace {

thread_local bool t_dropout_active = false;
thread_local uint64_t t_dropout_seed = 0;

}  // namespace

LoraDropoutScope::LoraDropoutScope(uint64_t seed)
    : prev_active_(t_dropout_active), prev_seed_(t_dropout_seed) {
  t_dropout_active = true;
  t_dropout_seed = seed;
}

LoraDropoutScope::~LoraDropoutScope() {
  t_dropout_active = prev_active_;
  t_dropout_seed = prev_seed_;
}

bool LoraDropoutScope::active(uint64_t* seed) {
  if (seed != nullptr) *seed = t_dropout_seed;
  return t_dropout_active;
}

void LoraRowSlots::upload(int64_t n) {
  VELA_CHECK(n <= max_rows(), "LoRA row slots: ", n, " rows exceed the reserved ", max_rows());
  if (n <= 0 || slots.data_ptr() == host.data_ptr()) return;
  Tensor dst = slots.slice(0, 0, n);
  dst.copy_(host.slice(0, 0, n));
}

int64_t lora_scratch_bytes(const LoraLinear* lora, int64_t n_rows) {
  if (lora == nullptr) return 0;
  // One segment's temporary at a time (each is released before the next): xa [n, r] f32.
  return n_rows * lora->r * static_cast<int64_t>(sizeof(float)) + 2 * ScratchArena::kAlignment;
}

void LoraLinear::forward_add(const Tensor& x, Tensor& y, int64_t col_begin, int64_t col_end) const {
  VELA_CHECK(x.dim() == 2 && x.size(1) == in_features && y.dim() == 2 && y.size(0) == x.size(0) &&
                 y.size(1) == col_end - col_begin,
             "LoraLinear::forward_add: x ", x.str(), " / y ", y.str(), " do not fit in_features ",
             in_features, " and columns [", col_begin, ", ", col_end, ")");
  const int64_t n = x.size(0);
  if (n == 0) return;
  uint64_t seed = 0;
  const bool drop = dropout > 0.0f && LoraDropoutScope::active(&seed);
  for (size_t si = 0; si < segments.size(); ++si) {
    const LoraSegment& seg = segments[si];
    const int64_t end = seg.col_begin + seg.n_cols;
    if (seg.col_begin >= col_end || end <= col_begin) continue;
    VELA_CHECK(seg.col_begin >= col_begin && end <= col_end, "LoRA segment ", seg.module, " [",
               seg.col_begin, ", ", end, ") straddles the output block [", col_begin, ", ", col_end,
               ")");
    Tensor ys = y.slice(1, seg.col_begin - col_begin, end - col_begin);  // [n, n_cols]
    ScratchMark mark;
    if (rows) {
      Tensor xa = scratch_tensor({n, r}, DType::kF32, x.device());  // [n, r]
      ops::lora_shrink(x, seg.a, rows->slots, xa);
      ops::lora_expand(xa, seg.b, rows->slots, scales_dev, ys);
      continue;
    }
    VELA_CHECK(n_slots == 1, "LoraLinear: ", n_slots,
               " adapters loaded but no per-row slots were given for this forward");
    Tensor xin = x;
    if (drop) {
      xin = scratch_tensor(x.shape(), x.dtype(), x.device());
      ops::lora_dropout(x, seed, id * 16 + si, dropout, xin);
    }
    Tensor xa = scratch_tensor({n, r}, x.dtype(), x.device());  // [n, r]
    ops::gemm(xin, seg.a.select(0, 0), xa, /*trans_a=*/false, /*trans_b=*/true);
    ops::gemm(xa, seg.b.select(0, 0), ys, /*trans_a=*/false, /*trans_b=*/true, scales[0],
              /*beta=*/1.0f);
  }
}

}  // namespace vela
