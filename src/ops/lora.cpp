// LoRA ops: shape, dtype, layout and device checks, then the CPU or CUDA backend.
#include "ops/lora.h"

#include <algorithm>

#include "ops/checks.h"
#include "ops/lora_impl.h"

namespace vela::ops {

namespace {

template <typename Cpu, typename Cuda>
void dispatch(const Tensor& t, const char* op, Cpu&& cpu_fn, Cuda&& cuda_fn) {
  if (t.device().is_cuda()) {
#if defined(VELA_HAS_CUDA)
    cuda_fn();
#else
    (void)cuda_fn;
    VELA_THROW(Unsupported, op, ": this build has no CUDA backend");
#endif
  } else {
    cpu_fn();
  }
}

void check_slots(const char* op, const Tensor& slots, int64_t n, const Tensor& like) {
  check_defined(op, "slots", slots);
  check_rank(op, "slots", slots, 1);
  check_dtype(op, "slots", slots, DType::kI32);
  VELA_CHECK(slots.size(0) >= n, op, ": slots ", slots.str(), " has fewer than ", n, " rows");
  check_contiguous(op, "slots", slots);
  check_same_device(op, "slots", slots, "x", like);
}

}  // namespace

void lora_shrink(const Tensor& x, const LoraSegments& segs, const Tensor& slots, Tensor& xa) {
  const char* op = "lora_shrink";
  VELA_CHECK(segs.n >= 1 && segs.n <= kMaxLoraSegments, op, ": ", segs.n,
             " segments (1 to ", kMaxLoraSegments, ")");
  check_defined(op, "x", x);
  check_defined(op, "xa", xa);
  check_rank(op, "x", x, 2);
  check_floating(op, "x", x);
  check_dtype(op, "xa", xa, DType::kF32);
  check_rows(op, "x", x);
  check_contiguous(op, "xa", xa);
  check_same_device(op, "xa", xa, "x", x);
  for (int g = 0; g < segs.n; ++g) {
    const Tensor& a = segs.a[g];
    check_defined(op, "a", a);
    check_rank(op, "a", a, 3);
    check_same_dtype(op, "a", a, "x", x);
    VELA_CHECK(a.size(2) == x.size(1), op, ": a ", a.str(), " does not fit x ", x.str());
    VELA_CHECK(a.size(0) == segs.a[0].size(0) && a.size(1) == segs.a[0].size(1), op,
               ": segment ", g, "'s a ", a.str(), " differs in slots or rank from ",
               segs.a[0].str());
    check_contiguous(op, "a", a);
    check_same_device(op, "a", a, "x", x);
  }
  const int64_t width = segs.n * segs.a[0].size(1);
  if (xa.dim() == 3) {
    VELA_CHECK(xa.size(0) >= 1 && xa.size(0) <= x.size(1), op, ": xa ", xa.str(),
               " has more parts than x ", x.str(), " has inputs");
    check_shape(op, "xa", xa, {xa.size(0), x.size(0), width});
  } else {
    check_shape(op, "xa", xa, {x.size(0), width});
  }
  check_slots(op, slots, x.size(0), x);
  dispatch(
      x, op, [&] { cpu::lora_shrink(x, segs, slots, xa); },
      [&] {
#if defined(VELA_HAS_CUDA)
        cuda::lora_shrink(x, segs, slots, xa);
#endif
      });
}

void lora_expand(const Tensor& xa, const LoraSegments& segs, const Tensor& slots,
                 const Tensor& scales) {
  const char* op = "lora_expand";
  VELA_CHECK(segs.n >= 1 && segs.n <= kMaxLoraSegments, op, ": ", segs.n,
             " segments (1 to ", kMaxLoraSegments, ")");
  check_defined(op, "xa", xa);
  check_defined(op, "scales", scales);
  VELA_CHECK(xa.dim() == 2 || xa.dim() == 3, op, ": xa ", xa.str(), " must be [n, w] or [p, n, w]");
  check_dtype(op, "xa", xa, DType::kF32);
  check_dtype(op, "scales", scales, DType::kF32);
  check_contiguous(op, "xa", xa);
  check_contiguous(op, "scales", scales);
  check_same_device(op, "scales", scales, "xa", xa);
  const int64_t r = segs.b[0].defined() ? segs.b[0].size(2) : 0;
  const int64_t xa_rows = xa.size(xa.dim() - 2);
  VELA_CHECK(xa.size(xa.dim() - 1) == segs.n * r, op, ": xa ", xa.str(), " does not hold ",
             segs.n, " segments of rank ", r);
  for (int g = 0; g < segs.n; ++g) {
    const Tensor &b = segs.b[g], &y = segs.y[g];
    check_defined(op, "b", b);
    check_defined(op, "y", y);
    check_rank(op, "b", b, 3);
    check_rank(op, "y", y, 2);
    check_floating(op, "y", y);
    check_same_dtype(op, "b", b, "y", y);
    check_same_dtype(op, "y", y, "y", segs.y[0]);
    VELA_CHECK(b.size(2) == r && b.size(0) == segs.b[0].size(0) && b.size(1) == y.size(1) &&
                   y.size(0) == xa_rows,
               op, ": segment ", g, "'s b ", b.str(), " does not fit xa ", xa.str(), " and y ",
               y.str());
    VELA_CHECK(scales.dim() == 1 && scales.size(0) == b.size(0), op, ": scales ", scales.str(),
               " must hold one entry per slot of b ", b.str());
    check_contiguous(op, "b", b);
    check_out_rows(op, "y", y);
    check_same_device(op, "b", b, "xa", xa);
    check_same_device(op, "y", y, "xa", xa);
  }
  check_slots(op, slots, xa_rows, xa);
  dispatch(
      xa, op, [&] { cpu::lora_expand(xa, segs, slots, scales); },
      [&] {
#if defined(VELA_HAS_CUDA)
        cuda::lora_expand(xa, segs, slots, scales);
#endif
      });
}

int64_t lora_shrink_parts(int64_t in, Device device) {
  return device.is_cuda() ? std::max<int64_t>(1, (in + 1023) / 1024) : 1;
}

void lora_shrink(const Tensor& x, const Tensor& a, const Tensor& slots, Tensor& xa) {
  LoraSegments segs;
  segs.n = 1;
  segs.a[0] = a;
  lora_shrink(x, segs, slots, xa);
}

void lora_expand(const Tensor& xa, const Tensor& b, const Tensor& slots, const Tensor& scales,
                 Tensor& y) {
  LoraSegments segs;
  segs.n = 1;
  segs.b[0] = b;
  segs.y[0] = y;
  lora_expand(xa, segs, slots, scales);
}

void lora_dropout(const Tensor& x, uint64_t seed, uint64_t stream, float p, Tensor& out) {
  const char* op = "lora_dropout";
  check_defined(op, "x", x);
  check_defined(op, "out", out);
  check_rank(op, "x", x, 2);
  check_floating(op, "x", x);
  check_same_dtype(op, "out", out, "x", x);
  check_same_shape(op, "out", out, "x", x);
  check_same_device(op, "out", out, "x", x);
  check_rows(op, "x", x);
  check_out_rows(op, "out", out);
  VELA_CHECK(p >= 0.0f && p < 1.0f, op, ": p ", p, " must be in [0, 1)");
  dispatch(
      x, op, [&] { cpu::lora_dropout(x, seed, stream, p, out); },
      [&] {
#if defined(VELA_HAS_CUDA)
        cuda::lora_dropout(x, seed, stream, p, out);
#endif
      });
}

}  // namespace vela::ops
