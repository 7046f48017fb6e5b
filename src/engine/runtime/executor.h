// Executor: runs the model on one bound batch. Input ids are staged in the workspace by the
// scheduler; the executor only reads the BoundBatch views, so the same metadata can later be
// replayed by a captured CUDA graph. The model pointer is swapped by Engine::update_weights
// between steps (never during one).
#pragma once

#include "engine/cache/task_cache_manager.h"
#include "engine/runtime/inference_workspace.h"
#include "model/transformer.h"

namespace vela {

class Executor {
 public:
  Executor(const Transformer* model, InferenceWorkspace& ws) : model_(model), ws_(ws) {}
  // Logits [n_seqs, vocab] f32 at each item's last row.
  Tensor forward(const BoundBatch& batch);
  void set_model(const Transformer* model) { model_ = model; }
  const Transformer& model() const { return *model_; }

 private:
  const Transformer* model_;
  InferenceWorkspace& ws_;
};

}  // namespace vela
