// Executor implementation.
#include "engine/runtime/executor.h"

namespace vela {

Tensor Executor::forward(const BoundBatch& batch) {
  Tensor ids = ws_.input_ids.slice(0, 0, batch.n_tokens);
  return model_->forward_packed(ids, batch.positions, batch.kv, batch.logits_indices);
}

}  // namespace vela
