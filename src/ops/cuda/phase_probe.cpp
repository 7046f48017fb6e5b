// The phase probe's host half (phase_probe.h): one zeroed device buffer per process (the first
// device asking), the rows' labels, and the report at exit.
#include "ops/cuda/phase_probe.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include "core/cuda/stream.h"
#include "core/env.h"

namespace vela::ops::cuda {

namespace {

struct Probe {
  std::mutex mu;
  void* raw = nullptr;                // the allocation
  unsigned long long* buf = nullptr;  // its first kProbeAlign boundary: the rows
  int device = -1;
  std::string kernels[kProbeRows];
  std::vector<std::string> phases[kProbeRows];
  int pred[kProbeRows];  // the row each row's gaps are measured from, -1: none
  Probe() { std::fill(std::begin(pred), std::end(pred), -1); }
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
    const unsigned long long blocks = row[kProbeBlocks];
    if (blocks == 0) continue;
    std::fprintf(stderr, "  %-28s %llu blocks\n", p.kernels[r].c_str(), blocks);
    if (const unsigned long long gaps = row[kProbeGapCount]; gaps > 0) {
      std::fprintf(stderr, "    %-34s mean %.3f us, min %.3f us (%llu blocks)\n",
                   ("wait released after " +
                    (p.pred[r] >= 0 ? p.kernels[p.pred[r]] : std::string("?")) + "'s last exit")
                       .c_str(),
                   static_cast<double>(row[kProbeGapSum]) / static_cast<double>(gaps) * 1e-3,
                   static_cast<double>(~row[kProbeGapMinInv]) * 1e-3, gaps);
    }
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

unsigned long long* phase_probe_row(int row, const char* kernel, const char* const* phases,
                                    int pred) {
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
    const size_t bytes = 2 * kProbeAlign;  // the rows fit one aligned kProbeAlign unit
    if (cudaMalloc(&p.raw, bytes) != cudaSuccess || cudaMemset(p.raw, 0, bytes) != cudaSuccess) {
      p.raw = nullptr;
      return nullptr;
    }
    const auto addr = reinterpret_cast<uintptr_t>(p.raw);
    p.buf = reinterpret_cast<unsigned long long*>((addr + kProbeAlign - 1) &
                                                  ~static_cast<uintptr_t>(kProbeAlign - 1));
    p.device = device;
    std::atexit(report);
  }
  if (device != p.device) return nullptr;  // one device per process
  if (p.kernels[row].empty()) {
    p.kernels[row] = kernel;
    for (int ph = 0; ph < kProbePhases; ++ph) p.phases[row].emplace_back(phases[ph]);
    p.pred[row] = pred >= 0 && pred < kProbeRows ? pred : -1;
  }
  return p.buf + row * kProbeStride;
}

}  // namespace vela::ops::cuda
