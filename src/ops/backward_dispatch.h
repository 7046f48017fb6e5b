// VELA_DISPATCH for the backward ops: brings the CPU and CUDA backward entry points into scope.
#pragma once

#include "ops/cpu/cpu_backward_ops.h"
#include "ops/dispatch.h"
#if defined(VELA_HAS_CUDA)
#include "ops/cuda/cuda_backward_ops.h"
#endif
