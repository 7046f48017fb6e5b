// Portability macros shared by host and device code.
#pragma once

#if defined(__CUDACC__)
#define VELA_HOST_DEVICE __host__ __device__
#define VELA_INLINE __forceinline__
#else
#define VELA_HOST_DEVICE
#define VELA_INLINE inline __attribute__((always_inline))
#endif
