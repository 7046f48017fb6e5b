// VELA_CUBLAS_CHECK(expr): throws CudaError naming the call and cuBLAS's status when a cuBLAS or
// cuBLASLt call (both return cublasStatus_t) fails.
#pragma once

#include <cublasLt.h>

#include "core/error.h"

#define VELA_CUBLAS_CHECK(expr)                                                                \
  do {                                                                                         \
    cublasStatus_t vela_status_ = (expr);                                                      \
    if (vela_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                                    \
      ::vela::detail::throw_at<::vela::CudaError>(__FILE__, __LINE__, #expr ": ",              \
                                                  cublasLtGetStatusName(vela_status_), " (",   \
                                                  cublasLtGetStatusString(vela_status_), ")"); \
  } while (0)
