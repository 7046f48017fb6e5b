// Thread-block clusters (sm_90) for kernels that reduce over one (the wgmma GEMM's split-K,
// gemm_wgmma.cu): the permission for the non-portable sizes past 8, the largest cluster a kernel
// keeps resident on the current device; pdl.cuh's launch_cluster_pdl() launches in clusters.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "core/cuda/stream.h"
#include "core/log.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/pdl.cuh"

namespace vela::ops::cuda {

constexpr int kPortableCluster = 8;  // what every sm_90 device runs
constexpr int kMaxCluster = 16;      // the non-portable limit of the H100 / H200

// Clusters past the portable 8 need the kernel's permission, asked once per kernel and device;
// false when the driver refuses it (its error cleared).
template <typename Kernel>
bool allow_cluster(Kernel kernel, int size) {
  if (size <= kPortableCluster) return true;
  struct Allowed {
    const void* kernel;
    int device;
    bool ok;
  };
  static std::mutex mu;
  static std::vector<Allowed> allowed;
  const void* key = reinterpret_cast<const void*>(kernel);
  const int device = vela::cuda::current_device();
  std::lock_guard<std::mutex> lock(mu);
  for (const Allowed& a : allowed)
    if (a.kernel == key && a.device == device) return a.ok;
  const bool ok = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) ==
                  cudaSuccess;
  if (!ok) (void)cudaGetLastError();  // not sticky: clear it
  allowed.push_back({key, device, ok});
  return ok;
}

// The cluster shape of `size` blocks laid along grid dimension `dim` (0 x, 1 y, 2 z).
inline dim3 cluster_dims(int size, int dim) {
  const unsigned s = static_cast<unsigned>(size);
  return dim == 0 ? dim3(s, 1, 1) : dim == 1 ? dim3(1, s, 1) : dim3(1, 1, s);
}

// The largest cluster size from `top` (then 8 and halved down to 2; 1 when none fits) whose
// clusters of `kernel` (blocks of `threads` threads and `smem` bytes of dynamic shared memory, the
// opt-in already made) can be resident on the current device: a MIG slice or another partition of
// the GPU may not hold 8 large blocks in one GPC. A top past 8 the driver refuses starts at 8; a
// query that fails keeps the portable size, never the opt-in one. Not cached: callers keep it.
template <typename Kernel>
int largest_resident_cluster(Kernel kernel, int top, int threads, int smem, int dim) {
  if (top > kPortableCluster && !allow_cluster(kernel, top)) top = kPortableCluster;
  for (int s = top; s >= 2; s = s > kPortableCluster ? kPortableCluster : s / 2) {
    const dim3 c = cluster_dims(s, dim);  // one cluster's grid
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = c;
    cfg.blockDim = dim3(static_cast<unsigned>(threads));
    cfg.dynamicSmemBytes = static_cast<size_t>(smem);
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = c.x;
    attr.val.clusterDim.y = c.y;
    attr.val.clusterDim.z = c.z;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    int clusters = 0;
    const cudaError_t err = cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();  // not sticky: clear it
      VELA_LOG_DEBUG("[cluster] occupancy query failed (", cudaGetErrorString(err),
                     "); assuming clusters of ", std::min(top, kPortableCluster), " fit");
      return std::min(top, kPortableCluster);
    }
    if (clusters > 0) return s;
  }
  return 1;
}

}  // namespace vela::ops::cuda
