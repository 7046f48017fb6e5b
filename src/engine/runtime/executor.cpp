// Executor implementation: the activation arena and the forward call.
#include "engine/runtime/executor.h"

namespace vela {

int64_t Executor::activation_bytes(const ModelConfig& c, DType dtype, int64_t n_tokens,
                                   int64_t n_seqs) {
  const int64_t e = static_cast<int64_t>(dtype_size(dtype));
  const int64_t slack = 16 * ScratchArena::kAlignment;  // per-take alignment
  const int64_t h = c.hidden_size, d = c.head_dim;
  const int64_t qkv = (c.n_heads + 2 * c.n_kv_heads) * d;
  // Live at once: the residual stream and, inside one block (its temporaries are released when it
  // returns), normed + attn_out + q/k/v + the attention output + the MLP's gate_up and
  // activation, counted without reuse; then the gathered rows, their norm and f32 logits.
  int64_t block = n_tokens * e * (2 * h + qkv + c.n_heads * d + 3 * c.intermediate_size);
  int64_t residual = n_tokens * e * h;
  int64_t head = n_seqs * (2 * h * e + c.vocab_size * static_cast<int64_t>(sizeof(float)));
  return residual + block + head + slack;
}

Executor::Executor(const Transformer* model, InferenceWorkspace& ws)
    : model_(model),
      ws_(ws),
      arena_(activation_bytes(model->config, model->dtype(), ws.max_tokens(), ws.max_seqs()),
             model->device()) {}

Tensor Executor::forward(const BoundBatch& batch) {
  arena_.reset();
  ScratchScope scope(&arena_);
  Tensor ids = ws_.input_ids.slice(0, 0, batch.n_tokens);
  return model_->forward_packed(ids, batch.positions, batch.kv, batch.logits_indices);
}

}  // namespace vela
