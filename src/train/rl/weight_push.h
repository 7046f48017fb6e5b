// The weight push of the RL loop: after every optimizer step the in-process Engine is told the
// policy changed. The engine was built from a shallow copy of the trainer's model (train/rl/
// rollout_runner.h), so it already reads the updated compute weights; the push hands it another
// shallow copy (ref-counted tensors: nothing is copied), which waits for the engine's step
// boundary, bumps its monotonic policy version and drops its prefix cache (KV computed with the
// old weights). This is the one place the trainer updates the engine, so a dedicated in-place
// engine API can replace the call without touching the loop.
#pragma once

#include <cstdint>

#include "model/transformer.h"

namespace vela {

class Engine;

// Returns the engine's new policy version.
uint64_t push_weights(Engine& engine, const Transformer& trainer_model);

}  // namespace vela
