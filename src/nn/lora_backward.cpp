// LoraLinear backward (slot 0 for every row; training). With xd = dropout(x), xa = xd A^T:
//   db += scale dy_seg^T xa      dxa = scale dy_seg B      da += dxa^T xd
//   dx += dropout(dxa A)         (the mask is diagonal: the same hashed mask as the forward)
// xa and xd are recomputed from x (r x in per row, cheap next to the base GEMMs) instead of saved.
#include "nn/lora.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"
#include "ops/lora.h"

namespace vela {

void LoraLinear::backward(const Tensor& x, const Tensor& dy, Tensor& dx) const {
  VELA_CHECK(n_slots == 1 && !rows, "LoraLinear::backward: training needs a single adapter");
  const int64_t n = x.size(0);
  if (n == 0) return;
  const DType dt = dy.dtype();
  const Device dev = dy.device();
  uint64_t seed = 0;
  const bool drop = dropout > 0.0f && LoraDropoutScope::active(&seed);
  for (size_t si = 0; si < segments.size(); ++si) {
    const LoraSegment& seg = segments[si];
    const uint64_t stream = id * 16 + si;
    const Tensor a = seg.a.select(0, 0), b = seg.b.select(0, 0);  // [r, in], [n_cols, r]
    Tensor xin = x;
    if (drop) {
      xin = Tensor::empty(x.shape(), x.dtype(), dev);
      ops::lora_dropout(x, seed, stream, dropout, xin);
    }
    Tensor dys = dy.slice(1, seg.col_begin, seg.col_begin + seg.n_cols);  // [n, n_cols]
    Tensor xa = Tensor::empty({n, r}, dt, dev);
    ops::gemm(xin, a, xa, false, true);
    Tensor db = seg.db;
    if (db.defined()) ops::gemm(dys, xa, db, /*trans_a=*/true, false, scales[0], /*beta=*/1.0f);
    Tensor dxa = Tensor::empty({n, r}, dt, dev);
    ops::gemm(dys, b, dxa, false, false, scales[0]);
    Tensor da = seg.da;
    if (da.defined()) ops::gemm(dxa, xin, da, /*trans_a=*/true, false, 1.0f, /*beta=*/1.0f);
    if (!dx.defined()) continue;
    if (!drop) {
      ops::gemm(dxa, a, dx, false, false, 1.0f, /*beta=*/1.0f);
    } else {
      Tensor dxd = Tensor::empty({n, in_features}, dt, dev);
      ops::gemm(dxa, a, dxd, false, false);
      ops::lora_dropout(dxd, seed, stream, dropout, dxd);
      ops::add(dx, dxd, dx);
    }
  }
}

}  // namespace vela
