// push_weights; see weight_push.h.
#include "train/rl/weight_push.h"

#include "engine/engine.h"

namespace vela {

uint64_t push_weights(Engine& engine, const Transformer& trainer_model) {
  return engine.update_weights(trainer_model);  // a by-value copy shares the tensors' storage
}

}  // namespace vela
