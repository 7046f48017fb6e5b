// CPU sum_rows (f32): parallel over column blocks, rows summed in order in double (deterministic).
#include "core/parallel.h"
#include "ops/checks.h"
#include "ops/cpu/cpu_backward_ops.h"

namespace vela::ops::cpu {

void sum_rows(const Tensor& x, Tensor& out, bool accumulate) {
  RowLayout rx = rows_of(x);
  const float* px = x.data<float>();
  float* po = out.data<float>();
  constexpr int64_t kBlock = 64;
  const int64_t n = rx.n_cols, n_blocks = (n + kBlock - 1) / kBlock;
  parallel_for(n_blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t c0 = b * kBlock, c1 = std::min(n, c0 + kBlock);
      double acc[kBlock] = {};
      for (int64_t r = 0; r < rx.n_rows; ++r)
        for (int64_t c = c0; c < c1; ++c) acc[c - c0] += px[r * rx.row_stride + c];
      for (int64_t c = c0; c < c1; ++c)
        po[c] =
            accumulate ? po[c] + static_cast<float>(acc[c - c0]) : static_cast<float>(acc[c - c0]);
    }
  });
}

}  // namespace vela::ops::cpu
