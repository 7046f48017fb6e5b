// Executor: runs the model on one bound batch. Input ids are staged in the workspace by the
// scheduler; the executor only reads the BoundBatch views, so the same metadata can later be
// replayed by a captured CUDA graph. Every activation of a step comes from one ScratchArena sized
// at construction (the largest step the workspace admits), so a forward allocates nothing. The
// model pointer is swapped by Engine::update_weights between steps (never during one).
#pragma once

#include "core/scratch_arena.h"
#include "engine/cache/task_cache_manager.h"
#include "engine/runtime/inference_workspace.h"
#include "model/transformer.h"

namespace vela {

class Executor {
 public:
  Executor(const Transformer* model, InferenceWorkspace& ws);
  // Logits [n_seqs, vocab] f32 at each item's last row, on the model's device; valid until the
  // next forward.
  Tensor forward(const BoundBatch& batch);
  void set_model(const Transformer* model) { model_ = model; }
  const Transformer& model() const { return *model_; }
  const ScratchArena& arena() const { return arena_; }

  // Bytes of activations one forward of `n_tokens` tokens and `n_seqs` sequences needs at most.
  static int64_t activation_bytes(const ModelConfig& config, DType dtype, int64_t n_tokens,
                                  int64_t n_seqs);

 private:
  const Transformer* model_;
  InferenceWorkspace& ws_;
  ScratchArena arena_;
};

}  // namespace vela
