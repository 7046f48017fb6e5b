// The one-row decode GEMV as a weight ring (sm_90; included by gemv_fused.cu and gemv.cu): the
// same products and epilogues as gemv_kernel.cuh's kernel at M = 1, with the weights streamed by
// the copy engine instead of by the warps.
//
// One block per SM owns a contiguous range of output units (a column, or for the pair epilogues a
// gate / up pair or a rotary dimension pair) and walks it in stages of R units. Warp 0 issues each
// stage's weight rows as bulk copies (cp.async.bulk, global -> shared, completing on the stage's
// mbarrier) into a ring of S stage buffers (up to 96 KB), so a block keeps up to S stages of
// loads in flight with no registers held for them. The first S stages are issued before
// pdl_wait(): under programmatic dependent launch the ring fills while the previous kernel still
// runs, and a GEMV whose share of the weight fits the ring (q|k|v and o at bench-1b's shapes) has
// all of it in shared memory when its input arrives. The kernel then lets its dependent launch
// at once (before its own wait, not after: `early_trigger`): with one ~100 KB block per SM two
// ring GEMVs fit an SM, so the next GEMV's ring fills during this one. That is the point of the
// design: the step's weight stream never waits for a kernel boundary (the register-streaming
// kernel, capped at one block per SM to make room, kept too few loads in flight: session 29).
//
// Warps split each unit's K as the register kernel's W parts do (lane l of part p takes the
// 16-byte chunks p * 32 + l + j * 32 * W). W depends on K alone here (the most warps that still
// get 1.5 KB of a row each), so every ring form at one K sums alike and the fused rotary GEMV gives
// the bits of the plain one plus the rotary op; against the register kernel, whose W depends on
// the output width too and whose RMSNorm sum is per warp, results differ in fp32 summation order.
// The input row is held in registers (up to 8 chunks per lane: K <= 2048 W), normalised first
// where the form has the RMSNorm prologue (the block's sum of squares; round(x * rstd * w) as
// rms_norm stores it).
#pragma once

#include <vector>

#include "ops/cuda/gemv_kernel.cuh"
#include "ops/cuda/tma.cuh"

namespace vela::ops::cuda::gemv_detail {

constexpr int kRingMaxStages = 8;
constexpr size_t kRingBytes = 96 * 1024;  // the stage buffers of one block (VELA_GEMV_RING_KB)
constexpr int kRingX = 8;                 // input chunks a lane holds (K <= 2048 * W)

struct RingArgs {
  GemvArgs g;
  int stages;          // S: stage buffers in the ring (1..8)
  bool early_trigger;  // pdl_launch_dependents() before pdl_wait() (VELA_GEMV_RING_EARLY)
  bool coalesce;       // adjacent weight rows of a stage as one copy (VELA_GEMV_RING_COALESCE)
  bool producer;       // a ninth warp refills each stage once its readers release it
                       // (VELA_GEMV_RING_PRODUCER), instead of warp 0 after a block barrier
};

// Threads of a ring block: kGemvWarps consumer warps, plus the producer warp where ra.producer.
constexpr int kRingThreads = (kGemvWarps + 1) * 32;

// Warps per unit at row length k: about 1.5 KB of a bf16/f16 row per warp, 1..8.
inline int ring_parts(int64_t k) {
  const int64_t row_bytes = 2 * k;
  int w = 1;
  while (w < kGemvWarps && row_bytes / (2 * w) >= 1536) w *= 2;
  return w;
}

// Epilogue of unit u (row 0 of a): r0, r1 = the unit's one or two dot products.
template <typename T, typename TC, GemvOut OUT>
__device__ __forceinline__ void ring_store(const GemvArgs& args, int64_t u, float r0, float r1) {
  if constexpr (OUT == GemvOut::kRotary) {
    store_rotary<T>(args.rot, 0, u, to_float(from_float<T>(args.alpha * r0)),
                    to_float(from_float<T>(args.alpha * r1)));
  } else if constexpr (OUT == GemvOut::kSiluMul) {
    const float g = to_float(from_float<T>(args.alpha * r0));
    const float up = to_float(from_float<T>(args.alpha * r1));
    static_cast<TC*>(args.c)[u] = from_float<TC>(g / (1.0f + expf(-g)) * up);
  } else if constexpr (OUT == GemvOut::kAdd) {
    TC* out = static_cast<TC*>(args.c) + u;
    const float y = to_float(from_float<T>(args.alpha * r0));
    *out = from_float<TC>(y + to_float(*out));
  } else {
    static_cast<TC*>(args.c)[u] = from_float<TC>(args.alpha * r0);
  }
}

// W warps per unit, R = 8 / W units per stage.
template <typename T, typename TC, int W, GemvIn IN, GemvOut OUT>
static __global__ void __launch_bounds__(kRingThreads, 2) gemv_ring_kernel(const RingArgs ra) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr bool kPairs = OUT == GemvOut::kSiluMul || OUT == GemvOut::kRotary;
  constexpr int kRowsPerUnit = kPairs ? 2 : 1;
  constexpr int R = kGemvWarps / W;
  constexpr int kStageRows = R * kRowsPerUnit;  // stage row r = unit r % R, pair half r / R
  static_assert(kStageRows <= 32, "a lane of warp 0 issues each row's copy");
  extern __shared__ __align__(128) unsigned char ring_smem[];
  __shared__ uint64_t full[kRingMaxStages], empty[kRingMaxStages];
  __shared__ float partial[2][kGemvWarps][kRowsPerUnit];
  __shared__ float red[32];
  const GemvArgs& args = ra.g;
  const int stages = ra.stages;
  // With ra.producer, warp kGemvWarps issues every stage and each consumer warp releases a stage
  // on its `empty` barrier once it has read it, so a slot is refilled as soon as its last reader
  // is done (a unit's W warps meet on a named barrier for their partial sums); otherwise warp 0
  // refills it after a block barrier.
  const bool producer = ra.producer;
  const int issuer = producer ? kGemvWarps : 0;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int unit = warp / W, part = warp % W;
  const int64_t k = args.k, nv = k / kGemvVec, units = args.n;
  const uint32_t row_bytes = static_cast<uint32_t>(k * sizeof(T));
  const int64_t stage_elems = static_cast<int64_t>(kStageRows) * k;
  T* ring = reinterpret_cast<T*>(ring_smem);
  // This block's units [u0, u1), balanced to within one across the grid.
  const int64_t u0 = units * blockIdx.x / gridDim.x, u1 = units * (blockIdx.x + 1) / gridDim.x;
  const int n_stage = static_cast<int>((u1 - u0 + R - 1) / R);

  uint64_t policy = 0;
  if (warp == issuer) policy = tma::evict_first_policy();
  // Warp 0: stage i's rows into slot i % S (lane r issues stage row r; with ra.coalesce, lane r
  // issues stage rows r .. e - 1 as one copy where their weight rows follow each other in memory
  // and r is the first of them: the same bytes in the same places, fewer and larger copies).
  auto issue = [&](int i) {
    const int slot = i % stages;
    const int64_t first = u0 + static_cast<int64_t>(i) * R;
    const int nu = static_cast<int>(min(static_cast<int64_t>(R), u1 - first));
    if (lane == 0)
      tma::arrive_expect_tx(&full[slot], static_cast<uint32_t>(nu * kRowsPerUnit) * row_bytes);
    __syncwarp();
    const int j = lane % R, half = lane / R;
    const bool valid = lane < kStageRows && j < nu;
    const int64_t row = !valid ? -2 : kPairs ? pair_row<OUT>(args, first + j, half) : first + j;
    uint32_t bytes = row_bytes;
    bool issues = valid;
    if (ra.coalesce) {
      const int64_t prev = __shfl_up_sync(0xffffffffu, row, 1);
      issues = valid && (j == 0 || args.ldw != k || prev != row - 1);
      // The run ends at the next lane that starts one or holds no row.
      const unsigned cut = __ballot_sync(0xffffffffu, issues || !valid);
      const unsigned after = cut & ~((2u << lane) - 1u);
      bytes = static_cast<uint32_t>((after != 0u ? __ffs(after) - 1 : 32) - lane) * row_bytes;
    }
    if (issues)
      tma::load_1d(ring + slot * stage_elems + static_cast<int64_t>(lane) * k,
                   static_cast<const T*>(args.w) + row * args.ldw, bytes, &full[slot], policy);
  };

  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      tma::barrier_init(&full[s], 1);
      tma::barrier_init(&empty[s], kGemvWarps);
    }
    tma::fence_barrier_init();
  }
  __syncthreads();
  if (warp == issuer)
    for (int i = 0; i < min(stages, n_stage); ++i) issue(i);
  if (ra.early_trigger) pdl_launch_dependents();
  pdl_wait();
  if (!ra.early_trigger) pdl_launch_dependents();

  // The input row: lane chunks c = part * 32 + lane + j * 32 * W, normalised where kRmsNorm.
  const T* a = static_cast<const T*>(args.a);
  uint4 xr[kRingX];
#pragma unroll
  for (int j = 0; j < kRingX; ++j) {
    const int64_t c = part * 32 + lane + j * 32 * W;
    if (c < nv) xr[j] = *reinterpret_cast<const uint4*>(a + c * kGemvVec);
  }
  if constexpr (IN == GemvIn::kRmsNorm) {
    // Every chunk once: the sum over unit 0's warps.
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < kRingX; ++j) {
      const int64_t c = part * 32 + lane + j * 32 * W;
      if (unit == 0 && c < nv) {
        float f[kGemvVec];
        unpack16<T>(xr[j], f);
#pragma unroll
        for (int i = 0; i < kGemvVec; ++i) ss += f[i] * f[i];
      }
    }
    const float rstd = rsqrtf(block_sum(ss, red) / static_cast<float>(k) + args.eps);
#pragma unroll
    for (int j = 0; j < kRingX; ++j) {
      const int64_t c = part * 32 + lane + j * 32 * W;
      if (c < nv) {
        float f[kGemvVec], nwf[kGemvVec];
        unpack16<T>(xr[j], f);
        load_norm_w<T>(args, c * kGemvVec, nwf);
#pragma unroll
        for (int i = 0; i < kGemvVec; ++i) f[i] = f[i] * rstd * nwf[i];
        xr[j] = pack16<T>(f);
      }
    }
  }

  if (producer && warp == kGemvWarps) {
    // The producer (it took part in the RMSNorm's block sum above; no block barrier follows).
    for (int i = stages; i < n_stage; ++i) {
      tma::wait(&empty[i % stages], static_cast<uint32_t>((i / stages - 1) & 1));
      issue(i);
    }
    return;
  }
  for (int i = 0; i < n_stage; ++i) {
    const int slot = i % stages;
    tma::wait(&full[slot], static_cast<uint32_t>((i / stages) & 1));
    const T* st = ring + slot * stage_elems;
    const int64_t u = u0 + static_cast<int64_t>(i) * R + unit;
    const bool live = u < u1;
    float acc[kRowsPerUnit];
#pragma unroll
    for (int h = 0; h < kRowsPerUnit; ++h) acc[h] = 0.0f;
    if (live) {
#pragma unroll
      for (int j = 0; j < kRingX; ++j) {
        const int64_t c = part * 32 + lane + j * 32 * W;
        if (c < nv) {
          float xf[kGemvVec];
          unpack16<T>(xr[j], xf);
#pragma unroll
          for (int h = 0; h < kRowsPerUnit; ++h) {
            const uint4 wv =
                *reinterpret_cast<const uint4*>(st + (h * R + unit) * k + c * kGemvVec);
            float wf[kGemvVec];
            unpack16<T>(wv, wf);
#pragma unroll
            for (int e = 0; e < kGemvVec; ++e) acc[h] += wf[e] * xf[e];
          }
        }
      }
    }
#pragma unroll
    for (int h = 0; h < kRowsPerUnit; ++h) acc[h] = warp_sum(acc[h]);
    if constexpr (W == 1) {
      if (live && lane == 0) ring_store<T, TC, OUT>(args, u, acc[0], acc[kRowsPerUnit - 1]);
    } else if (lane == 0) {
#pragma unroll
      for (int h = 0; h < kRowsPerUnit; ++h) partial[i & 1][warp][h] = acc[h];
    }
    if (producer) {
      // This warp is done with the slot: release it; the unit's partials are in after the
      // named barrier (ids 1..R; partial[i & 1] is rewritten at i + 2, after barrier i + 1, which
      // part 0 reaches only once it has read them).
      __syncwarp();
      if (lane == 0) tma::arrive(&empty[slot]);
      if constexpr (W > 1)
        asm volatile("bar.sync %0, %1;\n" ::"r"(1 + unit), "r"(W * 32) : "memory");
    } else {
      // Every warp is done with the slot (and the partials are in): refill it.
      __syncthreads();
      if (warp == 0 && i + stages < n_stage) issue(i + stages);
    }
    if constexpr (W > 1) {
      if (live && part == 0 && lane == 0) {
        float res[kRowsPerUnit];
#pragma unroll
        for (int h = 0; h < kRowsPerUnit; ++h) {
          res[h] = 0.0f;
#pragma unroll
          for (int p = 0; p < W; ++p) res[h] += partial[i & 1][warp + p][h];
        }
        ring_store<T, TC, OUT>(args, u, res[0], res[kRowsPerUnit - 1]);
      }
    }
  }
#else
  __trap();  // launch_ring checks for sm_90
#endif
}

// Whether the one-row GEMVs may take the ring (VELA_GEMV_RING=1, or the test override; off by
// default: slower than the register kernel on the H100; launch_ring still checks for sm_90), and
// whether it lets its dependent launch before its wait (VELA_GEMV_RING_EARLY, on unless "0").
bool gemv_ring_enabled();
bool gemv_ring_early();
// Whether a stage's adjacent weight rows go as one bulk copy instead of one copy a row
// (VELA_GEMV_RING_COALESCE=1; off by default).
bool gemv_ring_coalesce();
// Whether a producer warp refills the stages as their readers release them
// (VELA_GEMV_RING_PRODUCER=1; off by default).
bool gemv_ring_producer();
// The stage buffers' bytes a block may take: kRingBytes, or VELA_GEMV_RING_KB (16..200) for the
// A/B of co-residency (two 96 KB rings fit an SM, one 160 KB ring does not).
size_t gemv_ring_bytes();

extern std::atomic<int64_t> g_ring_launches;  // gemv.cu: gemv_ring_launches (tests)

// Once per ring kernel and device: whether its loaded code is sm_90 (a build without compute_90
// code would run the JIT-compiled __trap() body) and the dynamic shared memory it may take (the
// device's opt-in limit less its static arrays); also asks for the largest shared-memory
// carveout, so that two rings share an SM.
struct RingKernelInfo {
  bool sm90 = false;
  size_t smem_cap = 0;
};
inline RingKernelInfo ring_kernel_info(void (*kernel)(RingArgs)) {
  struct Entry {
    const void* kernel;
    int device;
    RingKernelInfo info;
  };
  static thread_local std::vector<Entry> cache;
  const void* key = reinterpret_cast<const void*>(kernel);
  const int device = vela::cuda::current_device();
  for (const Entry& e : cache)
    if (e.kernel == key && e.device == device) return e.info;
  RingKernelInfo info;
  cudaFuncAttributes attr{};
  const cudaDeviceProp& prop = vela::cuda::device_properties();
  if (cudaFuncGetAttributes(&attr, kernel) == cudaSuccess) {
    info.sm90 = attr.ptxVersion >= 90 && prop.major >= 9;
    const size_t optin = prop.sharedMemPerBlockOptin;
    info.smem_cap = optin > attr.sharedSizeBytes ? optin - attr.sharedSizeBytes : 0;
  } else {
    (void)cudaGetLastError();  // no code for this device: the register kernel takes the GEMV
  }
  if (info.sm90)
    VELA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                         cudaSharedmemCarveoutMaxShared));
  cache.push_back({key, device, info});
  return info;
}

// Launches the ring form of the GEMV for args (args.m == 1); false (nothing launched) when it
// does not take them: the SiLU*up input form, no sm_90 code, a row too long for the registers or
// for two stages in the ring (plain forms K <= 16384, pair forms K <= 12288 at 96 KB), copies not
// 16-byte aligned.
template <typename T, typename TC, GemvIn IN, GemvOut OUT>
bool launch_ring(const GemvArgs& args) {
  if constexpr (IN == GemvIn::kSiluMul) {
    return false;
  } else {
    constexpr bool kPairs = OUT == GemvOut::kSiluMul || OUT == GemvOut::kRotary;
    if (args.m != 1 || !gemv_ring_enabled()) return false;
    const int64_t k = args.k, nv = k / kGemvVec;
    const int w = ring_parts(k), r = kGemvWarps / w;
    if (nv > static_cast<int64_t>(kRingX) * 32 * w) return false;
    if ((args.ldw * static_cast<int64_t>(sizeof(T))) % 16 != 0 || !is_aligned(args.w, 16) ||
        !is_aligned(args.a, 16))
      return false;
    if (args.n <= 0) return false;
    void (*kernel)(RingArgs);
    switch (w) {
      case 1:
        kernel = gemv_ring_kernel<T, TC, 1, IN, OUT>;
        break;
      case 2:
        kernel = gemv_ring_kernel<T, TC, 2, IN, OUT>;
        break;
      case 4:
        kernel = gemv_ring_kernel<T, TC, 4, IN, OUT>;
        break;
      default:
        kernel = gemv_ring_kernel<T, TC, 8, IN, OUT>;
        break;
    }
    const RingKernelInfo info = ring_kernel_info(kernel);
    if (!info.sm90) return false;
    const size_t stage_bytes = static_cast<size_t>(r) * (kPairs ? 2 : 1) * k * sizeof(T);
    const size_t budget = std::min(gemv_ring_bytes(), info.smem_cap);
    int stages = static_cast<int>(std::min<size_t>(kRingMaxStages, budget / stage_bytes));
    if (stages < 2) return false;
    int64_t grid = std::min<int64_t>(n_sms(), args.n);
    if (const int cap = g_max_grid.load(std::memory_order_relaxed); cap > 0)
      grid = std::min<int64_t>(grid, cap);
    // No more buffers than a block has stages (q|k|v and o at bench-1b's shapes: 2 and 3), so
    // the shared memory left over takes the kernels launched beside it.
    stages = static_cast<int>(std::min<int64_t>(stages, ceil_div(ceil_div(args.n, grid), r)));
    const RingArgs ra{args, stages, gemv_ring_early(), gemv_ring_coalesce(), gemv_ring_producer()};
    const size_t smem = static_cast<size_t>(stages) * stage_bytes;
    opt_in_smem(kernel, smem);
    launch_pdl(kernel, dim3(static_cast<unsigned>(grid)),
               dim3(ra.producer ? kRingThreads : kGemvWarps * 32), smem, ra);
    g_ring_launches.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
}

}  // namespace vela::ops::cuda::gemv_detail
