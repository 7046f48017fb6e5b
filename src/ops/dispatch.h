// VELA_DISPATCH(device, op, args...): calls ops::cuda::op on a CUDA device and ops::cpu::op on the
// host. In a CPU-only build a CUDA tensor reaching an op is an Unsupported error.
#pragma once

#include "core/error.h"
#include "ops/cpu/cpu_ops.h"
#if defined(VELA_HAS_CUDA)
#include "ops/cuda/cuda_ops.h"
#define VELA_DISPATCH(device, op, ...)                 \
  do {                                                 \
    if ((device).is_cuda()) ::vela::ops::cuda::op(__VA_ARGS__); \
    else ::vela::ops::cpu::op(__VA_ARGS__);            \
  } while (0)
#else
#define VELA_DISPATCH(device, op, ...)                                                        \
  do {                                                                                        \
    if ((device).is_cuda())                                                                   \
      VELA_THROW(Unsupported, #op ": this build has no CUDA backend");                        \
    ::vela::ops::cpu::op(__VA_ARGS__);                                                        \
  } while (0)
#endif
