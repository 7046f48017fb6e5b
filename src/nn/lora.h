// LoRA on a Linear: y += scale * dropout(x) @ A^T @ B^T over some of the host Linear's output
// columns (PEFT's LoraLayer: lora_B(lora_A(dropout(x))) * lora_alpha / r). vela fuses q/k/v and
// gate/up into one Linear, so one LoraLinear carries one LoraSegment per HF target module (q_proj,
// k_proj, v_proj of the fused qkv; gate_proj, up_proj of gate_up), each adding to its own column
// block. The host Linear calls forward_add / backward (nn/linear.h's `lora` hook).
//
// Adapters are stacked in slots: a: [n_slots, r, in], b: [n_slots, n_cols, r] (a rank below r is
// zero-padded). Two paths:
//  - one adapter for every row (rows == nullptr): slot 0 through two GEMMs. Training (with
//    gradients into da / db and dropout), GRPO's rollout engine, `vela generate --lora`.
//  - per-row slots (rows != nullptr, serving several adapters in one batch): BGMV-style shrink
//    and expand ops (ops/lora.h) read each row's slot from rows->slots; a row of slot -1 gets
//    nothing added (the base model). No host read: a captured CUDA graph replays it.
// Dropout (training only) is active inside a LoraDropoutScope on the calling thread: a
// counter-based mask of (scope seed, the LoraLinear's id, segment, element), so backward and a
// checkpointed recompute see the same mask as the forward without storing it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace vela {

// Per-row adapter slots of the batch in flight (serving). Owned by the adapter set
// (model/lora_adapter.h); the scheduler writes `host`, the executor uploads it before a forward.
struct LoraRowSlots {
  Tensor host;   // [max_rows] i32 (CPU)
  Tensor slots;  // [max_rows] i32 on the model's device (== host on the CPU)
  int64_t max_rows() const { return host.defined() ? host.size(0) : 0; }
  // Copies host[0, n) to the device (no-op on the CPU).
  void upload(int64_t n);
};

struct LoraSegment {
  std::string module;     // HF target module name: q_proj, k_proj, ..., down_proj
  int64_t col_begin = 0;  // first output column of the host Linear this segment adds to
  int64_t n_cols = 0;
  Tensor a;   // [n_slots, r, in]
  Tensor b;   // [n_slots, n_cols, r]
  Tensor da;  // [r, in] f32 (training, slot 0), or undefined
  Tensor db;  // [n_cols, r] f32
};

struct LoraLinear {
  int64_t in_features = 0;
  int64_t r = 0;  // rank (the largest over the slots)
  int64_t n_slots = 1;
  std::vector<LoraSegment> segments;
  std::vector<float> scales;           // [n_slots] alpha / r (or alpha / sqrt(r) with rsLoRA)
  Tensor scales_dev;                   // [n_slots] f32 on the device (per-row path)
  float dropout = 0.0f;                // probability (training only)
  uint64_t id = 0;                     // distinguishes dropout masks of different layers
  std::shared_ptr<LoraRowSlots> rows;  // per-row slots, or null (every row uses slot 0)

  // Adds the segments that lie inside output columns [col_begin, col_end) of the host Linear to y,
  // whose column 0 is host column col_begin. x: [n, in]   y: [n, col_end - col_begin].
  void forward_add(const Tensor& x, Tensor& y, int64_t col_begin, int64_t col_end) const;
  // The same over several output tensors at once (the separate q, k and v of one fused qkv
  // Linear): parts[p] holds host columns [part_begin[p], part_begin[p] + parts[p].size(1)). With
  // per-row slots, all the segments go in one shrink and one expand launch.
  void forward_add_parts(const Tensor& x, Tensor* parts, const int64_t* part_begin,
                         int n_parts) const;
  // Backward of forward_add over all columns (slot 0 for every row). x: [n, in] the forward input,
  // dy: [n, host out]; da / db += (when defined), dx += (when defined).
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx) const;
};

// Dropout of the LoRA inputs on this thread while alive (nestable; 0 = off inside).
class LoraDropoutScope {
 public:
  explicit LoraDropoutScope(uint64_t seed);
  ~LoraDropoutScope();
  LoraDropoutScope(const LoraDropoutScope&) = delete;
  LoraDropoutScope& operator=(const LoraDropoutScope&) = delete;
  // Whether dropout is active on this thread, and its seed.
  static bool active(uint64_t* seed);

 private:
  bool prev_active_;
  uint64_t prev_seed_;
};

// Scratch bytes one forward over n_rows rows needs for the LoRA temporaries of `lora` (0 for
// null); the engine adds the model's maximum to its activation arena.
int64_t lora_scratch_bytes(const LoraLinear* lora, int64_t n_rows);

}  // namespace vela
