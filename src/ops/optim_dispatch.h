// VELA_DISPATCH for the optimizer ops: brings their CPU and CUDA entry points into scope.
#pragma once

#include "ops/cpu/cpu_optim_ops.h"
#include "ops/dispatch.h"
#if defined(VELA_HAS_CUDA)
#include "ops/cuda/cuda_optim_ops.h"
#endif
