// A CUDA injection library that writes every kernel's GPU start and end time, as CUPTI's activity
// records give them, to a CSV: the in-graph timeline of a decode step where nsys is not installed
// (the H100 image has ncu but no nsys, and ncu replays graph nodes one at a time, so it cannot see
// the overlap programmatic dependent launch gives). Kernels launched from a CUDA graph come as one
// record per kernel node with the graph launch's correlation id.
//
// build: g++ -O2 -shared -fPIC -I$CUDA/extras/CUPTI/include -I$CUDA/include kernel_trace.cpp \
//          -L$CUDA/extras/CUPTI/lib64 -lcupti -o libkernel_trace.so
// use:   CUDA_INJECTION64_PATH=$PWD/libkernel_trace.so VELA_KERNEL_TRACE=out.csv vela bench engine
// ... CSV columns: start_ns,end_ns,correlation,graph_id,grid_x,grid_y,grid_z,block_x,name (copies
// and memsets too, named "memcpy HtoD 256" / "memset 4096", grid 0) (tools/kernel_trace_step.py
// reads it). Tools only: nothing in vela links this.
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace {

FILE* g_out = nullptr;
std::mutex g_mu;
constexpr size_t kBufferBytes = 16u << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = kBufferBytes;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY || rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      // Copies and memsets as rows named "memcpy <kind> <bytes>" / "memset <bytes>" (grid 0).
      // Both record types begin with kind, then the copy kind / value, then bytes, start, end;
      // read them through their own structs.
      unsigned long long start = 0, end = 0, bytes = 0;
      unsigned corr = 0, graph = 0;
      char what[64];
      if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy5*>(rec);
        start = m->start, end = m->end, bytes = m->bytes, corr = m->correlationId,
        graph = m->graphId;
        std::snprintf(what, sizeof what, "memcpy %s %llu",
                      m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD   ? "HtoD"
                      : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? "DtoH"
                      : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD ? "DtoD"
                                                                       : "other",
                      bytes);
      } else {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        start = m->start, end = m->end, bytes = m->bytes, corr = m->correlationId,
        graph = m->graphId;
        std::snprintf(what, sizeof what, "memset %llu", bytes);
      }
      if (g_out != nullptr)
        std::fprintf(g_out, "%llu,%llu,%u,%u,0,0,0,0,\"%s\"\n", start, end, corr, graph, what);
      continue;
    }
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL)
      continue;
    // CUpti_ActivityKernel5 and later versions only append fields, so these read the same in
    // whatever version this CUPTI fills in.
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel5*>(rec);
    if (g_out != nullptr)
      std::fprintf(g_out, "%llu,%llu,%u,%u,%d,%d,%d,%d,\"%s\"\n",
                   static_cast<unsigned long long>(k->start),
                   static_cast<unsigned long long>(k->end), k->correlationId, k->graphId, k->gridX,
                   k->gridY, k->gridZ, k->blockX, k->name != nullptr ? k->name : "?");
  }
  std::free(buffer);
}

void finish() {
  cuptiActivityFlushAll(1);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_out != nullptr) std::fclose(g_out);
  g_out = nullptr;
}

}  // namespace

extern "C" int InitializeInjection() {
  const char* path = std::getenv("VELA_KERNEL_TRACE");
  g_out = std::fopen(path != nullptr ? path : "kernel_trace.csv", "w");
  if (g_out == nullptr) return 0;
  std::fprintf(g_out, "start_ns,end_ns,correlation,graph_id,grid_x,grid_y,grid_z,block_x,name\n");
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "kernel_trace: CUPTI activity setup failed\n");
    return 0;
  }
  std::atexit(finish);
  return 1;
}
