// The phase probe's host half (phase_probe.h): one zeroed device buffer per process (the first
// device asking), the rows' labels, and the report at exit.
#include "ops/cuda/phase_probe.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "core/cuda/stream.h"
#include "core/env.h"

namespace vela::ops::cuda {

namespace {

struct Probe {
  std::mutex mu;
  unsigned long long* buf = nullptr;
  int device = -1;
  std::string kernels[kProbeRows];
  std::vector<std::string> phases[kProbeRows];
};

Probe& probe() {
  static Probe* p = new Probe();  // never destroyed: the report runs at exit
  return *p;
}

void report() {
  Probe& p = probe();
  if (p.buf == nullptr) return;
  std::vector<unsigned long long> h(kProbeRows * kProbeStride);
  if (cudaSetDevice(p.device) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess ||
      cudaMemcpy(h.data(), p.buf, h.size() * sizeof(h[0]), cudaMemcpyDeviceToHost) != cudaSuccess) {
    std::fprintf(stderr, "phase probe: could not read the buffer back\n");
    return;
  }
  int khz = 0;
  cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, p.device);
  std::fprintf(stderr,
               "phase probe (mean cycles from the previous mark, per block; SM clock %d MHz)\n",
               khz / 1000);
  for (int r = 0; r < kProbeRows; ++r) {
    const unsigned long long* row = h.data() + r * kProbeStride;
    const unsigned long long blocks = row[kProbePhases];
    if (blocks == 0) continue;
    std::fprintf(stderr, "  %-28s %llu blocks\n", p.kernels[r].c_str(), blocks);
    for (int ph = 1; ph < kProbePhases; ++ph) {
      if (ph >= static_cast<int>(p.phases[r].size()) || p.phases[r][ph].empty()) continue;
      // Modular differences: exact while the true sum fits 64 bits.
      const double cycles =
          static_cast<double>(row[ph] - row[ph - 1]) / static_cast<double>(blocks);
      std::fprintf(stderr, "    %-34s %10.0f cycles %8.3f us\n", p.phases[r][ph].c_str(), cycles,
                   khz > 0 ? cycles / khz * 1e3 : 0.0);
    }
  }
}

}  // namespace

unsigned long long* phase_probe_row(int row, const char* kernel, const char* const* phases) {
#if defined(VELA_PHASE_PROBE)
  static const bool on = env_opted_in("VELA_PHASE_PROBE");
#else
  static const bool on = false;  // the kernels' marks are compiled out
#endif
  if (!on || row < 0 || row >= kProbeRows) return nullptr;
  Probe& p = probe();
  std::lock_guard<std::mutex> lock(p.mu);
  const int device = vela::cuda::current_device();
  if (p.buf == nullptr) {
    const size_t bytes = kProbeRows * kProbeStride * sizeof(unsigned long long);
    if (cudaMalloc(&p.buf, bytes) != cudaSuccess || cudaMemset(p.buf, 0, bytes) != cudaSuccess) {
      p.buf = nullptr;
      return nullptr;
    }
    p.device = device;
    std::atexit(report);
  }
  if (device != p.device) return nullptr;  // one device per process
  if (p.kernels[row].empty()) {
    p.kernels[row] = kernel;
    for (int ph = 0; ph < kProbePhases; ++ph) p.phases[row].emplace_back(phases[ph]);
  }
  return p.buf + row * kProbeStride;
}

}  // namespace vela::ops::cuda
