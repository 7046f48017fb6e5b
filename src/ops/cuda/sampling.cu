// CUDA sampling: one 1024-thread block per row runs the whole pipeline of ops/sampling.h, so a
// batch of rows is one launch with no host synchronization (graph-capturable: no allocation, all
// scratch is `work` and shared memory).
//
// Passes over a row (100k floats stream from L2 after the first): raw log-sum-exp and top
// logprobs when asked (tempered ones: after the bias, of the processed row / T); penalties (a
// count-table row fused into the copy, or a scatter of the sparse history) + bias into `work`
// when the row has them; a block argmax (the greedy token and the row max m). Sampled
// rows then:
//  - top-k / top-p: a "ladder" pass counts the tokens (and sums their weights) whose exponent
//    d = (m - l) / T lies below each of 10 fixed rungs; the tightest rung that provably holds the
//    top-k tokens, or enough mass for top-p, selects a candidate set that is compacted into
//    shared memory (<= 16384) and bitonic-sorted in (logit desc, id asc) order; the k-th key and
//    the top-p cut are then read off exactly (fixed-point prefix sums). Sets too large for shared
//    memory (near-flat rows with top-p close to 1, huge k, or a k-th logit far below a peaked
//    head) take the exact path: a search over the order-preserving keys, by bisection (one block
//    reduction per bit) or, with VELA_SAMPLE_RADIX=1, radix selects 8 bits a pass (radix_select:
//    4 passes for the k-th key, 4 for the top-p cut).
//  - the draw: warps own contiguous id segments; the per-warp kept mass locates the segment
//    holding u * mass and that warp scans it with shuffles, so the first id whose cumulative
//    weight exceeds the target is found in ascending id order, as on the CPU.
// The argmax runs first as its own wide kernel (argmax_chunks_kernel, grid chunks x rows, rows
// without penalties or bias): one 1024-thread block per row streams a 100k row from a single SM
// (~14 us for 1 or 64 rows), the chunks use every SM; the row's block then takes the max of the
// partial ranks, which is the same integer (max is exact in any order).
// Float products that the CPU rounds separately use __fmul_rn / __fsub_rn / __fdiv_rn so nvcc
// cannot contract them into FMAs.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>

#include "core/cuda/cuda_api.h"
#include "core/env.h"
#include "core/rng.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/sampling.h"

namespace vela::ops::cuda {

namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxCand = 16384;  // shared-memory candidates (128 KiB of u64)
constexpr int kRungs = 10;
constexpr size_t kCandBytes = sizeof(uint64_t) * kMaxCand;

struct SampleArgs {
  const float* logits;
  int64_t logits_stride;
  int64_t n;  // vocab
  const SampleRowParams* params;
  const int32_t* entries;  // [n_entries, 2]: bias and penalty-history ranges
  int32_t* counts;
  float* work;
  int32_t* out;
  int64_t out_stride;
  int32_t argmax_chunks;  // > 0: argmax_chunks_kernel left each unprocessed row's partial maxima
  // ops::argmax_chunks of the logits, given by the caller (the LM head's epilogue), or nullptr.
  const uint64_t* chunk_max;
  int64_t chunk_max_stride;
  int32_t n_chunk_max;
  int32_t* next_ids;  // or nullptr: each row's token also goes to next_ids[row]
};

struct ResetArgs {
  int32_t* counts;
  int64_t n;
  const int32_t* resets;
  const int32_t* entries;
};

}  // namespace

// Rung j of the ladder: an upper bound on d = (m - l) / T; the last rung is every finite logit.
static __device__ __forceinline__ float rung(int j) {
  switch (j) {
    case 0:
      return 1.0f;
    case 1:
      return 2.0f;
    case 2:
      return 4.0f;
    case 3:
      return 8.0f;
    case 4:
      return 16.0f;
    case 5:
      return 32.0f;
    case 6:
      return 64.0f;
    case 7:
      return 128.0f;
    case 8:
      return 1024.0f;
    default:
      return INFINITY;
  }
}

static __device__ __forceinline__ float sanitize(float v) { return v != v ? -INFINITY : v; }

static __device__ __forceinline__ float key_to_float(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

static __device__ __forceinline__ int32_t rank_id(uint64_t rank) {
  return static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(rank));
}

static __device__ __forceinline__ uint64_t warp_sum_u64(uint64_t v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
static __device__ __forceinline__ uint64_t warp_max_u64(uint64_t v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const uint64_t w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w > v ? w : v;
  }
  return v;
}
static __device__ __forceinline__ uint64_t warp_incl_scan_u64(uint64_t v) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint64_t w = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += w;
  }
  return v;
}

// Block-wide sum / max of a u64, returned to every thread; `red` holds kWarps values. Ends with a
// barrier, so `red` may be reused at once.
static __device__ __forceinline__ uint64_t block_sum_u64(uint64_t v, uint64_t* red) {
  v = warp_sum_u64(v);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  uint64_t s = 0;
#pragma unroll 8
  for (int w = 0; w < kWarps; ++w) s += red[w];
  __syncthreads();
  return s;
}
static __device__ __forceinline__ uint64_t block_max_u64(uint64_t v, uint64_t* red) {
  v = warp_max_u64(v);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  uint64_t s = 0;
#pragma unroll 8
  for (int w = 0; w < kWarps; ++w) s = red[w] > s ? red[w] : s;
  __syncthreads();
  return s;
}

// Calls f(i, v) for every element of p[0, n) this thread owns (ids ascending per thread), with
// NaN read as -inf. `vec4`: p is 16-byte aligned and n % 4 == 0; then each thread has kUnroll
// 16-byte loads in flight before it calls f on them (H200, 100k vocab, 1 / 64 rows: greedy
// 14.8 / 15.4 -> 14.1 / 14.6 us, top-p 136 / 839 -> 135 / 777 us, combo 899 / 907 -> 803 / 819
// us; bench/results/overlap_h200.txt). f may write the element it is given.
template <typename F>
static __device__ __forceinline__ void for_each(const float* p, int64_t n, bool vec4, F&& f) {
  if (vec4) {
    constexpr int kUnroll = 4;
    const float4* p4 = reinterpret_cast<const float4*>(p);
    const int64_t n4 = n >> 2;
    auto call = [&](int64_t j, const float4& v) {
      f(4 * j, sanitize(v.x));
      f(4 * j + 1, sanitize(v.y));
      f(4 * j + 2, sanitize(v.z));
      f(4 * j + 3, sanitize(v.w));
    };
    int64_t j = threadIdx.x;
    for (; j + (kUnroll - 1) * kThreads < n4; j += kUnroll * kThreads) {
      float4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = p4[j + u * kThreads];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) call(j + u * kThreads, v[u]);
    }
    for (; j < n4; j += kThreads) call(j, p4[j]);
  } else {
    for (int64_t i = threadIdx.x; i < n; i += kThreads) f(i, sanitize(p[i]));
  }
}

template <typename F>
static __device__ __forceinline__ uint64_t row_sum(const float* p, int64_t n, bool vec4, F&& f,
                                                   uint64_t* red) {
  uint64_t s = 0;
  for_each(p, n, vec4, [&](int64_t i, float v) { s += f(i, v); });
  return block_sum_u64(s, red);
}

// The block step of both selects: from the warp totals in red[0, kWarps), the first warp whose
// inclusive prefix exceeds target(total) into s_int[0] (-1 when none; s_int[1] = -1), the mass
// before it into red[kWarps] and the target into red[kWarps + 1]. Every thread calls it.
template <typename T>
static __device__ __forceinline__ void choose_warp(T&& target, uint64_t* red, int32_t* s_int) {
  const int lane = threadIdx.x & 31;
  __syncthreads();
  if ((threadIdx.x >> 5) == 0) {
    const uint64_t mine = red[lane];
    const uint64_t incl = warp_incl_scan_u64(mine);
    const uint64_t total = __shfl_sync(0xffffffffu, incl, 31);
    const uint64_t t = target(total);
    const unsigned hit = __ballot_sync(0xffffffffu, incl > t);
    if (lane == 0) {
      s_int[0] = hit ? __ffs(hit) - 1 : -1;
      s_int[1] = -1;
    }
    if (hit && lane == __ffs(hit) - 1) {
      red[kWarps] = incl - mine;  // mass before the chosen warp's ids
      red[kWarps + 1] = t;
    }
  }
  __syncthreads();
}

// The first id i (ascending) at which sum_{j <= i} f(j, p[j]) > target(total), where total is
// the sum over the whole row; -1 when none. Warp w owns ids [w * seg, (w + 1) * seg).
template <typename F, typename T>
static __device__ int32_t ordered_select(const float* p, int64_t n, F&& f, T&& target,
                                         uint64_t* red, int32_t* s_int) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t seg = (n + kWarps - 1) / kWarps;
  const int64_t lo = warp * seg, hi = lo + seg < n ? lo + seg : n;
  uint64_t s = 0;
  for (int64_t i = lo + lane; i < hi; i += 32) s += f(i, sanitize(p[i]));
  s = warp_sum_u64(s);
  if (lane == 0) red[warp] = s;
  choose_warp(target, red, s_int);
  const int chosen = s_int[0];
  if (warp == chosen) {
    uint64_t base = red[kWarps];
    const uint64_t t = red[kWarps + 1];
    for (int64_t c = lo; c < hi; c += 32) {
      const int64_t i = c + lane;
      const uint64_t x = i < hi ? f(i, sanitize(p[i])) : 0;
      const uint64_t incl = warp_incl_scan_u64(x);
      const unsigned hit = __ballot_sync(0xffffffffu, base + incl > t);
      if (hit) {
        if (lane == 0) s_int[1] = static_cast<int32_t>(c + __ffs(hit) - 1);
        break;
      }
      base += __shfl_sync(0xffffffffu, incl, 31);
    }
  }
  __syncthreads();
  const int32_t result = s_int[1];
  __syncthreads();
  return result;
}

// ordered_select with loads in flight and a short final scan (VELA_SAMPLE_FAST, session 43, the
// default since session 45's measurement). ordered_select walks each warp's ~3k-id segment with one
// 4-byte load in flight a lane, twice (the segment sums, then the chosen warp's scan): ~65 of the
// 80 us a temperature-sampled 100k row takes. Here warp w owns ids [w * seg, (w + 1) * seg) in
// groups of `gs` ids (a multiple of 256, at most kSelectGroups a warp), read as chunks of 128 ids
// (lane l: ids 4l .. 4l + 3 of a chunk, one 16-byte load where the row allows, 2 chunks in flight:
// more spills registers under the kernel's 64-register cap). Pass 1 stores every group's sum in
// shared memory; the block scan of the warp totals picks the warp whose ids cross the target, that
// warp's scan of its group sums picks the group, and only that group's chunks are scanned (lane
// sums, then the crossing lane's 4 ids). The sums are integers, so the id found is ordered_select's
// whatever the partition.
constexpr int kSelectGroups = 16;

template <typename F, typename T>
static __device__ int32_t ordered_select_fast(const float* p, int64_t n, bool vec4, F&& f,
                                              T&& target, uint64_t* red, int32_t* s_int,
                                              uint64_t (*s_group)[kSelectGroups]) {
  constexpr int kChunk = 128, kU = 2;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t per_warp = (n + kWarps - 1) / kWarps;
  // Groups: a multiple of kU chunks (pass 1 never reads past its group), at most kSelectGroups.
  int64_t gs = (per_warp + kSelectGroups - 1) / kSelectGroups;
  gs = (gs + kU * kChunk - 1) / (kU * kChunk) * (kU * kChunk);
  const int64_t seg = (per_warp + gs - 1) / gs * gs;
  const int n_groups = static_cast<int>(seg / gs);
  // f summed over the 4 ids of this lane in the chunk at c (ids past n weigh 0); x: each id's.
  auto load4 = [&](int64_t c, float(&v)[4]) {
    const int64_t i = c + 4 * lane;
    if (vec4 && i + 3 < n) {
      const float4 q = *reinterpret_cast<const float4*>(p + i);
      v[0] = q.x;
      v[1] = q.y;
      v[2] = q.z;
      v[3] = q.w;
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) v[e] = i + e < n ? p[i + e] : -INFINITY;
    }
  };
  auto weigh4 = [&](int64_t c, const float(&v)[4], uint64_t(&x)[4]) {
    const int64_t i = c + 4 * lane;
#pragma unroll
    for (int e = 0; e < 4; ++e) x[e] = i + e < n ? f(i + e, sanitize(v[e])) : 0;
  };
  // Pass 1: every group's sum (chunks loaded kU at a time) and the warp's total.
  const int64_t w0 = warp * seg;
  uint64_t warp_total = 0;
  for (int g = 0; g < n_groups; ++g) {
    const int64_t g0 = w0 + g * gs;
    uint64_t s = 0;
    for (int64_t c = g0; c < g0 + gs && c < n; c += kU * kChunk) {
      float v[kU][4];
#pragma unroll
      for (int u = 0; u < kU; ++u) load4(c + u * kChunk, v[u]);
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int64_t i = c + u * kChunk + 4 * lane;
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (i + e < n) s += f(i + e, sanitize(v[u][e]));
      }
    }
    s = warp_sum_u64(s);
    if (lane == 0) s_group[warp][g] = s;
    warp_total += s;
  }
  if (lane == 0) red[warp] = warp_total;
  choose_warp(target, red, s_int);
  if (warp == s_int[0]) {
    const uint64_t t = red[kWarps + 1];
    const uint64_t gsum = lane < n_groups ? s_group[warp][lane] : 0;
    const uint64_t gincl = warp_incl_scan_u64(gsum);
    const unsigned ghit = __ballot_sync(0xffffffffu, red[kWarps] + gincl > t);  // never 0 here
    if (ghit) {
      const int g = __ffs(ghit) - 1;
      uint64_t base = red[kWarps] + __shfl_sync(0xffffffffu, gincl - gsum, g);
      const int64_t g0 = w0 + g * gs;
      for (int64_t c = g0; c < g0 + gs && c < n; c += kChunk) {
        float v[4];
        uint64_t x[4];
        load4(c, v);
        weigh4(c, v, x);
        const uint64_t mine = x[0] + x[1] + x[2] + x[3];
        const uint64_t incl = warp_incl_scan_u64(mine);
        const unsigned hit = __ballot_sync(0xffffffffu, base + incl > t);
        if (hit) {
          if (lane == __ffs(hit) - 1) {
            uint64_t acc = base + incl - mine;
            int e = 0;
            while (e < 3 && acc + x[e] <= t) acc += x[e++];
            s_int[1] = static_cast<int32_t>(c + 4 * lane + e);
          }
          break;
        }
        base += __shfl_sync(0xffffffffu, incl, 31);
      }
    }
  }
  __syncthreads();
  const int32_t result = s_int[1];
  __syncthreads();
  return result;
}

// Sum of v (< 2^41) over the lanes of `peers` (who all call this with the same mask), as two
// 32-bit warp reductions of 20-bit halves (each sum < 2^26).
static __device__ __forceinline__ uint64_t reduce_add_u41(unsigned peers, uint64_t v) {
  const unsigned lo = __reduce_add_sync(peers, static_cast<unsigned>(v & 0xfffffu));
  const unsigned hi = __reduce_add_sync(peers, static_cast<unsigned>(v >> 20));
  return (static_cast<uint64_t>(hi) << 20) + lo;
}

// Sums over the ids above the key radix_select found (c its criterion, s a second quantity
// histogrammed alongside) and of s at that key.
struct RadixSums {
  uint64_t c_above, s_above, s_at;
};

// The exact slow path's search: the largest key t with C(t) >= goal, where C(t) sums cf(v, key)
// (< 2^41, >= 0, so C falls as t grows; C(0) >= goal is the caller's promise) over the ids whose
// sample_key is >= t. Four passes over the row, 8 bits of t each: a pass histograms cf, and sf
// beside it, over the next 8 bits of the keys whose higher bits equal t's so far, and warp 0 picks
// the largest digit whose bins (plus everything above t's prefix) still reach the goal. The sums
// are integers, so t is what a bisection one bit at a time finds (which this replaced: 32 passes a
// key). A warp adds to a bin once per distinct digit (match_any, then a reduction over the
// peers), so rows whose keys share a few bins do not serialise on shared-memory atomics. hist:
// 516 u64 of shared memory, free during the call. Every thread calls it.
template <typename FC, typename FS>
static __device__ uint32_t radix_select(const float* p, int64_t n, bool vec4, FC&& cf, FS&& sf,
                                        uint64_t goal, uint64_t* hist, RadixSums& out) {
  const int lane = threadIdx.x & 31;
  uint32_t t = 0;
  uint64_t c_above = 0, s_above = 0, s_at = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 512; i += kThreads) hist[i] = 0;
    __syncthreads();
    const uint64_t high = static_cast<uint64_t>(t) >> (shift + 8);
    for_each(p, n, vec4, [&](int64_t, float v) {
      const uint32_t key = sample_key(v);
      if ((static_cast<uint64_t>(key) >> (shift + 8)) != high) return;
      const uint64_t c = cf(v, key), s = sf(v, key);
      if ((c | s) == 0) return;
      const uint32_t dig = (key >> shift) & 255u;
      const unsigned peers = __match_any_sync(__activemask(), dig);
      const uint64_t cs = reduce_add_u41(peers, c), ss = reduce_add_u41(peers, s);
      if (lane == __ffs(peers) - 1) {
        if (cs != 0) atomicAdd(reinterpret_cast<unsigned long long*>(hist + dig), cs);
        if (ss != 0) atomicAdd(reinterpret_cast<unsigned long long*>(hist + 256 + dig), ss);
      }
    });
    __syncthreads();
    if (threadIdx.x < 32) {
      // Lane l holds bins 255 - 8l .. 248 - 8l (descending), so the scan runs from the top key.
      const int top = 255 - 8 * lane;
      uint64_t lc = 0, ls = 0;
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        lc += hist[top - q];
        ls += hist[256 + top - q];
      }
      const uint64_t ic = warp_incl_scan_u64(lc), is = warp_incl_scan_u64(ls);
      const unsigned hit = __ballot_sync(0xffffffffu, c_above + ic >= goal);
      const int chosen = hit ? __ffs(hit) - 1 : 31;  // hit != 0 while C(prefix) >= goal
      if (lane == chosen) {
        uint64_t bc = c_above + ic - lc, bs = s_above + is - ls;
        int d = top;
        for (int q = 0; q < 8; ++q, --d) {
          if (q == 7 || bc + hist[d] >= goal) break;
          bc += hist[d];
          bs += hist[256 + d];
        }
        hist[512] = t | (static_cast<uint32_t>(d) << shift);
        hist[513] = bc;
        hist[514] = bs;
        hist[515] = hist[256 + d];
      }
    }
    __syncthreads();
    t = static_cast<uint32_t>(hist[512]);
    c_above = hist[513];
    s_above = hist[514];
    s_at = hist[515];
    __syncthreads();  // before the next pass zeroes the bins
  }
  out = {c_above, s_above, s_at};
  return t;
}

// Descending bitonic sort of s[0, n_pad) (n_pad a power of two >= 2).
static __device__ void bitonic_sort_desc(uint64_t* s, int n_pad) {
  for (int k = 2; k <= n_pad; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < n_pad; i += kThreads) {
        const int ixj = i ^ j;
        if (ixj > i) {
          const uint64_t a = s[i], b = s[ixj];
          const bool desc = (i & k) == 0;
          if (desc ? a < b : a > b) {
            s[i] = b;
            s[ixj] = a;
          }
        }
      }
      __syncthreads();
    }
  }
}

// Log-sum-exp of scale * x over the row (scale > 0; scale 1 leaves x exact) into lp_max /
// lp_log_sum, and the k best entries' logprobs by block merges of per-thread lists, written to
// `out` (k = min(n_top, n)). Every thread calls it; it ends with a barrier.
static __device__ void row_logprobs(const float* x, int64_t n, bool vec4, float scale, int n_top,
                                    int32_t* out, int64_t os, int64_t row, float* s_f,
                                    uint64_t* s_red, float& lp_max, float& lp_log_sum) {
  MaxSum ms;
  for_each(x, n, vec4, [&](int64_t, float v) { max_sum_add(ms, __fmul_rn(v, scale)); });
  ms = block_max_sum(ms, s_f);
  lp_max = ms.m;
  lp_log_sum = logf(ms.s);
  const int k = static_cast<int>(n_top < n ? n_top : n);
  if (k <= 0) return;
  float tv[kSampleMaxTopLogprobs] = {};
  int32_t ti[kSampleMaxTopLogprobs];
  int cnt = 0;
  for_each(x, n, vec4, [&](int64_t i, float v) {
    if (cnt == k && !(v > tv[k - 1])) return;  // an equal value never displaces a lower id
    int pos = cnt < k ? cnt++ : k - 1;
    while (pos > 0 && tv[pos - 1] < v) {
      tv[pos] = tv[pos - 1];
      ti[pos] = ti[pos - 1];
      --pos;
    }
    tv[pos] = v;
    ti[pos] = static_cast<int32_t>(i);
  });
  int head = 0;
  for (int r = 0; r < k; ++r) {
    const uint64_t mine = head < cnt ? sample_rank(sample_key(tv[head]), ti[head]) : 0;
    const uint64_t best = block_max_u64(mine, s_red);
    if (head < cnt && mine == best) {
      out[(kSampleOutTopIds + r) * os + row] = ti[head];
      out[(kSampleOutTopLogprobs + r) * os + row] =
          __float_as_int(__fsub_rn(__fsub_rn(__fmul_rn(tv[head], scale), lp_max), lp_log_sum));
      ++head;
    }
  }
}

// Rows whose argmax runs over the raw logits (no penalties, no bias: their `work` row is free
// until the sample kernel's last step, which writes it after reading the partials).
static __device__ __forceinline__ bool argmax_on_raw(const SampleRowParams& p) {
  return !(p.flags & (kSampleRepetition | kSampleFreqPresence)) && p.bias_end == p.bias_begin;
}

constexpr int kArgmaxThreads = 256;
constexpr int kMaxArgmaxChunks = 64;
constexpr int64_t kMinArgmaxChunk = 4096;  // elements: below this a chunk is mostly launch cost

// Block (chunk, row): the largest sample_rank of logits[row][chunk's range], written as two u32
// to the start of the row's `work` row.
static __global__ void __launch_bounds__(kArgmaxThreads) argmax_chunks_kernel(SampleArgs a) {
  __shared__ uint64_t s_red[kArgmaxThreads / 32];
  const int64_t row = blockIdx.y, n = a.n;
  if (!argmax_on_raw(a.params[row])) return;
  const float* raw = a.logits + row * a.logits_stride;
  // Chunks of a multiple of 4 elements, so 16-byte loads stay aligned in every chunk.
  const int64_t per = ((n + a.argmax_chunks - 1) / a.argmax_chunks + 3) / 4 * 4;
  const int64_t lo = blockIdx.x * per, hi = lo + per < n ? lo + per : n;
  uint64_t best = 0;
  auto take = [&](int64_t i, float v) {
    const uint64_t r = sample_rank(sample_key(sanitize(v)), static_cast<int32_t>(i));
    best = r > best ? r : best;
  };
  const bool vec4 = (n % 4 == 0) && (reinterpret_cast<uintptr_t>(raw) % 16 == 0);
  if (vec4) {
    const float4* p4 = reinterpret_cast<const float4*>(raw);
    for (int64_t j = lo / 4 + threadIdx.x; j < hi / 4; j += kArgmaxThreads) {
      const float4 v = p4[j];
      take(4 * j, v.x);
      take(4 * j + 1, v.y);
      take(4 * j + 2, v.z);
      take(4 * j + 3, v.w);
    }
  } else {
    for (int64_t i = lo + threadIdx.x; i < hi; i += kArgmaxThreads) take(i, raw[i]);
  }
  best = warp_max_u64(best);
  if ((threadIdx.x & 31) == 0) s_red[threadIdx.x >> 5] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kArgmaxThreads / 32; ++w) best = s_red[w] > best ? s_red[w] : best;
    auto* partial = reinterpret_cast<uint32_t*>(a.work + row * n);
    partial[2 * blockIdx.x] = static_cast<uint32_t>(best);
    partial[2 * blockIdx.x + 1] = static_cast<uint32_t>(best >> 32);
  }
}

// ops::argmax_chunks: warp w of block (x, row) takes chunk 8x + w (kArgmaxChunkCols = 128
// columns: four a lane, one 16-byte load where the row allows).
constexpr int kChunkWarps = 8;
static_assert(kArgmaxChunkCols == 4 * 32, "a lane takes four columns of a chunk");
static __global__ void __launch_bounds__(kChunkWarps * 32)
    chunk_max_kernel(const float* logits, int64_t stride, int64_t n, uint64_t* out,
                     int64_t out_stride) {
  const int lane = threadIdx.x & 31;
  const int64_t row = blockIdx.y, chunk = blockIdx.x * kChunkWarps + (threadIdx.x >> 5);
  const int64_t col = chunk * kArgmaxChunkCols + 4 * lane;
  if (chunk * kArgmaxChunkCols >= n) return;
  const float* p = logits + row * stride;
  float v[4];
  if (col + 4 <= n && (reinterpret_cast<uintptr_t>(p + col) % 16) == 0) {
    const float4 q = *reinterpret_cast<const float4*>(p + col);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = col + e < n ? p[col + e] : -INFINITY;
  }
  uint64_t best = 0;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    if (col + e >= n) continue;
    const uint64_t r = sample_rank(sample_key(sanitize(v[e])), static_cast<int32_t>(col + e));
    best = r > best ? r : best;
  }
  best = warp_max_u64(best);
  if (lane == 0) out[row * out_stride + chunk] = best;
}

// kFast: ordered_select_fast and the unrolled compaction (VELA_SAMPLE_FAST, the default); kRadix:
// the exact path's radix selects (VELA_SAMPLE_RADIX). Separate instantiations: each keeps the
// registers its own paths need.
template <bool kFast, bool kRadix>
static __global__ void __launch_bounds__(kThreads, 1) sample_kernel(SampleArgs a) {
  extern __shared__ uint64_t s_cand[];  // [kMaxCand]
  __shared__ uint64_t s_group[kFast ? kWarps : 1][kSelectGroups];  // ordered_select_fast
  (void)s_group;
  __shared__ uint64_t s_red[kWarps + 2];
  __shared__ float s_f[2 * kWarps];
  __shared__ int32_t s_int[4];
  __shared__ uint32_t s_rung_cnt[kWarps][kRungs];
  __shared__ float s_rung_mass[kWarps][kRungs];
  __shared__ uint32_t s_count;
  __shared__ int32_t s_pos;

  const int64_t row = blockIdx.x, n = a.n;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const SampleRowParams p = a.params[row];
  const float* raw = a.logits + row * a.logits_stride;
  const bool raw_vec4 = (n % 4 == 0) && (reinterpret_cast<uintptr_t>(raw) % 16 == 0);
  int32_t* out = a.out;
  const int64_t os = a.out_stride;

  // 1. Raw logprobs (kSampleLogprobsTempered: after step 2, of the processed row / T).
  const bool want_lp = (p.flags & kSampleLogprobs) != 0;
  const bool tempered = want_lp && (p.flags & kSampleLogprobsTempered);
  const float lp_scale = tempered ? p.inv_temperature : 1.0f;
  float lp_max = -INFINITY, lp_log_sum = 0.0f;
  if (want_lp && !tempered)
    row_logprobs(raw, n, raw_vec4, 1.0f, p.n_top_logprobs, out, os, row, s_f, s_red, lp_max,
                 lp_log_sum);

  // 2. Penalties and bias, written to this row of `work`.
  const bool rep = p.flags & kSampleRepetition, fp = p.flags & kSampleFreqPresence;
  const float* src = raw;
  bool vec4 = raw_vec4;
  if (rep || fp || p.bias_end > p.bias_begin) {
    float* wr = a.work + row * n;
    // Penalties from the count table (slot >= 0, fused into the copy) or from the sparse history.
    const int32_t* cr =
        (rep || fp) && p.slot >= 0 ? a.counts + static_cast<int64_t>(p.slot) * n : nullptr;
    auto penalize = [&](float v, int32_t c) {
      if (rep && c != 0) v = v > 0.0f ? __fdiv_rn(v, p.repetition) : __fmul_rn(v, p.repetition);
      if (fp && (c >> 1) > 0) {
        v = __fsub_rn(v, __fmul_rn(p.frequency, static_cast<float>(c >> 1)));
        v = __fsub_rn(v, p.presence);
      }
      return v;
    };
    for_each(raw, n, raw_vec4, [&](int64_t i, float v) {
      if (cr != nullptr) v = penalize(v, cr[i]);
      wr[i] = v;
    });
    __syncthreads();
    if ((rep || fp) && cr == nullptr) {  // distinct ids: no two threads touch one logit
      for (int32_t j = p.pen_begin + tid; j < p.pen_end; j += kThreads) {
        const int32_t id = a.entries[2 * j];
        wr[id] = sanitize(penalize(wr[id], a.entries[2 * j + 1]));
      }
      __syncthreads();
    }
    for (int32_t b = p.bias_begin + tid; b < p.bias_end; b += kThreads)
      atomicAdd(wr + a.entries[2 * b], __int_as_float(a.entries[2 * b + 1]));
    __syncthreads();
    src = wr;
    vec4 = n % 4 == 0;
  }

  if (tempered)
    row_logprobs(src, n, vec4, lp_scale, p.n_top_logprobs, out, os, row, s_f, s_red, lp_max,
                 lp_log_sum);
  const float* lp_row = tempered ? src : raw;

  // 3. Argmax (ties to the lower id): the greedy token and the row max; from the partial maxima
  // of argmax_chunks_kernel when it ran for this row.
  uint64_t best = 0;
  if (a.chunk_max != nullptr && argmax_on_raw(p)) {
    const uint64_t* cm = a.chunk_max + row * a.chunk_max_stride;
    for (int j = tid; j < a.n_chunk_max; j += kThreads) best = cm[j] > best ? cm[j] : best;
  } else if (a.argmax_chunks > 0 && argmax_on_raw(p)) {
    if (tid < a.argmax_chunks) {
      const auto* partial = reinterpret_cast<const uint32_t*>(a.work + row * n);
      best = (static_cast<uint64_t>(partial[2 * tid + 1]) << 32) | partial[2 * tid];
    }
  } else {
    for_each(src, n, vec4, [&](int64_t i, float v) {
      const uint64_t r = sample_rank(sample_key(v), static_cast<int32_t>(i));
      best = r > best ? r : best;
    });
  }
  best = block_max_u64(best, s_red);
  int32_t token = rank_id(best);
  const float m = sanitize(src[token]);
  // Thread 0 writes the row's result: the token, its logprob (lp_tok: its logit in the logprob
  // row, read before the row may change) and its count-table update.
  auto write_result = [&](float lp_tok) {
    if (tid != 0) return;
    out[kSampleOutToken * os + row] = token;
    if (a.next_ids != nullptr) a.next_ids[row] = token;
    out[kSampleOutLogprob * os + row] =
        want_lp ? __float_as_int(
                      __fsub_rn(__fsub_rn(__fmul_rn(lp_tok, lp_scale), lp_max), lp_log_sum))
                : 0;
    if ((p.flags & kSampleUpdateCounts) && a.counts != nullptr && p.slot >= 0)
      a.counts[static_cast<int64_t>(p.slot) * n + token] += 2;
  };

  if (!(p.flags & kSampleGreedy) && m != -INFINITY) {
    const float sc = p.inv_temperature, msc = __fmul_rn(m, sc);
    auto expo = [&](float v) { return __fsub_rn(__fmul_rn(v, sc), msc); };
    auto weight = [&](float v) { return v == -INFINITY ? 0.0f : expf(expo(v)); };
    bool topk_on = p.top_k > 0 && p.top_k < n;
    const bool topp_on = p.top_p < 1.0f;
    uint32_t kth_key = 0;  // keep keys >= kth_key
    uint64_t cut = 0;      // keep ranks >= cut

    if (topk_on || topp_on) {
      // 4. Ladder: counts and weight sums per rung.
      uint32_t cnt[kRungs];
      float mass[kRungs];
#pragma unroll
      for (int j = 0; j < kRungs; ++j) {
        cnt[j] = 0;
        mass[j] = 0.0f;
      }
      uint64_t total = 0;
      for_each(src, n, vec4, [&](int64_t, float v) {
        if (v == -INFINITY) return;
        const float e = expo(v), d = -e;
        const float w = topp_on ? expf(e) : 0.0f;
        total += sample_fixed(w);
#pragma unroll
        for (int j = 0; j < kRungs; ++j) {
          if (d <= rung(j)) {
            ++cnt[j];
            mass[j] += w;
          }
        }
      });
#pragma unroll
      for (int j = 0; j < kRungs; ++j) {
        uint32_t c = cnt[j];
        float ms = mass[j];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
          c += __shfl_xor_sync(0xffffffffu, c, o);
          ms += __shfl_xor_sync(0xffffffffu, ms, o);
        }
        if (lane == 0) {
          s_rung_cnt[warp][j] = c;
          s_rung_mass[warp][j] = ms;
        }
      }
      total = block_sum_u64(total, s_red);  // also the barrier for the rung tables
      uint32_t rc[kRungs];
      float rm[kRungs];
#pragma unroll
      for (int j = 0; j < kRungs; ++j) {
        rc[j] = 0;
        rm[j] = 0.0f;
        for (int w = 0; w < kWarps; ++w) {
          rc[j] += s_rung_cnt[w][j];
          rm[j] += s_rung_mass[w][j];
        }
      }
      const uint32_t k = static_cast<uint32_t>(p.top_k);
      if (topk_on && rc[kRungs - 1] < k) topk_on = false;  // fewer finite logits than k: keep all
      int chosen = kRungs - 1;
      for (int j = kRungs - 1; j >= 0; --j) {
        const bool ok = topk_on ? rc[j] >= k
                                : (j == kRungs - 1 ||
                                   rm[j] >= p.top_p * rm[kRungs - 1] * (1.0f + 1e-4f) + 1e-30f);
        if (ok) chosen = j;
      }
      const uint32_t n_cand = rc[chosen];
      bool done = false;
      if ((topk_on || topp_on) && n_cand <= kMaxCand && n_cand > 0) {
        // 5a. Compact the candidates (d <= rung) and sort them by rank.
        const float bound = rung(chosen);
        if (tid == 0) {
          s_count = 0;
          s_pos = INT_MAX;
        }
        __syncthreads();
        auto take = [&](int64_t i, float v) {  // v of id i (-inf past the row), warp-uniform call
          const bool is_cand = v != -INFINITY && -expo(v) <= bound;
          const unsigned mask = __ballot_sync(0xffffffffu, is_cand);
          if (mask == 0) return;
          uint32_t base = 0;
          if (lane == 0) base = atomicAdd(&s_count, static_cast<uint32_t>(__popc(mask)));
          base = __shfl_sync(0xffffffffu, base, 0);
          const uint32_t at = base + __popc(mask & ((1u << lane) - 1));
          if (is_cand && at < kMaxCand)
            s_cand[at] = sample_rank(sample_key(v), static_cast<int32_t>(i));
        };
        int64_t b = 0;
        // kFast: 4 loads in flight a thread (the candidates' order is sorted away below).
        if constexpr (kFast) {
          constexpr int kU = 4;
          for (; b + kU * kThreads <= n; b += kU * kThreads) {
            float v[kU];
#pragma unroll
            for (int u = 0; u < kU; ++u) v[u] = sanitize(src[b + u * kThreads + tid]);
#pragma unroll
            for (int u = 0; u < kU; ++u) take(b + u * kThreads + tid, v[u]);
          }
        }
        for (; b < n; b += kThreads) {
          const int64_t i = b + tid;
          take(i, i < n ? sanitize(src[i]) : -INFINITY);
        }
        __syncthreads();
        const bool compacted = s_count == n_cand;  // same predicate as the ladder: always true
        int n_pad = 2;
        while (n_pad < static_cast<int>(n_cand)) n_pad <<= 1;
        for (int i = static_cast<int>(n_cand) + tid; i < n_pad; i += kThreads) s_cand[i] = 0;
        __syncthreads();
        bitonic_sort_desc(s_cand, n_pad);
        if (topk_on && compacted) kth_key = static_cast<uint32_t>(s_cand[k - 1] >> 32);
        done = compacted;
        if (topp_on && compacted) {
          // 5b. Top-p cut: the first rank whose cumulative fixed-point weight reaches the target.
          auto wfx = [&](int idx) -> uint64_t {
            const uint32_t key = static_cast<uint32_t>(s_cand[idx] >> 32);
            return idx < static_cast<int>(n_cand) && key >= kth_key
                       ? sample_fixed(weight(key_to_float(key)))
                       : 0;
          };
          const int per = (n_pad + kThreads - 1) / kThreads;
          const int c0 = tid * per, c1 = min(n_pad, c0 + per);
          uint64_t local = 0;
          for (int i = c0; i < c1; ++i) local += wfx(i);
          // Exclusive block scan of `local`.
          const uint64_t incl = warp_incl_scan_u64(local);
          if (lane == 31) s_red[warp] = incl;
          __syncthreads();
          uint64_t before = incl - local, all = 0;
          for (int w = 0; w < kWarps; ++w) {
            if (w < warp) before += s_red[w];
            all += s_red[w];
          }
          const uint64_t mass_k = topk_on ? all : total;
          const auto target =
              static_cast<uint64_t>(static_cast<double>(p.top_p) * static_cast<double>(mass_k));
          uint64_t acc = before;
          for (int i = c0; i < c1; ++i) {
            acc += wfx(i);
            if (acc >= target) {
              atomicMin(&s_pos, i);
              break;
            }
          }
          __syncthreads();
          if (s_pos != INT_MAX) {
            cut = s_cand[s_pos];
          } else {
            done = false;  // the rung held too little mass after all: take the exact slow path
          }
          __syncthreads();
        }
      }
      if (!done) {
        // The top-p cut inside key t: the rank of its j-th id (ascending) that brings the kept
        // weight of the keys > t (`above`) to the target.
        auto cut_in_key = [&](uint32_t t, uint64_t target, uint64_t above) {
          const uint64_t wt = sample_fixed(weight(key_to_float(t)));
          const uint64_t j = wt > 0 ? (target - above + wt - 1) / wt : 1;
          auto at_t = [&](int64_t, float v) -> uint64_t { return sample_key(v) == t ? 1 : 0; };
          auto jth = [&](uint64_t) { return j - 1; };
          int32_t cut_id;
          if constexpr (kFast) {
            cut_id = ordered_select_fast(src, n, vec4, at_t, jth, s_red, s_int, s_group);
          } else {
            cut_id = ordered_select(src, n, at_t, jth, s_red, s_int);
          }
          return sample_rank(t, cut_id < 0 ? 0 : cut_id);
        };
        if constexpr (kRadix) {
          // 5c. The exact path, radix selects (VELA_SAMPLE_RADIX): the k-th key and the weight of
          // the keys >= it in 4 passes, then the key t of the top-p cut in 4 more.
          auto wk = [&](float v, uint32_t key) -> uint64_t {
            return key >= kth_key ? sample_fixed(weight(v)) : 0;
          };
          uint64_t mass_k = total;  // every finite weight, summed by the ladder
          if (topk_on) {
            RadixSums rk;
            kth_key = radix_select(
                src, n, vec4, [](float, uint32_t) -> uint64_t { return 1; },
                [&](float v, uint32_t) -> uint64_t {
                  return topp_on ? sample_fixed(weight(v)) : 0;
                },
                k, s_cand, rk);
            mass_k = rk.s_above + rk.s_at;
          }
          if (topp_on) {
            const auto target =
                static_cast<uint64_t>(static_cast<double>(p.top_p) * static_cast<double>(mass_k));
            RadixSums rp;
            const uint32_t t = radix_select(
                src, n, vec4, wk, [](float, uint32_t) -> uint64_t { return 0; }, target, s_cand,
                rp);
            const uint64_t above = rp.c_above;  // the kept weight of the keys > t
            cut = cut_in_key(t, target, above);
          }
        } else {
          // 5c. The exact path by bisection over the keys (one block reduction per bit).
          if (topk_on) {
            uint32_t t = 0;
            for (int bit = 31; bit >= 0; --bit) {
              const uint32_t tr = t | (1u << bit);
              const uint64_t c = row_sum(
                  src, n, vec4,
                  [&](int64_t, float v) -> uint64_t { return sample_key(v) >= tr ? 1 : 0; }, s_red);
              if (c >= k) t = tr;
            }
            kth_key = t;
          }
          if (topp_on) {
            auto wk = [&](float v) -> uint64_t {
              return sample_key(v) >= kth_key ? sample_fixed(weight(v)) : 0;
            };
            const uint64_t mass_k = row_sum(
                src, n, vec4, [&](int64_t, float v) { return wk(v); }, s_red);
            const auto target =
                static_cast<uint64_t>(static_cast<double>(p.top_p) * static_cast<double>(mass_k));
            uint32_t t = 0;
            for (int bit = 31; bit >= 0; --bit) {
              const uint32_t tr = t | (1u << bit);
              const uint64_t ms = row_sum(
                  src, n, vec4,
                  [&](int64_t, float v) -> uint64_t { return sample_key(v) >= tr ? wk(v) : 0; },
                  s_red);
              if (ms >= target) t = tr;
            }
            const uint64_t above = row_sum(
                src, n, vec4,
                [&](int64_t, float v) -> uint64_t { return sample_key(v) > t ? wk(v) : 0; }, s_red);
            cut = cut_in_key(t, target, above);
          }
        }
      }
    }

    // 6. Min-p and the draw in ascending id order.
    const float min_p = p.min_p;
    const float u = philox_uniform(p.seed, p.stream, p.step);
    auto kept = [&](int64_t i, float v) -> uint64_t {
      const uint32_t key = sample_key(v);
      if (key < kth_key || sample_rank(key, static_cast<int32_t>(i)) < cut) return 0;
      const float w = weight(v);
      if (w < min_p && v != m) return 0;
      return sample_fixed(w);
    };
    auto u_of = [&](uint64_t total) {
      return static_cast<uint64_t>(static_cast<double>(u) * static_cast<double>(total));
    };
    int32_t drawn;
    if constexpr (kFast) {
      drawn = ordered_select_fast(src, n, vec4, kept, u_of, s_red, s_int, s_group);
    } else {
      drawn = ordered_select(src, n, kept, u_of, s_red, s_int);
    }
    if (drawn >= 0) token = drawn;
    if (p.flags & kSampleProbs) {
      // The distribution: kept weight / kept mass, into this row of `work` (which `src` may be:
      // each thread reads an element before it writes it, and the row's other reads are done,
      // except the logprob at `token`, read into a register first).
      const float lp_tok = sanitize(lp_row[token]);
      const double mass = static_cast<double>(row_sum(src, n, vec4, kept, s_red));
      float* wr = a.work + row * n;
      for_each(src, n, vec4, [&](int64_t i, float v) {
        wr[i] = static_cast<float>(static_cast<double>(kept(i, v)) / mass);
      });
      write_result(lp_tok);
      return;
    }
  }

  if (p.flags & kSampleProbs) {  // greedy, or every token banned: one-hot at the token
    const float lp_tok = sanitize(lp_row[token]);
    __syncthreads();  // every thread has read its own `token` from `src` before the row changes
    float* wr = a.work + row * n;
    for (int64_t i = tid; i < n; i += kThreads) wr[i] = i == token ? 1.0f : 0.0f;
    write_result(lp_tok);
    return;
  }
  write_result(sanitize(lp_row[token]));
}

static __global__ void reset_counts_kernel(ResetArgs a) {
  const int32_t* r = a.resets + 3 * blockIdx.x;
  int32_t* row = a.counts + static_cast<int64_t>(r[0]) * a.n;
  for (int64_t i = threadIdx.x; i < a.n; i += blockDim.x) row[i] = 0;
  __syncthreads();
  for (int32_t j = r[1] + static_cast<int32_t>(threadIdx.x); j < r[2];
       j += static_cast<int32_t>(blockDim.x))
    row[a.entries[2 * j]] = a.entries[2 * j + 1];
}

namespace {

std::atomic<int> g_fast_override{-1};   // sample_set_fast (tests, benchmarks)
std::atomic<int> g_radix_override{-1};  // sample_set_radix

// A test / benchmark override (-1: none) else the environment switch, read once by the caller.
bool switch_on(const std::atomic<int>& override_value, bool env) {
  const int o = override_value.load(std::memory_order_relaxed);
  return o >= 0 ? o != 0 : env;
}
void set_override(std::atomic<int>& override_value, int v) {
  override_value = v < 0 ? -1 : (v != 0 ? 1 : 0);
}

// The one-pass draw (ordered_select_fast) and the unrolled candidate compaction, on by default
// since session 45 measured it (H200, 100k rows: temperature 73.6 -> 40.1 us at B = 1, 86.5 ->
// 47.4 at B = 64; bench/results/sampling_h200.txt); the exact path's radix selects, off by
// default (combined top-k + top-p 30-38% faster, top-k alone at B = 64 40% slower). Either
// switch gives the same tokens.
bool sample_fast() {
  static const bool env = env_int("VELA_SAMPLE_FAST", 1, 0, 1) != 0;
  return switch_on(g_fast_override, env);
}
bool sample_radix() {
  static const bool env = env_int("VELA_SAMPLE_RADIX", 0, 0, 1) != 0;
  return switch_on(g_radix_override, env);
}

}  // namespace

void sample_set_fast(int fast) { set_override(g_fast_override, fast); }
void sample_set_radix(int radix) { set_override(g_radix_override, radix); }

void argmax_chunks(const Tensor& logits, Tensor& chunk_max) {
  DeviceGuard guard(logits.device().index);
  const int64_t n_chunks = argmax_chunk_count(logits.size(1));
  const dim3 grid(static_cast<unsigned>((n_chunks + kChunkWarps - 1) / kChunkWarps),
                  static_cast<unsigned>(logits.size(0)));
  chunk_max_kernel<<<grid, kChunkWarps * 32, 0, current_stream()>>>(
      logits.data<float>(), logits.stride(0), logits.size(1),
      reinterpret_cast<uint64_t*>(chunk_max.data_ptr()), chunk_max.stride(0));
  VELA_CUDA_CHECK_LAUNCH();
}

void sample(const Tensor& logits, const Tensor& params, const Tensor& entries, Tensor& counts,
            Tensor& work, Tensor& out, const Tensor& chunk_max, int32_t* next_ids) {
  DeviceGuard guard(logits.device().index);
  // The instantiation: plain / fast walks x bisection / radix selects.
  using Kernel = void (*)(SampleArgs);
  constexpr Kernel kKernels[2][2] = {{sample_kernel<false, false>, sample_kernel<false, true>},
                                     {sample_kernel<true, false>, sample_kernel<true, true>}};
  const Kernel kernel = kKernels[sample_fast() ? 1 : 0][sample_radix() ? 1 : 0];
  opt_in_smem(kernel, kCandBytes);
  SampleArgs a;
  a.logits = logits.data<float>();
  a.logits_stride = logits.stride(0);
  a.n = logits.size(1);
  a.params = reinterpret_cast<const SampleRowParams*>(params.data_ptr());
  a.entries = entries.data<int32_t>();
  a.counts = counts.numel() > 0 ? counts.data<int32_t>() : nullptr;
  a.work = work.data<float>();
  a.out = out.data<int32_t>();
  a.out_stride = out.size(1);
  const auto n_rows = static_cast<unsigned>(logits.size(0));
  // About two blocks per SM in all, chunks of >= kMinArgmaxChunk elements; one chunk: no pre-pass.
  // VELA_ARGMAX_BLOCKS_PER_SM (1..8) for A/B runs: at 64 rows the pre-pass reads 25.6 MB in
  // 12.8 us (ncu, session 41), yet 8 blocks per SM left the engine's batch-64 / batch-16 steps
  // where 2 had them (session 42, bench/results/decode_attention_hbm_h200.txt).
  static const int64_t per_sm = env_int("VELA_ARGMAX_BLOCKS_PER_SM", 2, 1, 8);
  const int sm_count = vela::cuda::sm_count(logits.device().index);
  const int64_t by_sms = (per_sm * sm_count + n_rows - 1) / std::max<int64_t>(n_rows, 1);
  const int64_t chunks = std::min<int64_t>({by_sms, a.n / kMinArgmaxChunk, kMaxArgmaxChunks});
  a.argmax_chunks = chunks > 1 && n_rows > 0 ? static_cast<int32_t>(chunks) : 0;
  a.chunk_max = nullptr;
  a.chunk_max_stride = 0;
  a.n_chunk_max = 0;
  a.next_ids = next_ids;
  if (chunk_max.defined()) {  // the argmax pieces are given: no pre-pass
    a.chunk_max = reinterpret_cast<const uint64_t*>(chunk_max.data_ptr());
    a.chunk_max_stride = chunk_max.stride(0);
    a.n_chunk_max = static_cast<int32_t>(argmax_chunk_count(a.n));
    a.argmax_chunks = 0;
  }
  if (a.argmax_chunks > 0) {
    argmax_chunks_kernel<<<dim3(static_cast<unsigned>(a.argmax_chunks), n_rows), kArgmaxThreads, 0,
                           current_stream()>>>(a);
    VELA_CUDA_CHECK_LAUNCH();
  }
  kernel<<<n_rows, kThreads, kCandBytes, current_stream()>>>(a);
  VELA_CUDA_CHECK_LAUNCH();
}

void sample_reset_counts(Tensor& counts, const Tensor& resets, int32_t n_resets,
                         const Tensor& entries) {
  DeviceGuard guard(counts.device().index);
  ResetArgs a{counts.data<int32_t>(), counts.size(1), resets.data<int32_t>(),
              entries.data<int32_t>()};
  reset_counts_kernel<<<static_cast<unsigned>(n_resets), 256, 0, current_stream()>>>(a);
  VELA_CUDA_CHECK_LAUNCH();
}

}  // namespace vela::ops::cuda
