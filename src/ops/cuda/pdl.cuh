// Programmatic dependent launch (sm_90): a kernel launched with launch_pdl() may start while the
// kernel before it on the stream is still finishing, so its blocks are resident and can stream
// inputs that do not depend on that kernel (weights) before pdl_wait() waits for the previous
// grid to complete and its writes to be visible. The previous kernel calls
// pdl_launch_dependents() once its own blocks are all running, which lets the dependent grid in.
// Both instructions are no-ops when the kernel was launched without the attribute (or on an
// older architecture), so a kernel written this way is correct under either launch.
//
// Rule: every kernel launched with launch_pdl() calls pdl_wait() before it reads anything an
// earlier kernel writes, or writes anything an earlier kernel reads: before its wait it may read
// only weights, host-written metadata and cache entries of earlier steps, and write only shared
// memory. Not only the previous kernel may still be running then: a kernel that lets its dependent
// launch before its own wait would put several kernels back in flight. CUDA graphs capture the
// attribute as a programmatic edge. VELA_PDL=0 turns it off (plain launches).
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "core/cuda/stream.h"
#include "core/env.h"
#include "ops/cuda/common.cuh"

namespace vela::ops::cuda {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether launch_pdl() sets the attribute: sm_90+ and VELA_PDL not "0" (read once).
inline bool pdl_enabled() {
  static const bool on = env_enabled("VELA_PDL") && vela::cuda::device_properties().major >= 9;
  return on;
}

// kernel<<<grid, block, smem, current_stream()>>>(args...) in clusters of `cluster` blocks (a
// shape of 1 block launches without the cluster attribute), with the programmatic-serialization
// attribute when pdl_enabled(). Sizes past 8 need the kernel's permission (cluster_launch.cuh).
template <typename... KArgs, typename... Args>
void launch_cluster_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, dim3 cluster,
                        Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = current_stream();
  cudaLaunchAttribute attr[2];
  int n_attr = 0;
  if (cluster.x * cluster.y * cluster.z > 1) {
    attr[n_attr].id = cudaLaunchAttributeClusterDimension;
    attr[n_attr].val.clusterDim.x = cluster.x;
    attr[n_attr].val.clusterDim.y = cluster.y;
    attr[n_attr].val.clusterDim.z = cluster.z;
    ++n_attr;
  }
  if (pdl_enabled()) {
    attr[n_attr].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n_attr].val.programmaticStreamSerializationAllowed = 1;
    ++n_attr;
  }
  cfg.attrs = attr;
  cfg.numAttrs = static_cast<unsigned>(n_attr);
  VELA_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...));
}

// kernel<<<grid, block, smem, current_stream()>>>(args...) with the programmatic-serialization
// attribute when pdl_enabled().
template <typename... KArgs, typename... Args>
void launch_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, Args&&... args) {
  launch_cluster_pdl(kernel, grid, block, smem, dim3(1, 1, 1), std::forward<Args>(args)...);
}

}  // namespace vela::ops::cuda
