// CPU embedding backward (f32): scatter-add of dout rows into dweight, parallel over column
// blocks so every thread owns its columns (deterministic, no atomics); tokens in order.
#include "core/parallel.h"
#include "ops/checks.h"
#include "ops/cpu/cpu_backward_ops.h"

namespace vela::ops::cpu {

void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dweight) {
  RowLayout rd = rows_of(dout);
  const int64_t n_tokens = ids.size(0), hidden = dweight.size(1);
  const int32_t* pid = ids.data<int32_t>();
  const float* pd = dout.data<float>();
  float* pw = dweight.data<float>();
  constexpr int64_t kBlock = 256;
  const int64_t n_blocks = (hidden + kBlock - 1) / kBlock;
  parallel_for(n_blocks, 1, [&](int64_t b0, int64_t b1) {
    const int64_t c0 = b0 * kBlock, c1 = std::min(hidden, b1 * kBlock);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* src = pd + t * rd.row_stride;
      float* dst = pw + static_cast<int64_t>(pid[t]) * hidden;
      for (int64_t c = c0; c < c1; ++c) dst[c] += src[c];
    }
  });
}

}  // namespace vela::ops::cpu
