// Kernel micro-benchmarks behind `vela bench ops` (CUDA builds only: include and call them under
// #if defined(VELA_HAS_CUDA)). Each runs on the current device and stream, fills its own inputs
// with random values, warms up, then times repeated runs with CUDA events (about 0.2 s of work)
// and returns the rate; its tensors are freed before it returns. Units: 1 TFLOP/s = 1e12 flop/s,
// 1 GB/s = 1e9 bytes/s. Throws vela::Error subclasses (OutOfMemory, CudaError) on failure.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace vela::ops::cuda {

// c[m, n] = a[m, k] @ b[k, n], all of `dtype` (fp32 accumulation); counts 2*m*n*k flops.
double bench_gemm_tflops(int m, int n, int k, DType dtype);
// rms_norm over x[rows, hidden] with w[hidden] of the same dtype; counts the bytes of x read,
// out written and w read once.
double bench_rms_norm_gbps(int64_t rows, int64_t hidden, DType dtype);
// cudaMemcpyAsync device to device of `bytes`; counts read + write (2 * bytes).
double bench_copy_gbps(size_t bytes);

// How a kernel streams a read-once buffer into its SMs (bench_stream.cu; `vela bench stream`).
struct StreamMethod {
  enum class Kind { kRegister, kBulk, kCpAsync };
  // kBulk: who refills a stage once it is read. kBlockBarrier: warp 0 after a block barrier (the
  // weight ring); kProducer: a producer warp once every consumer warp released it (`empty`
  // mbarriers); kCopiesOnly: one warp, nothing reads the stages.
  enum class Refill { kBlockBarrier, kProducer, kCopiesOnly };
  Kind kind = Kind::kRegister;
  int blocks_per_sm = 1;
  int loads = 8;  // kRegister: 16-byte loads a thread keeps in flight (2, 4, 8, 16), 256 threads
  int warps = 8;  // kBulk / kCpAsync: consumer warps a block
  int stage_kb = 16;   // kBulk / kCpAsync: KiB a stage
  int stages = 4;      // kBulk: 1..16; kCpAsync: 2, 4 or 8
  int copy_bytes = 0;  // kBulk: bytes a copy (0: one copy a stage)
  Refill refill = Refill::kBlockBarrier;
  bool evict_first = true;  // kBulk: the copies' L2 evict-first hint
};
// Read GB/s of one kernel streaming `bytes` (>= 1 MiB) of bf16 by method `m`, every element
// multiplied into a register sum. kBulk throws Unsupported without sm_90.
double bench_stream_gbps(const StreamMethod& m, size_t bytes);

// A decode step's weight stream as one persistent kernel (a megakernel's skeleton,
// bench_stream.cu): per layer the q|k|v, o, gate|up and down weights of a one-row decode (bf16,
// [rows, hidden] / [2 inter, hidden] / [hidden, inter]) and an attention phase with no weights, one
// block an SM, a producer warp streaming every phase's share through `stages` x `stage_kb` KiB of
// shared memory, 8 or 16 consumer warps that start each phase after a grid barrier (kGrid), or each
// K chunk of a phase once the blocks that wrote it are done (kChunks, `chunks` a phase), or
// straight after the last (kNone: the stream alone). Microseconds a layer and the read GB/s.
enum class PhasedSync { kNone, kGrid, kChunks };
struct PhasedStreamShape {
  int layers = 24;
  int64_t hidden = 1536, inter = 6912, qkv_rows = 2048;  // bench-1b
};
struct PhasedStreamResult {
  double us_per_layer = 0.0, gbps = 0.0;
};
PhasedStreamResult bench_phased_stream(const PhasedStreamShape& shape, int stage_kb, int stages,
                                       PhasedSync sync, int chunks = 16, int consumer_warps = 8);

}  // namespace vela::ops::cuda
