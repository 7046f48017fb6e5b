// LoraLinear forward (both paths), the dropout scope and the serving row slots; the backward is in
// lora_backward.cpp.
#include "nn/lora.h"

#include <algorithm>

#include "core/cuda/cuda_api.h"
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
  // Ordered on the engine's stream before the forward, without a host wait (host is pinned on
  // CUDA, and the scheduler rewrites it only after the step's sampler has synchronized).
  cuda::copy_bytes_async(slots.data_ptr(), slots.device(), host.data_ptr(), Device::cpu(),
                         static_cast<size_t>(n) * sizeof(int32_t));
}

int64_t lora_scratch_bytes(const LoraLinear* lora, int64_t n_rows) {
  if (lora == nullptr) return 0;
  // One temporary at a time: xa [parts, n, n_seg * r] f32 for the segments of one launch
  // (per-row path; parts as on CUDA, the larger count), or [n, r] per segment (one adapter).
  const auto n_seg =
      static_cast<int64_t>(std::min<size_t>(lora->segments.size(), ops::kMaxLoraSegments));
  const int64_t parts = ops::lora_shrink_parts(lora->in_features, Device::cuda(0));
  return parts * n_rows * lora->r * std::max<int64_t>(n_seg, 1) *
             static_cast<int64_t>(sizeof(float)) +
         2 * ScratchArena::kAlignment;
}

void LoraLinear::forward_add(const Tensor& x, Tensor& y, int64_t col_begin, int64_t col_end) const {
  VELA_CHECK(y.dim() == 2 && y.size(1) == col_end - col_begin, "LoraLinear::forward_add: y ",
             y.str(), " does not fit columns [", col_begin, ", ", col_end, ")");
  forward_add_parts(x, &y, &col_begin, 1);
}

void LoraLinear::forward_add_parts(const Tensor& x, Tensor* parts, const int64_t* part_begin,
                                   int n_parts) const {
  VELA_CHECK(x.dim() == 2 && x.size(1) == in_features, "LoraLinear::forward_add: x ", x.str(),
             " does not fit in_features ", in_features);
  for (int p = 0; p < n_parts; ++p)
    VELA_CHECK(parts[p].dim() == 2 && parts[p].size(0) == x.size(0),
               "LoraLinear::forward_add: output ", parts[p].str(), " does not fit x ", x.str());
  const int64_t n = x.size(0);
  if (n == 0) return;
  // The output block of segment `seg`: its columns of the part holding it, or undefined.
  auto block_of = [&](const LoraSegment& seg) {
    const int64_t end = seg.col_begin + seg.n_cols;
    for (int p = 0; p < n_parts; ++p) {
      const int64_t pb = part_begin[p], pe = pb + parts[p].size(1);
      if (seg.col_begin >= pe || end <= pb) continue;
      VELA_CHECK(seg.col_begin >= pb && end <= pe, "LoRA segment ", seg.module, " [",
                 seg.col_begin, ", ", end, ") straddles the output block [", pb, ", ", pe, ")");
      return parts[p].slice(1, seg.col_begin - pb, end - pb);  // [n, n_cols]
    }
    return Tensor();
  };
  if (rows) {
    // Every segment of this call in one shrink and one expand launch (up to kMaxLoraSegments).
    ops::LoraSegments segs;
    auto flush = [&] {
      if (segs.n == 0) return;
      ScratchMark mark;
      const int64_t parts = ops::lora_shrink_parts(in_features, x.device());
      Tensor xa = parts > 1 ? scratch_tensor({parts, n, segs.n * r}, DType::kF32, x.device())
                            : scratch_tensor({n, segs.n * r}, DType::kF32, x.device());
      ops::lora_shrink(x, segs, rows->slots, xa);
      ops::lora_expand(xa, segs, rows->slots, scales_dev);
      segs = ops::LoraSegments();
    };
    for (const LoraSegment& seg : segments) {
      Tensor ys = block_of(seg);
      if (!ys.defined()) continue;
      segs.a[segs.n] = seg.a;
      segs.b[segs.n] = seg.b;
      segs.y[segs.n] = ys;
      if (++segs.n == ops::kMaxLoraSegments) flush();
    }
    flush();
    return;
  }
  uint64_t seed = 0;
  const bool drop = dropout > 0.0f && LoraDropoutScope::active(&seed);
  for (size_t si = 0; si < segments.size(); ++si) {
    const LoraSegment& seg = segments[si];
    Tensor ys = block_of(seg);
    if (!ys.defined()) continue;
    ScratchMark mark;
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
