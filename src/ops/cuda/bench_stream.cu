// The weight-stream microbenchmark behind `vela bench stream` (bench_cuda.h): how fast one kernel
// can pull a read-once buffer (a decode step's weights) from HBM into its SMs, by each way vela's
// one-row kernels could do it. Every form reads the same bf16 buffer once a call and multiplies
// every element into a register sum (a GEMV's work per byte), so only the way the bytes come in
// differs:
// - register: each thread keeps `loads` 16-byte loads in flight (the next group issued before the
//   current one is summed), blocks own contiguous ranges (the persistent register GEMV's way);
// - bulk: cp.async.bulk copies into a ring of shared-memory stages completing on mbarriers (the
//   weight ring's and a persistent megakernel's way), refilled either after a block barrier by
//   warp 0 (the weight ring today), or by a producer warp as soon as every consumer warp has
//   released the stage (per-stage `empty` barriers), or with no consumers at all (copies only);
// - cp.async: every thread copies its own 16-byte chunks of each stage and reads only those, so
//   no barrier at all (wait_group).
#include <algorithm>
#include <functional>

#include "ops/cuda/bench_cuda.h"
#include "ops/cuda/bench_timing.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/tma.cuh"

namespace vela::ops::cuda {
namespace {

constexpr int kStreamMaxStages = 16;
constexpr int kPhasedPhases = 5;   // q|k|v, attention, o, gate|up, down
constexpr int kPhasedMaxK = 8192;  // the longest phase input (elements)

// A GEMV's work on 16 bytes of weights: eight bf16 values times register "inputs".
__device__ __forceinline__ float consume16(const uint4& v, float acc) {
  float f[8];
  unpack16<bf16>(v, f);
#pragma unroll
  for (int i = 0; i < 8; ++i) acc = fmaf(f[i], 0.25f * static_cast<float>(i + 1), acc);
  return acc;
}

// Keeps `acc` alive without a store that matters (no thread's sum is ever this value in practice).
__device__ __forceinline__ void sink(float acc, float* out) {
  if (acc == -1.2345e-30f) out[blockIdx.x] = acc;
}

// This block's contiguous share [c0, c1) of n 16-byte chunks.
__device__ __forceinline__ void block_range(int64_t n, int64_t& c0, int64_t& c1) {
  c0 = n * blockIdx.x / gridDim.x;
  c1 = n * (blockIdx.x + 1) / gridDim.x;
}

template <int U>
__global__ void __launch_bounds__(256)
    stream_register_kernel(const uint4* w, int64_t n, float* out) {
  int64_t c0, c1;
  block_range(n, c0, c1);
  const int64_t step = blockDim.x;
  float acc = 0.0f;
  uint4 cur[U], nxt[U];
  auto load = [&](int64_t base, uint4(&v)[U]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = base + u * step;
      v[u] = c < c1 ? __ldcs(w + c) : make_uint4(0, 0, 0, 0);
    }
  };
  int64_t base = c0 + threadIdx.x;
  load(base, cur);
  for (; base < c1; base += U * step) {
    load(base + U * step, nxt);
#pragma unroll
    for (int u = 0; u < U; ++u) acc = consume16(cur[u], acc);
#pragma unroll
    for (int u = 0; u < U; ++u) cur[u] = nxt[u];
  }
  sink(acc, out);
}

struct BulkArgs {
  const uint4* w;
  int64_t n;         // 16-byte chunks in all
  int stage_chunks;  // 16-byte chunks a stage
  int stages;
  int copy_chunks;  // 16-byte chunks a copy
  int mode;         // StreamMethod::Refill
  int consumers;    // consumer warps
  bool evict_first;
  float* out;
};

// Bulk copies into a ring of shared-memory stages. Block layout: `consumers` warps, plus one
// producer warp (the last) in kProducer mode; in kCopiesOnly mode one warp only.
__global__ void __launch_bounds__(544) stream_bulk_kernel(const BulkArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) uint4 stage_smem[];
  __shared__ uint64_t full[kStreamMaxStages], empty[kStreamMaxStages];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int64_t c0, c1;
  block_range(a.n, c0, c1);
  const int n_stage = static_cast<int>((c1 - c0 + a.stage_chunks - 1) / a.stage_chunks);
  const uint64_t policy = a.evict_first ? tma::evict_first_policy() : 0;
  const bool producer_mode = a.mode == static_cast<int>(StreamMethod::Refill::kProducer);
  const bool copies_only = a.mode == static_cast<int>(StreamMethod::Refill::kCopiesOnly);
  // One warp issues stage i: lane 0 announces its bytes, the lanes issue its copies.
  auto issue = [&](int i) {
    const int slot = i % a.stages;
    const int64_t first = c0 + static_cast<int64_t>(i) * a.stage_chunks;
    const int len = static_cast<int>(min(static_cast<int64_t>(a.stage_chunks), c1 - first));
    if (lane == 0) tma::arrive_expect_tx(&full[slot], static_cast<uint32_t>(len) * 16u);
    __syncwarp();
    uint4* dst = stage_smem + static_cast<int64_t>(slot) * a.stage_chunks;
    for (int c = lane * a.copy_chunks; c < len; c += 32 * a.copy_chunks) {
      const uint32_t bytes = static_cast<uint32_t>(min(a.copy_chunks, len - c)) * 16u;
      if (a.evict_first)
        tma::load_1d(dst + c, a.w + first + c, bytes, &full[slot], policy);
      else
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
            "[%3];\n" ::"r"(tma::smem_addr(dst + c)),
            "l"(a.w + first + c), "r"(bytes), "r"(tma::smem_addr(&full[slot]))
            : "memory");
    }
  };
  if (threadIdx.x == 0) {
    for (int s = 0; s < a.stages; ++s) {
      tma::barrier_init(&full[s], 1);
      tma::barrier_init(&empty[s], static_cast<uint32_t>(a.consumers));
    }
    tma::fence_barrier_init();
  }
  __syncthreads();
  float acc = 0.0f;
  const int n_threads = a.consumers * 32;
  auto consume_stage = [&](int i) {
    const int slot = i % a.stages;
    const int64_t first = c0 + static_cast<int64_t>(i) * a.stage_chunks;
    const int len = static_cast<int>(min(static_cast<int64_t>(a.stage_chunks), c1 - first));
    const uint4* st = stage_smem + static_cast<int64_t>(slot) * a.stage_chunks;
    for (int c = threadIdx.x; c < len; c += n_threads) acc = consume16(st[c], acc);
  };

  if (copies_only) {
    for (int i = 0; i < min(a.stages, n_stage); ++i) issue(i);
    for (int i = 0; i < n_stage; ++i) {
      tma::wait(&full[i % a.stages], static_cast<uint32_t>((i / a.stages) & 1));
      if (i + a.stages < n_stage) issue(i + a.stages);
    }
  } else if (producer_mode) {
    if (warp == a.consumers) {
      for (int i = 0; i < n_stage; ++i) {
        if (i >= a.stages)
          tma::wait(&empty[i % a.stages], static_cast<uint32_t>((i / a.stages - 1) & 1));
        issue(i);
      }
    } else {
      for (int i = 0; i < n_stage; ++i) {
        tma::wait(&full[i % a.stages], static_cast<uint32_t>((i / a.stages) & 1));
        consume_stage(i);
        __syncwarp();
        if (lane == 0) tma::arrive(&empty[i % a.stages]);
      }
    }
  } else {
    if (warp == 0)
      for (int i = 0; i < min(a.stages, n_stage); ++i) issue(i);
    for (int i = 0; i < n_stage; ++i) {
      tma::wait(&full[i % a.stages], static_cast<uint32_t>((i / a.stages) & 1));
      consume_stage(i);
      __syncthreads();
      if (warp == 0 && i + a.stages < n_stage) issue(i + a.stages);
    }
  }
  sink(acc, a.out);
#else
  __trap();  // bench_stream_gbps checks for sm_90
#endif
}

// cp.async: thread t copies and later reads chunks t, t + T, ... of each stage, so it waits only
// for its own copies (wait_group S - 1) and no barrier is needed.
template <int S>
__global__ void __launch_bounds__(512)
    stream_cp_async_kernel(const uint4* w, int64_t n, int stage_chunks, float* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) uint4 stage_smem[];
  int64_t c0, c1;
  block_range(n, c0, c1);
  const int n_stage = static_cast<int>((c1 - c0 + stage_chunks - 1) / stage_chunks);
  auto issue = [&](int i) {
    if (i < n_stage) {
      const int64_t first = c0 + static_cast<int64_t>(i) * stage_chunks;
      const int len = static_cast<int>(min(static_cast<int64_t>(stage_chunks), c1 - first));
      uint4* dst = stage_smem + static_cast<int64_t>(i % S) * stage_chunks;
      for (int c = threadIdx.x; c < len; c += blockDim.x)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(tma::smem_addr(dst + c)),
                     "l"(w + first + c)
                     : "memory");
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };
  for (int i = 0; i < S - 1; ++i) issue(i);
  float acc = 0.0f;
  for (int i = 0; i < n_stage; ++i) {
    issue(i + S - 1);
    asm volatile("cp.async.wait_group %0;\n" ::"n"(S - 1) : "memory");
    const int64_t first = c0 + static_cast<int64_t>(i) * stage_chunks;
    const int len = static_cast<int>(min(static_cast<int64_t>(stage_chunks), c1 - first));
    const uint4* st = stage_smem + static_cast<int64_t>(i % S) * stage_chunks;
    for (int c = threadIdx.x; c < len; c += blockDim.x) acc = consume16(st[c], acc);
  }
  sink(acc, out);
#else
  __trap();
#endif
}

// ---- A decode step's weight stream as one persistent kernel (a megakernel's skeleton) ----------
// One block per SM; a producer warp streams the block's share of every phase's weights, layer after
// layer, through a ring of stages without ever waiting for data (weights do not depend on it), so
// it runs ahead across phase boundaries as far as the ring allows. The consumer warps start each
// phase only once every block has finished the previous one (a grid barrier on a global counter),
// then read the phase's input vector (L2) and multiply their stages into it. Phases a layer: q|k|v,
// attention (no weights: the barrier only), o, gate|up, down.
//
// With chunk counters instead (PhasedSync::kChunks) a phase's input is `chunks` K chunks, each
// with its own counter: block b's outputs are the b-th G-th of the phase's rows, so it adds one to
// the counter of every chunk those rows fall in, and the next phase's consumers wait for a chunk's
// writers (a few blocks, not all G) just before their first stage of that chunk (a block's share
// streamed K chunk by K chunk, its stages spread evenly over the chunks), loading only the chunks
// found done. Warp 0's lanes poll 32 counters at once and take every chunk already done, so a
// block behind its writers pays one round trip a phase, not one a chunk (polling chunk by chunk,
// session 59's first H100 run, took 74-98 us a layer). The attention phase (no weights) waits for
// one chunk, its heads'. This is the dependency a GEMV really has (output row r needs every K chunk
// of its input, each from a few blocks of the phase before) without a barrier across the grid.

// The chunks of a phase's output that block b of g writes, [first, last]; and how many blocks
// write chunk c. Block b's rows are [b / g, (b + 1) / g) of the whole, chunk c's [c / n, (c + 1) /
// n).
__device__ __forceinline__ int chunk_first(int b, int g, int n) { return b * n / g; }
__device__ __forceinline__ int chunk_last(int b, int g, int n) { return ((b + 1) * n - 1) / g; }
__device__ __forceinline__ unsigned chunk_writers(int c, int g, int n) {
  return static_cast<unsigned>(((c + 1) * g - 1) / n - c * g / n + 1);
}

// *counter, with acquire semantics at GPU scope.
__device__ __forceinline__ unsigned load_acquire(const unsigned* counter) {
  unsigned seen;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(seen) : "l"(counter) : "memory");
  return seen;
}

// Spins (one thread) until *counter >= target.
__device__ __forceinline__ void wait_counter(const unsigned* counter, unsigned target) {
  while (load_acquire(counter) < target) {
  }
}

struct PhasedArgs {
  const uint4* w;
  const uint4* x;  // an input vector of up to kPhasedMaxK elements (L2-resident)
  int64_t phase_chunks[kPhasedPhases];  // 16-byte chunks of each phase's weight
  int phase_k[kPhasedPhases];           // input length of each phase (elements)
  int layers;
  int stage_chunks;
  int stages;
  PhasedSync sync;
  int chunks;         // kChunks: K chunks a phase's input
  unsigned* counter;  // kGrid: one; kChunks: layers x kPhasedPhases x chunks, zeroed a launch
  float* out;
};

template <int kConsumers>
__global__ void __launch_bounds__(32 * (kConsumers + 1), 1)
    stream_phased_kernel(const PhasedArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) uint4 stage_smem[];
  __shared__ uint64_t full[kStreamMaxStages], empty[kStreamMaxStages];
  __shared__ __align__(16) uint4 xs[kPhasedMaxK / 8];
  __shared__ int ready_s;  // kChunks: the input's chunks found done, from warp 0 to the rest
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < a.stages; ++s) {
      tma::barrier_init(&full[s], 1);
      tma::barrier_init(&empty[s], kConsumers);
    }
    tma::fence_barrier_init();
  }
  __syncthreads();
  const uint64_t policy = tma::evict_first_policy();
  if (warp == kConsumers) {
    // The producer: every stage of every phase of every layer, in order.
    int i = 0;
    int64_t layer_off = 0;
    for (int l = 0; l < a.layers; ++l) {
      int64_t off = layer_off;
      for (int p = 0; p < kPhasedPhases; ++p) {
        int64_t c0, c1;
        block_range(a.phase_chunks[p], c0, c1);
        for (int64_t first = c0; first < c1; first += a.stage_chunks, ++i) {
          const int slot = i % a.stages;
          const int len = static_cast<int>(min(static_cast<int64_t>(a.stage_chunks), c1 - first));
          if (i >= a.stages) tma::wait(&empty[slot], static_cast<uint32_t>((i / a.stages - 1) & 1));
          if (lane == 0) {
            tma::arrive_expect_tx(&full[slot], static_cast<uint32_t>(len) * 16u);
            tma::load_1d(stage_smem + static_cast<int64_t>(slot) * a.stage_chunks,
                         a.w + off + first, static_cast<uint32_t>(len) * 16u, &full[slot], policy);
          }
          __syncwarp();
        }
        off += a.phase_chunks[p];
      }
      layer_off = off;
    }
    return;
  }
  // The consumers.
  const int tid = threadIdx.x, n_threads = kConsumers * 32;
  const int g = static_cast<int>(gridDim.x), b = static_cast<int>(blockIdx.x), n_chunks = a.chunks;
  float acc = 0.0f;
  int i = 0;
  unsigned target = 0;
  for (int l = 0; l < a.layers; ++l) {
    for (int p = 0; p < kPhasedPhases; ++p) {
      const int kc = a.phase_k[p] / 8;
      const int t = l * kPhasedPhases + p;  // this phase's index in the step
      const int x_first = tid % kc, x_step = n_threads % kc;
      if (a.sync == PhasedSync::kGrid) {
        // Wait until every block has finished the phase before.
        if (tid == 0) wait_counter(a.counter, target);
        asm volatile("bar.sync 1, %0;\n" ::"r"(n_threads) : "memory");
      }
      // Chunks from .. to of this phase's input (of n_chunks) into xs, then a consumer barrier.
      auto load_x = [&](int from, int to) {
        for (int e = from * kc / n_chunks + tid; e < (to + 1) * kc / n_chunks; e += n_threads)
          xs[e] = a.x[e];
        asm volatile("bar.sync 1, %0;\n" ::"r"(n_threads) : "memory");
      };
      if (a.sync != PhasedSync::kChunks) load_x(0, n_chunks - 1);
      // kChunks: chunk c of the input once its writers in the phase before are done (none before
      // the step's first phase), then that chunk of the input.
      auto chunk_ready = [&](int c) {
        if (tid == 0 && t > 0)
          wait_counter(a.counter + static_cast<int64_t>(t - 1) * n_chunks + c,
                       chunk_writers(c, g, n_chunks));
        asm volatile("bar.sync 1, %0;\n" ::"r"(n_threads) : "memory");
        load_x(c, c);
      };
      int64_t c0, c1;
      block_range(a.phase_chunks[p], c0, c1);
      const int n_stages = static_cast<int>((c1 - c0 + a.stage_chunks - 1) / a.stage_chunks);
      // kChunks, the GEMV phases: the input's chunks up to `need` (and any after it already done),
      // polled 32 at a time by warp 0's lanes so that one round trip finds every finished chunk;
      // then those chunks of the input.
      int ready = -1;  // the input's chunks 0 .. ready are loaded
      auto prefix_ready = [&](int need) {
        if (warp == 0) {
          int w = t > 0 ? ready : n_chunks - 1;
          while (w < need) {
            const int c = w + 1 + lane;
            const unsigned seen =
                c < n_chunks ? load_acquire(a.counter + static_cast<int64_t>(t - 1) * n_chunks + c)
                             : 0u;
            const unsigned done =
                __ballot_sync(0xffffffffu, c < n_chunks && seen >= chunk_writers(c, g, n_chunks));
            w += done == 0xffffffffu ? 32 : __ffs(~done) - 1;
          }
          if (lane == 0) ready_s = min(w, n_chunks - 1);
        }
        asm volatile("bar.sync 1, %0;\n" ::"r"(n_threads) : "memory");
        const int now = ready_s;
        load_x(ready + 1, now);
        ready = now;
      };
      if (a.sync == PhasedSync::kChunks && n_stages == 0) chunk_ready(chunk_first(b, g, n_chunks));
      for (int s = 0; s < n_stages; ++s, ++i) {
        if (a.sync == PhasedSync::kChunks) {
          const int need = s * n_chunks / n_stages;
          if (ready < need) prefix_ready(need);
        }
        const int64_t first = c0 + static_cast<int64_t>(s) * a.stage_chunks;
        const int slot = i % a.stages;
        const int len = static_cast<int>(min(static_cast<int64_t>(a.stage_chunks), c1 - first));
        tma::wait(&full[slot], static_cast<uint32_t>((i / a.stages) & 1));
        const uint4* st = stage_smem + static_cast<int64_t>(slot) * a.stage_chunks;
        // The input element of weight chunk c is c mod kc, stepped without a division.
        for (int c = tid, xi = x_first; c < len;
             c += n_threads, xi += x_step, xi -= xi >= kc ? kc : 0) {
          float xf[8];
          unpack16<bf16>(xs[xi], xf);
          float wf[8];
          unpack16<bf16>(st[c], wf);
#pragma unroll
          for (int e = 0; e < 8; ++e) acc = fmaf(wf[e], xf[e], acc);
        }
        __syncwarp();
        if (lane == 0) tma::arrive(&empty[slot]);
      }
      // Every output needs the whole input: the chunks a short share did not reach.
      if (a.sync == PhasedSync::kChunks && n_stages > 0 && ready < n_chunks - 1)
        prefix_ready(n_chunks - 1);
      // This block's share of the phase is done: its (one) output, then its arrival.
      acc = warp_sum(acc);
      if (lane == 0) sink(acc, a.out);
      target += gridDim.x;
      if (a.sync != PhasedSync::kNone) {
        asm volatile("bar.sync 1, %0;\n" ::"r"(n_threads) : "memory");
        if (tid == 0) {
          __threadfence();
          if (a.sync == PhasedSync::kGrid) {
            atomicAdd(a.counter, 1u);
          } else {
            unsigned* mine = a.counter + static_cast<int64_t>(t) * n_chunks;
            for (int c = chunk_first(b, g, n_chunks); c <= chunk_last(b, g, n_chunks); ++c)
              atomicAdd(mine + c, 1u);
          }
        }
      }
    }
  }
#else
  __trap();
#endif
}

bool has_sm90_code(const void* kernel) {
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, kernel) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.ptxVersion >= 90 && vela::cuda::device_properties().major >= 9;
}

}  // namespace

double bench_stream_gbps(const StreamMethod& m, size_t bytes) {
  VELA_CHECK(bytes >= (1u << 20) && bytes % 16 == 0,
             "stream bytes must be >= 1 MiB and a multiple of 16");
  VELA_CHECK(m.blocks_per_sm >= 1 && m.blocks_per_sm <= 8, "blocks_per_sm must be 1..8");
  const Device device = Device::cuda(vela::cuda::current_device());
  Tensor buf = Tensor::empty({static_cast<int64_t>(bytes)}, DType::kU8, device);
  VELA_CUDA_CHECK(cudaMemsetAsync(buf.data_ptr(), 0x3c, bytes, current_stream()));
  Tensor out = Tensor::zeros({1024}, DType::kF32, device);
  const auto* w = static_cast<const uint4*>(buf.data_ptr());
  const int64_t n = static_cast<int64_t>(bytes / 16);
  float* o = static_cast<float*>(out.data_ptr());
  const unsigned grid = static_cast<unsigned>(std::min(1024, n_sms() * m.blocks_per_sm));
  const int stage_chunks = m.stage_kb * 64;
  std::function<void()> run;
  switch (m.kind) {
    case StreamMethod::Kind::kRegister: {
      void (*k)(const uint4*, int64_t, float*) = m.loads <= 2   ? stream_register_kernel<2>
                                                 : m.loads <= 4 ? stream_register_kernel<4>
                                                 : m.loads <= 8 ? stream_register_kernel<8>
                                                                : stream_register_kernel<16>;
      run = [=] { k<<<grid, 256, 0, current_stream()>>>(w, n, o); };
      break;
    }
    case StreamMethod::Kind::kBulk: {
      VELA_CHECK_T(Unsupported, has_sm90_code(reinterpret_cast<const void*>(stream_bulk_kernel)),
                   "bulk copies need an sm_90 device and build");
      VELA_CHECK(m.stages >= 1 && m.stages <= kStreamMaxStages, "stages must be 1..16");
      VELA_CHECK(m.warps >= 1 && m.warps <= 16, "warps must be 1..16");
      const int copy_chunks = m.copy_bytes > 0 ? m.copy_bytes / 16 : stage_chunks;
      VELA_CHECK(copy_chunks >= 1 && m.copy_bytes % 16 == 0, "copy_bytes must be a multiple of 16");
      const BulkArgs a{w,
                       n,
                       stage_chunks,
                       m.stages,
                       copy_chunks,
                       static_cast<int>(m.refill),
                       m.warps,
                       m.evict_first,
                       o};
      const int threads = m.refill == StreamMethod::Refill::kCopiesOnly ? 32
                          : m.refill == StreamMethod::Refill::kProducer ? 32 * (m.warps + 1)
                                                                        : 32 * m.warps;
      const size_t smem = static_cast<size_t>(m.stages) * stage_chunks * 16;
      opt_in_smem(stream_bulk_kernel, smem);
      run = [=] { stream_bulk_kernel<<<grid, threads, smem, current_stream()>>>(a); };
      break;
    }
    case StreamMethod::Kind::kCpAsync: {
      void (*k)(const uint4*, int64_t, int, float*) = m.stages <= 2   ? stream_cp_async_kernel<2>
                                                      : m.stages <= 4 ? stream_cp_async_kernel<4>
                                                                      : stream_cp_async_kernel<8>;
      const int stages = m.stages <= 2 ? 2 : m.stages <= 4 ? 4 : 8;
      const size_t smem = static_cast<size_t>(stages) * stage_chunks * 16;
      opt_in_smem(k, smem);
      const int threads = 32 * std::clamp(m.warps, 1, 16);
      run = [=] { k<<<grid, threads, smem, current_stream()>>>(w, n, stage_chunks, o); };
      break;
    }
  }
  const double ms = time_ms([&] {
    run();
    VELA_CUDA_CHECK_LAUNCH();
  });
  return static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
}

PhasedStreamResult bench_phased_stream(const PhasedStreamShape& shape, int stage_kb, int stages,
                                       PhasedSync sync, int chunks, int consumer_warps) {
  VELA_CHECK(shape.layers >= 1 && shape.hidden % 8 == 0 && shape.inter % 8 == 0 &&
                 shape.qkv_rows >= 1 && shape.hidden <= kPhasedMaxK && shape.inter <= kPhasedMaxK,
             "phased stream: bad shape");
  VELA_CHECK(stages >= 2 && stages <= kStreamMaxStages, "stages must be 2..16");
  VELA_CHECK(chunks >= 1 && chunks <= 64, "chunks must be 1..64, got ", chunks);
  VELA_CHECK(consumer_warps == 8 || consumer_warps == 16, "consumer warps must be 8 or 16, got ",
             consumer_warps);
  void (*kernel)(const PhasedArgs) =
      consumer_warps == 8 ? stream_phased_kernel<8> : stream_phased_kernel<16>;
  const int threads = 32 * (consumer_warps + 1);
  VELA_CHECK_T(Unsupported, has_sm90_code(reinterpret_cast<const void*>(kernel)),
               "the phased stream needs an sm_90 device and build");
  const int64_t h = shape.hidden, f = shape.inter;
  const int64_t phase_elems[kPhasedPhases] = {shape.qkv_rows * h, 0, h * h, 2 * f * h, h * f};
  const int phase_k[kPhasedPhases] = {static_cast<int>(h), 8, static_cast<int>(h),
                                      static_cast<int>(h), static_cast<int>(f)};
  int64_t layer_elems = 0;
  for (int64_t e : phase_elems) layer_elems += e;
  const int64_t total = layer_elems * shape.layers;
  const Device device = Device::cuda(vela::cuda::current_device());
  Tensor buf = Tensor::empty({total * 2}, DType::kU8, device);
  VELA_CUDA_CHECK(
      cudaMemsetAsync(buf.data_ptr(), 0x3c, static_cast<size_t>(total * 2), current_stream()));
  Tensor x = Tensor::zeros({kPhasedMaxK * 2}, DType::kU8, device);
  Tensor out = Tensor::zeros({1024}, DType::kF32, device);
  const int64_t n_counters =
      sync == PhasedSync::kChunks ? int64_t{shape.layers} * kPhasedPhases * chunks : 1;
  Tensor counter = Tensor::zeros({n_counters}, DType::kI32, device);
  PhasedArgs a{};
  a.w = static_cast<const uint4*>(buf.data_ptr());
  a.x = static_cast<const uint4*>(x.data_ptr());
  for (int p = 0; p < kPhasedPhases; ++p) {
    a.phase_chunks[p] = phase_elems[p] / 8;
    a.phase_k[p] = phase_k[p];
  }
  a.layers = shape.layers;
  a.stage_chunks = stage_kb * 64;
  a.stages = stages;
  a.sync = sync;
  a.chunks = chunks;
  a.counter = static_cast<unsigned*>(counter.data_ptr());
  a.out = static_cast<float*>(out.data_ptr());
  const size_t smem = static_cast<size_t>(stages) * a.stage_chunks * 16;
  opt_in_smem(kernel, smem);
  int per_sm = 0;
  VELA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
  VELA_CHECK(per_sm >= 1, "phased stream: ", stages, " stages of ", stage_kb,
             " KiB do not fit an SM");
  const unsigned grid = static_cast<unsigned>(n_sms());  // one block an SM: all co-resident
  void* counter_ptr = counter.data_ptr();
  const double ms = time_ms([&] {
    VELA_CUDA_CHECK(
        cudaMemsetAsync(counter_ptr, 0, static_cast<size_t>(n_counters) * 4, current_stream()));
    kernel<<<grid, threads, smem, current_stream()>>>(a);
    VELA_CUDA_CHECK_LAUNCH();
  });
  PhasedStreamResult r;
  r.us_per_layer = ms * 1e3 / shape.layers;
  r.gbps = static_cast<double>(total * 2) / (ms * 1e-3) / 1e9;
  return r;
}

}  // namespace vela::ops::cuda
