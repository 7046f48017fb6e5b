// LoRA ops: shape, dtype, layout and device checks, then the CPU or CUDA backend.
#include "ops/lora.h"

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

void lora_shrink(const Tensor& x, const Tensor& a, const Tensor& slots, Tensor& xa) {
  const char* op = "lora_shrink";
  check_defined(op, "x", x);
  check_defined(op, "a", a);
  check_defined(op, "xa", xa);
  check_rank(op, "x", x, 2);
  check_rank(op, "a", a, 3);
  check_floating(op, "x", x);
  check_same_dtype(op, "a", a, "x", x);
  check_dtype(op, "xa", xa, DType::kF32);
  VELA_CHECK(a.size(2) == x.size(1), op, ": a ", a.str(), " does not fit x ", x.str());
  check_shape(op, "xa", xa, {x.size(0), a.size(1)});
  check_contiguous(op, "a", a);
  check_contiguous(op, "xa", xa);
  check_rows(op, "x", x);
  check_same_device(op, "a", a, "x", x);
  check_same_device(op, "xa", xa, "x", x);
  check_slots(op, slots, x.size(0), x);
  dispatch(
      x, op, [&] { cpu::lora_shrink(x, a, slots, xa); },
      [&] {
#if defined(VELA_HAS_CUDA)
        cuda::lora_shrink(x, a, slots, xa);
#endif
      });
}

void lora_expand(const Tensor& xa, const Tensor& b, const Tensor& slots, const Tensor& scales,
                 Tensor& y) {
  const char* op = "lora_expand";
  check_defined(op, "xa", xa);
  check_defined(op, "b", b);
  check_defined(op, "scales", scales);
  check_defined(op, "y", y);
  check_rank(op, "xa", xa, 2);
  check_rank(op, "b", b, 3);
  check_rank(op, "y", y, 2);
  check_dtype(op, "xa", xa, DType::kF32);
  check_floating(op, "y", y);
  check_same_dtype(op, "b", b, "y", y);
  check_dtype(op, "scales", scales, DType::kF32);
  VELA_CHECK(b.size(2) == xa.size(1) && b.size(1) == y.size(1) && xa.size(0) == y.size(0), op,
             ": b ", b.str(), " does not fit xa ", xa.str(), " and y ", y.str());
  VELA_CHECK(scales.dim() == 1 && scales.size(0) == b.size(0), op, ": scales ", scales.str(),
             " must hold one entry per slot of b ", b.str());
  check_contiguous(op, "b", b);
  check_contiguous(op, "xa", xa);
  check_contiguous(op, "scales", scales);
  check_out_rows(op, "y", y);
  check_same_device(op, "b", b, "xa", xa);
  check_same_device(op, "y", y, "xa", xa);
  check_same_device(op, "scales", scales, "xa", xa);
  check_slots(op, slots, xa.size(0), xa);
  dispatch(
      xa, op, [&] { cpu::lora_expand(xa, b, slots, scales, y); },
      [&] {
#if defined(VELA_HAS_CUDA)
        cuda::lora_expand(xa, b, slots, scales, y);
#endif
      });
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
