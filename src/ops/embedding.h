// Embedding gather: out[i, :] = weight[ids[i], :].
//   weight: [vocab, hidden] f32/bf16/f16   ids: [n_tokens] i32 or i64   out: [n_tokens, hidden],
//   out dtype = weight dtype or f32. An id outside [0, vocab) is an InvalidArgument on the CPU;
//   CUDA checks ids on the host only when they live there (device ids are trusted).
#pragma once

#include "core/tensor.h"

namespace vela::ops {

void embedding(const Tensor& weight, const Tensor& ids, Tensor& out);

// Backward: dweight[ids[i], :] += dout[i, :] (repeated ids add up).
//   ids: [n_tokens] i32   dout: [n_tokens, hidden] (f32, or bf16/f16 on CUDA)
//   dweight: [vocab, hidden] f32
void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dweight);

}  // namespace vela::ops
