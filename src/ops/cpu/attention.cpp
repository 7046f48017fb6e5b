// CPU attention: dense causal (training path) and packed paged (inference path), plus the KV write.
// Dense and single-token paged items = (query token, KV head): the n_heads / n_kv_heads query heads
// that share a KV head are scored together so each K/V row is converted to f32 once. The queries a
// sequence brings to a paged step (prefill chunk, verify rows) go in blocks of up to 16 tokens per
// (sequence, KV head): the block's keys are converted once (K transposed) and every score and
// output row is a vectorised multiply-add over 64 keys or the head dim, 4 rows sharing each load.
// Softmax in fp32, sums in double.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/vec.h"

namespace vela::ops::cpu {
namespace {

// Each of the n_rep rows of scores [n_rep, n_keys] in place as its softmax (max subtracted, the sum
// in double, P normalised); lse[r * lse_stride] gets the row's log-sum-exp where lse is given. A
// row of -inf scores becomes zeros (lse -inf).
inline void softmax_rows(float* scores, int64_t n_rep, int64_t n_keys, float* lse = nullptr,
                         int64_t lse_stride = 0) {
  for (int64_t r = 0; r < n_rep; ++r) {
    float* sr = scores + r * n_keys;
    const float m = max_of(sr, n_keys);
    const double total = m == -INFINITY ? 0.0 : exp_shift_sum(sr, sr, n_keys, m);
    const float inv = total > 0 ? static_cast<float>(1.0 / total) : 0.f;
    if (lse != nullptr)
      lse[r * lse_stride] = total > 0 ? m + static_cast<float>(std::log(total)) : -INFINITY;
    for (int64_t p = 0; p < n_keys; ++p) sr[p] = m == -INFINITY ? 0.f : sr[p] * inv;
  }
}

// Attends n_rep query rows (f32, [n_rep, d]) to keys/values 0..n_keys-1 given by key(p)/value(p)
// (pointers to rows of T), skipping keys where !visible(p). Writes n_rep output rows of T and,
// when lse is not null, row r's log-sum-exp of the scaled scores to lse[r * lse_stride].
template <typename T, typename KeyFn, typename ValFn, typename VisFn>
void attend(const float* q, int64_t n_rep, int64_t d, int64_t n_keys, KeyFn key, ValFn value,
            VisFn visible, float scale, T* out, int64_t out_row_stride, float* lse = nullptr,
            int64_t lse_stride = 0) {
  float* scores = scratch(static_cast<size_t>(n_rep * n_keys + 1), 1);
  float* acc = scratch(static_cast<size_t>(n_rep * d), 3);
  for (int64_t p = 0; p < n_keys; ++p) {
    if (!visible(p)) {
      for (int64_t r = 0; r < n_rep; ++r) scores[r * n_keys + p] = -INFINITY;
      continue;
    }
    const float* k = row_as_f32(key(p), d, 2);
    for (int64_t r = 0; r < n_rep; ++r) {
      const float* qr = q + r * d;
      float s = 0.f;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < d; ++i) s += qr[i] * k[i];
      scores[r * n_keys + p] = s * scale;
    }
  }
  softmax_rows(scores, n_rep, n_keys, lse, lse_stride);
  std::fill(acc, acc + n_rep * d, 0.f);
  for (int64_t p = 0; p < n_keys; ++p) {
    if (!visible(p)) continue;
    const float* v = row_as_f32(value(p), d, 2);
    for (int64_t r = 0; r < n_rep; ++r) {
      float w = scores[r * n_keys + p];
      float* ar = acc + r * d;
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) ar[i] += w * v[i];
    }
  }
  for (int64_t r = 0; r < n_rep; ++r) store_f32(acc + r * d, out + r * out_row_stride, d);
}

template <typename T>
void query_rows_f32(const T* q, int64_t n_rep, int64_t d, float* dst) {
  load_f32(q, dst, n_rep * d);
}

#if defined(__AVX2__)  // (AVX-512 builds define it too)
// Keys / values read ahead of use in attend_one_query: one KV head's row is 64-512 bytes of a
// slot n_kv times that size, and a long-running cache's pages lie anywhere, so the hardware
// prefetcher loses the stream at every page. `vela bench ops`, decode attention (100m's heads,
// 8 x 8192 keys), three alternating runs on a 2-vCPU EPYC: pages shuffled 10.1-10.2 -> 15.3-15.8
// GB/s of KV; pages in order 21.0-21.1 -> 20.0-21.4 (16 ahead: 16.0-16.4 and 19.5-19.8; the
// prefetches themselves cost ~10% when nothing misses).
constexpr int64_t kAhead = 8;
template <typename T>
inline void prefetch_row(const T* row, int64_t d) {
  const auto* p = reinterpret_cast<const char*>(row);
  for (int64_t off = 0; off < d * static_cast<int64_t>(sizeof(T)); off += 64)
    _mm_prefetch(p + off, _MM_HINT_T0);
}
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__)
// Output rows whose head dim (D16 registers) accumulates in registers at once: 16 registers.
template <int D16>
constexpr int64_t kRowsPerPass = D16 >= 16 ? 1 : 16 / D16;

// Calls f(std::integral_constant<int, D16>) for the head dims that have a register layout (d = 16 *
// D16 = 32, 64, 80, 96, 128, 256) and returns true; false for the rest.
template <typename F>
bool with_d16(int64_t d, F&& f) {
  switch (d) {
    case 32:
      f(std::integral_constant<int, 2>{});
      return true;
    case 64:
      f(std::integral_constant<int, 4>{});
      return true;
    case 80:
      f(std::integral_constant<int, 5>{});
      return true;
    case 96:
      f(std::integral_constant<int, 6>{});
      return true;
    case 128:
      f(std::integral_constant<int, 8>{});
      return true;
    case 256:
      f(std::integral_constant<int, 16>{});
      return true;
    default:
      return false;
  }
}

// Decode attention of one (query token, KV head): the n_rep query rows q (f32 [n_rep, 16 * D16])
// against keys / values 0 .. n_keys - 1, the head dim held in D16 registers. A key row is loaded
// and widened once for all rows, each score is D16 FMAs and one horizontal sum, and the output
// rows accumulate in registers (RC rows per pass over the values, RC * D16 <= 16). Same math as
// attend(): fp32 scores and P @ V, the softmax sum in double, P normalised first.
template <int D16, typename T, typename KeyFn, typename ValFn>
void attend_one_query(const float* q, int64_t n_rep, int64_t n_keys, KeyFn key, ValFn value,
                      float scale, T* out, int64_t out_row_stride) {
  constexpr int64_t d = 16 * D16, RC = kRowsPerPass<D16>;
  float* scores = scratch(static_cast<size_t>(n_rep * n_keys + 1), 1);
  for (int64_t p = 0; p < n_keys; ++p) {
    if (p + kAhead < n_keys) prefetch_row(key(p + kAhead), d);
    const auto* kp = key(p);
    __m512 k[D16];
    for (int v = 0; v < D16; ++v) k[v] = widen16(kp + 16 * v);
    for (int64_t r = 0; r < n_rep; ++r) {
      __m512 acc = _mm512_mul_ps(_mm512_loadu_ps(q + r * d), k[0]);
      for (int v = 1; v < D16; ++v) acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + r * d + 16 * v), k[v], acc);
      scores[r * n_keys + p] = hsum512(acc) * scale;
    }
  }
  softmax_rows(scores, n_rep, n_keys);
  alignas(64) float row[d];
  for (int64_t r0 = 0; r0 < n_rep; r0 += RC) {
    const int64_t nr = std::min<int64_t>(RC, n_rep - r0);
    __m512 acc[RC][D16];
    for (int64_t j = 0; j < RC; ++j)
      for (int v = 0; v < D16; ++v) acc[j][v] = _mm512_setzero_ps();
    for (int64_t p = 0; p < n_keys; ++p) {
      if (p + kAhead < n_keys) prefetch_row(value(p + kAhead), d);
      const auto* vp = value(p);
      __m512 vv[D16];
      for (int v = 0; v < D16; ++v) vv[v] = widen16(vp + 16 * v);
      for (int64_t j = 0; j < nr; ++j) {
        const __m512 w = _mm512_set1_ps(scores[(r0 + j) * n_keys + p]);
        for (int v = 0; v < D16; ++v) acc[j][v] = _mm512_fmadd_ps(w, vv[v], acc[j][v]);
      }
    }
    for (int64_t j = 0; j < nr; ++j) {
      for (int v = 0; v < D16; ++v) _mm512_store_ps(row + 16 * v, acc[j][v]);
      store_f32(row, out + (r0 + j) * out_row_stride, d);
    }
  }
}

// attend_one_query for the head dims that have a register layout (with_d16); false for the rest
// (attend() takes them).
template <typename T, typename KeyFn, typename ValFn>
bool attend_one_query_fast(const float* q, int64_t n_rep, int64_t d, int64_t n_keys, KeyFn key,
                           ValFn value, float scale, T* out, int64_t out_row_stride) {
  return with_d16(d, [&](auto d16) {
    attend_one_query<decltype(d16)::value>(q, n_rep, n_keys, key, value, scale, out,
                                           out_row_stride);
  });
}
#elif defined(__AVX2__) && defined(__FMA__)
// AVX2 (no AVX-512): the same single-query kernel on 8-lane vectors, the head dim in D8 = d / 8
// registers (d a multiple of 8 up to 256). Each score sums its even and odd 8-lane chunks in two
// accumulators (a shorter FMA chain), the output rows accumulate RC = max(1, 12 / D8) at a time.
// Session 57 (AVX2-only EPYC): `vela bench ops` decode attention 1.2 GB/s on attend() before.

template <int D8, typename T, typename KeyFn, typename ValFn>
void attend_one_query(const float* q, int64_t n_rep, int64_t n_keys, KeyFn key, ValFn value,
                      float scale, T* out, int64_t out_row_stride) {
  constexpr int64_t d = 8 * D8, RC = D8 >= 12 ? 1 : 12 / D8;
  float* scores = scratch(static_cast<size_t>(n_rep * n_keys + 1), 1);
  for (int64_t p = 0; p < n_keys; ++p) {
    if (p + kAhead < n_keys) prefetch_row(key(p + kAhead), d);
    const auto* kp = key(p);
    for (int64_t r = 0; r < n_rep; ++r) {
      const float* qr = q + r * d;
      __m256 acc0 = _mm256_mul_ps(_mm256_loadu_ps(qr), widen8(kp));
      __m256 acc1 = _mm256_setzero_ps();
      for (int v = 1; v < D8; ++v) {
        const __m256 kv = widen8(kp + 8 * v), qv = _mm256_loadu_ps(qr + 8 * v);
        if (v % 2 == 0)
          acc0 = _mm256_fmadd_ps(qv, kv, acc0);
        else
          acc1 = _mm256_fmadd_ps(qv, kv, acc1);
      }
      scores[r * n_keys + p] = hsum256(_mm256_add_ps(acc0, acc1)) * scale;
    }
  }
  softmax_rows(scores, n_rep, n_keys);
  alignas(32) float row[d];
  for (int64_t r0 = 0; r0 < n_rep; r0 += RC) {
    const int64_t nr = std::min<int64_t>(RC, n_rep - r0);
    __m256 acc[RC][D8];
    for (int64_t j = 0; j < RC; ++j)
      for (int v = 0; v < D8; ++v) acc[j][v] = _mm256_setzero_ps();
    for (int64_t p = 0; p < n_keys; ++p) {
      if (p + kAhead < n_keys) prefetch_row(value(p + kAhead), d);
      const auto* vp = value(p);
      for (int64_t j = 0; j < nr; ++j) {
        const __m256 w = _mm256_set1_ps(scores[(r0 + j) * n_keys + p]);
        for (int v = 0; v < D8; ++v) acc[j][v] = _mm256_fmadd_ps(w, widen8(vp + 8 * v), acc[j][v]);
      }
    }
    // d hidden from the optimiser: GCC 12 warns (-Waggressive-loop-optimizations) on store_f32's
    // scalar tail loop when it is inlined with a constant length that leaves no tail.
    int64_t dn = d;
    asm("" : "+r"(dn));
    for (int64_t j = 0; j < nr; ++j) {
      for (int v = 0; v < D8; ++v) _mm256_store_ps(row + 8 * v, acc[j][v]);
      store_f32(row, out + (r0 + j) * out_row_stride, dn);
    }
  }
}

// attend_one_query for head dims 32, 64, 80, 96, 128 and 256; false for the rest (attend()).
template <typename T, typename KeyFn, typename ValFn>
bool attend_one_query_fast(const float* q, int64_t n_rep, int64_t d, int64_t n_keys, KeyFn key,
                           ValFn value, float scale, T* out, int64_t out_row_stride) {
  auto run = [&]<int D8>() {
    attend_one_query<D8>(q, n_rep, n_keys, key, value, scale, out, out_row_stride);
    return true;
  };
  switch (d) {
    case 32:
      return run.template operator()<4>();
    case 64:
      return run.template operator()<8>();
    case 80:
      return run.template operator()<10>();
    case 96:
      return run.template operator()<12>();
    case 128:
      return run.template operator()<16>();
    case 256:
      return run.template operator()<32>();
    default:
      return false;
  }
}
#else
template <typename T, typename KeyFn, typename ValFn>
bool attend_one_query_fast(const float*, int64_t, int64_t, int64_t, KeyFn, ValFn, float, T*,
                           int64_t) {
  return false;
}
#endif

constexpr int64_t kQueryBlock = 16;  // query tokens of one sequence per paged block item
constexpr int64_t kWideChunk = 256;  // keys per item of the prefill's widening pass
// The most floats of widened keys and values a prefill step keeps (64 MiB); sequences past it
// widen per query block.
constexpr int64_t kWideMaxFloats = int64_t{16} << 20;
struct WideFill {  // keys p_begin .. p_end - 1 of sequence seq, KV head g
  int32_t seq, g, p_begin, p_end;
};
constexpr int64_t kKeyBlock = 64;    // keys per score tile (K^T[i][p0 .. p0 + 64) stays in L1)

// One output row, opaque to the optimizer (noipa: not inlined, not cloned for a constant
// length): GCC 12 warns spuriously about store_f32's loops (its intrinsics'
// "uninitialized" operands, an "undefined" iteration count) when it inlines them with the
// constant head dim of the tiled P @ V below.
template <typename T>
[[gnu::noipa]] void store_row(const float* src, T* dst, int64_t n) {
  store_f32(src, dst, n);
}

#if defined(__AVX512F__) && defined(__AVX512BW__)
// The query block's two inner products with their accumulators in registers (the loops below them
// in attend_query_block keep theirs in memory, one load and store per multiply-add, and left
// prefill at 1024 tokens 2.3x slower per token than at 128). Each sum runs in the same order as
// those loops, as fused multiply-adds as they compile, so the results are the same bits.

// Scores of NR query rows (q rows of d floats) against the 64 keys p0 .. p0 + 63 of K^T [d, ld]:
// acc[j][pp] = sum over i of q[j][i] * kt[i][p0 + pp], in i order.
template <int NR>
void score_tile64(const float* q, int64_t d, const float* kt, int64_t ld, int64_t p0,
                  float (*acc)[kKeyBlock]) {
  __m512 a[NR][4];
  for (int j = 0; j < NR; ++j)
    for (int c = 0; c < 4; ++c) a[j][c] = _mm512_setzero_ps();
  for (int64_t i = 0; i < d; ++i) {
    const float* kr = kt + i * ld + p0;
    __m512 k[4];
    for (int c = 0; c < 4; ++c) k[c] = _mm512_loadu_ps(kr + 16 * c);
    for (int j = 0; j < NR; ++j) {
      const __m512 qv = _mm512_set1_ps(q[j * d + i]);
      for (int c = 0; c < 4; ++c) a[j][c] = _mm512_fmadd_ps(qv, k[c], a[j][c]);
    }
  }
  for (int j = 0; j < NR; ++j)
    for (int c = 0; c < 4; ++c) _mm512_storeu_ps(acc[j] + 16 * c, a[j][c]);
}

inline void score_tile64(int nr, const float* q, int64_t d, const float* kt, int64_t ld, int64_t p0,
                         float (*acc)[kKeyBlock]) {
  switch (nr) {
    case 1:
      return score_tile64<1>(q, d, kt, ld, p0, acc);
    case 2:
      return score_tile64<2>(q, d, kt, ld, p0, acc);
    case 3:
      return score_tile64<3>(q, d, kt, ld, p0, acc);
    default:
      return score_tile64<4>(q, d, kt, ld, p0, acc);
  }
}

// P @ V of query rows r0 .. r0 + nr - 1 (nr <= kRowsPerPass<D16>) with the head dim in D16
// registers: row r sums P[r][p] * V[p] over its visible keys p < first_pos + r / n_rep + 1, in p
// order.
template <int D16, typename OutFn>
void pv_rows(const float* sc, int64_t n_keys, const float* vf, int64_t r0, int64_t nr,
             int64_t first_pos, int64_t n_rep, OutFn out) {
  constexpr int64_t d = 16 * D16, RC = kRowsPerPass<D16>;
  __m512 acc[RC][D16];
  for (int64_t j = 0; j < RC; ++j)
    for (int v = 0; v < D16; ++v) acc[j][v] = _mm512_setzero_ps();
  const int64_t all = first_pos + r0 / n_rep + 1;             // every row of the group sees these
  const int64_t any = first_pos + (r0 + nr - 1) / n_rep + 1;  // the group's last row sees these
  for (int64_t p = 0; p < any; ++p) {
    const float* vp = vf + p * d;
    __m512 vv[D16];
    for (int v = 0; v < D16; ++v) vv[v] = _mm512_loadu_ps(vp + 16 * v);
    for (int64_t j = 0; j < nr; ++j) {
      if (p >= all && p >= first_pos + (r0 + j) / n_rep + 1) continue;  // past this row's keys
      const __m512 w = _mm512_set1_ps(sc[(r0 + j) * n_keys + p]);
      for (int v = 0; v < D16; ++v) acc[j][v] = _mm512_fmadd_ps(w, vv[v], acc[j][v]);
    }
  }
  alignas(64) float row[d];
  for (int64_t j = 0; j < nr; ++j) {
    for (int v = 0; v < D16; ++v) _mm512_store_ps(row + 16 * v, acc[j][v]);
    store_row(row, out(r0 + j), d);
  }
}

// P @ V of every query row with pv_rows where the head dim has a register layout (with_d16); false
// for the rest.
template <typename OutFn>
bool pv_all_rows(const float* sc, int64_t rows, int64_t n_keys, const float* vf, int64_t d,
                 int64_t first_pos, int64_t n_rep, OutFn out) {
  return with_d16(d, [&](auto d16) {
    constexpr int D16 = decltype(d16)::value;
    for (int64_t r0 = 0; r0 < rows; r0 += kRowsPerPass<D16>)
      pv_rows<D16>(sc, n_keys, vf, r0, std::min(kRowsPerPass<D16>, rows - r0), first_pos, n_rep,
                   out);
  });
}
#elif defined(__AVX2__) && defined(__FMA__)
// AVX2 (no AVX-512): the same two products on 8-lane vectors, tiled for 16 registers, each sum
// in the generic loops' order (the same bits). Scores: the 64 keys in two halves of 32 (4
// registers), query rows two at a time (8 accumulators).
template <int NR>
void score_half32(const float* q, int64_t d, const float* kr0, int64_t ld, float* const* acc) {
  __m256 a[NR][4];
  for (int j = 0; j < NR; ++j)
    for (int c = 0; c < 4; ++c) a[j][c] = _mm256_setzero_ps();
  for (int64_t i = 0; i < d; ++i) {
    const float* kr = kr0 + i * ld;
    __m256 k[4];
    for (int c = 0; c < 4; ++c) k[c] = _mm256_loadu_ps(kr + 8 * c);
    for (int j = 0; j < NR; ++j) {
      const __m256 qv = _mm256_set1_ps(q[j * d + i]);
      for (int c = 0; c < 4; ++c) a[j][c] = _mm256_fmadd_ps(qv, k[c], a[j][c]);
    }
  }
  for (int j = 0; j < NR; ++j)
    for (int c = 0; c < 4; ++c) _mm256_storeu_ps(acc[j] + 8 * c, a[j][c]);
}

inline void score_tile64(int nr, const float* q, int64_t d, const float* kt, int64_t ld, int64_t p0,
                         float (*acc)[kKeyBlock]) {
  for (int j0 = 0; j0 < nr; j0 += 2) {
    for (int64_t h = 0; h < kKeyBlock; h += 32) {
      float* const dst[2] = {acc[j0] + h, acc[std::min(j0 + 1, nr - 1)] + h};
      if (nr - j0 >= 2)
        score_half32<2>(q + j0 * d, d, kt + p0 + h, ld, dst);
      else
        score_half32<1>(q + j0 * d, d, kt + p0 + h, ld, dst);
    }
  }
}

// P @ V of query rows r0 .. r0 + nr - 1 (nr <= 2) over head dims c0 .. c0 + 8 * W - 1 into
// rows[j * d + c0 ..]: W value registers, 2 * W accumulators; row r sums its visible keys
// p < first_pos + r / n_rep + 1 in p order.
template <int W>
void pv_chunk(const float* sc, int64_t n_keys, const float* vf, int64_t d, int64_t c0, int64_t r0,
              int64_t nr, int64_t first_pos, int64_t n_rep, float* rows) {
  __m256 acc[2][W];
  for (int j = 0; j < 2; ++j)
    for (int w = 0; w < W; ++w) acc[j][w] = _mm256_setzero_ps();
  const int64_t all = first_pos + r0 / n_rep + 1;             // every row of the pair sees these
  const int64_t any = first_pos + (r0 + nr - 1) / n_rep + 1;  // the pair's last row sees these
  for (int64_t p = 0; p < any; ++p) {
    const float* vp = vf + p * d + c0;
    __m256 vv[W];
    for (int w = 0; w < W; ++w) vv[w] = _mm256_loadu_ps(vp + 8 * w);
    for (int64_t j = 0; j < nr; ++j) {
      if (p >= all && p >= first_pos + (r0 + j) / n_rep + 1) continue;  // past this row's keys
      const __m256 pw = _mm256_set1_ps(sc[(r0 + j) * n_keys + p]);
      for (int w = 0; w < W; ++w) acc[j][w] = _mm256_fmadd_ps(pw, vv[w], acc[j][w]);
    }
  }
  for (int64_t j = 0; j < nr; ++j)
    for (int w = 0; w < W; ++w) _mm256_storeu_ps(rows + j * d + c0 + 8 * w, acc[j][w]);
}

// P @ V of every query row, two rows at a time in head-dim chunks of 32 / 16 / 8, for head dims
// that are a multiple of 8 up to 256; false for the rest.
template <typename OutFn>
bool pv_all_rows(const float* sc, int64_t rows, int64_t n_keys, const float* vf, int64_t d,
                 int64_t first_pos, int64_t n_rep, OutFn out) {
  if (d % 8 != 0 || d > 256) return false;
  alignas(32) float pair[2 * 256];
  for (int64_t r0 = 0; r0 < rows; r0 += 2) {
    const int64_t nr = std::min<int64_t>(2, rows - r0);
    int64_t c0 = 0;
    for (; c0 + 32 <= d; c0 += 32)
      pv_chunk<4>(sc, n_keys, vf, d, c0, r0, nr, first_pos, n_rep, pair);
    if (c0 + 16 <= d) {
      pv_chunk<2>(sc, n_keys, vf, d, c0, r0, nr, first_pos, n_rep, pair);
      c0 += 16;
    }
    if (c0 < d) pv_chunk<1>(sc, n_keys, vf, d, c0, r0, nr, first_pos, n_rep, pair);
    for (int64_t j = 0; j < nr; ++j) store_row(pair + j * d, out(r0 + j), d);
  }
  return true;
}
#endif

// Keys p_begin .. p_end - 1 as f32: K^T into kt [d, ld] (column p), V into vf [.., d] (row p).
template <typename KeyFn, typename ValFn>
void widen_keys(KeyFn key, ValFn value, int64_t p_begin, int64_t p_end, int64_t d, float* kt,
                int64_t ld, float* vf) {
  float* tmp = scratch(static_cast<size_t>(d), 0);
  for (int64_t p = p_begin; p < p_end; ++p) {
    load_f32(key(p), tmp, d);
    for (int64_t i = 0; i < d; ++i) kt[i * ld + p] = tmp[i];
    load_f32(value(p), vf + p * d, d);
  }
}

// A sequence's keys and values as f32 (K^T [d, ld], V [ld, d]): widened once per prefill and
// shared by its query blocks, or null for a block to widen its own.
struct WideKeys {
  const float* kt = nullptr;
  int64_t ld = 0;
  const float* vf = nullptr;
};

// Attends the f32 query rows q [rows = n_q * n_rep, d] (row r: query token r / n_rep, which sees
// keys 0 .. first_pos + r / n_rep) to keys / values 0 .. first_pos + n_q - 1 given by key(p) /
// value(p) (or already widened in `wide`), writing row r to out(r) (d elements of T). Same math as
// attend(): fp32 scores and P @ V, the softmax sum in double, P normalised before P @ V.
template <typename T, typename KeyFn, typename ValFn, typename OutFn>
void attend_query_block(const float* q, int64_t n_q, int64_t n_rep, int64_t d, int64_t first_pos,
                        KeyFn key, ValFn value, WideKeys wide, float scale, OutFn out) {
  const int64_t rows = n_q * n_rep, n_keys = first_pos + n_q;
  if (wide.kt == nullptr) {
    float* kt = scratch(static_cast<size_t>(d * n_keys), 1);  // K^T [d, n_keys]
    float* vf = scratch(static_cast<size_t>(n_keys * d), 2);  // V [n_keys, d]
    widen_keys(key, value, 0, n_keys, d, kt, n_keys, vf);
    wide = {kt, n_keys, vf};
  }
  const float* kt = wide.kt;
  const float* vf = wide.vf;
  const int64_t ld = wide.ld;
  float* sc = scratch(static_cast<size_t>(rows * n_keys), 3);  // scores, then P [rows, n_keys]
  for (int64_t p0 = 0; p0 < n_keys; p0 += kKeyBlock) {
    const int64_t np = std::min(kKeyBlock, n_keys - p0);
    for (int64_t r0 = 0; r0 < rows; r0 += 4) {
      const int64_t nr = std::min<int64_t>(4, rows - r0);
      float acc[4][kKeyBlock] = {};
#if defined(__AVX512F__) && defined(__AVX512BW__) || defined(__AVX2__) && defined(__FMA__)
      if (np == kKeyBlock) {
        score_tile64(static_cast<int>(nr), q + r0 * d, d, kt, ld, p0, acc);
      } else
#endif
      {
        for (int64_t i = 0; i < d; ++i) {
          const float* kr = kt + i * ld + p0;
          for (int64_t j = 0; j < nr; ++j) {
            const float qv = q[(r0 + j) * d + i];
#pragma omp simd
            for (int64_t pp = 0; pp < np; ++pp) acc[j][pp] += qv * kr[pp];
          }
        }
      }
      for (int64_t j = 0; j < nr; ++j) {
        const int64_t last = first_pos + (r0 + j) / n_rep;  // causal: keys up to this position
        float* sr = sc + (r0 + j) * n_keys + p0;
        for (int64_t pp = 0; pp < np; ++pp)
          sr[pp] = p0 + pp <= last ? acc[j][pp] * scale : -INFINITY;
      }
    }
  }
  for (int64_t r = 0; r < rows; ++r)  // row r sees keys 0 .. first_pos + r / n_rep
    softmax_rows(sc + r * n_keys, 1, first_pos + r / n_rep + 1);
#if defined(__AVX512F__) && defined(__AVX512BW__) || defined(__AVX2__) && defined(__FMA__)
  if (pv_all_rows(sc, rows, n_keys, vf, d, first_pos, n_rep, out)) return;
#endif
  for (int64_t r0 = 0; r0 < rows; r0 += 4) {
    const int64_t nr = std::min<int64_t>(4, rows - r0);
    float* acc = scratch(static_cast<size_t>(4 * d), 0);  // 4 output rows
    std::fill(acc, acc + 4 * d, 0.f);
    const int64_t visible = first_pos + (r0 + nr - 1) / n_rep + 1;  // of the block's last row
    for (int64_t p = 0; p < visible; ++p) {
      const float* v = vf + p * d;
      for (int64_t j = 0; j < nr; ++j) {
        const int64_t r = r0 + j;
        if (p >= first_pos + r / n_rep + 1) continue;  // past this row's keys (P is not zeroed)
        const float w = sc[r * n_keys + p];
        float* ar = acc + j * d;
#pragma omp simd
        for (int64_t i = 0; i < d; ++i) ar[i] += w * v[i];
      }
    }
    for (int64_t j = 0; j < nr; ++j) store_f32(acc + j * d, out(r0 + j), d);
  }
}

}  // namespace

void causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& doc_ids,
                      float scale, Tensor& out, const Tensor& lse) {
  const int64_t n_batch = q.size(0), n_seq = q.size(1), n_heads = q.size(2), d = q.size(3);
  const int64_t n_kv = k.size(2), n_rep = n_heads / n_kv;
  const int32_t* docs = doc_ids.defined() ? doc_ids.data<int32_t>() : nullptr;
  float* lse_p = lse.defined() ? lse.data<float>() : nullptr;  // [batch, n_heads, seq]
  visit_float(q.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* qp = static_cast<const T*>(q.data_ptr());
    const T* kp = static_cast<const T*>(k.data_ptr());
    const T* vp = static_cast<const T*>(v.data_ptr());
    T* op = static_cast<T*>(out.data_ptr());
    parallel_for(n_batch * n_seq * n_kv, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> qbuf(static_cast<size_t>(n_rep * d));
      for (int64_t item = begin; item < end; ++item) {
        int64_t g = item % n_kv, t = (item / n_kv) % n_seq, b = item / (n_kv * n_seq);
        int64_t q_off = ((b * n_seq + t) * n_heads + g * n_rep) * d;
        query_rows_f32(qp + q_off, n_rep, d, qbuf.data());
        const int32_t* doc_row = docs ? docs + b * n_seq : nullptr;
        auto key = [&](int64_t p) { return kp + ((b * n_seq + p) * n_kv + g) * d; };
        auto val = [&](int64_t p) { return vp + ((b * n_seq + p) * n_kv + g) * d; };
        auto vis = [&](int64_t p) { return doc_row == nullptr || doc_row[p] == doc_row[t]; };
        float* lse_row = lse_p ? lse_p + (b * n_heads + g * n_rep) * n_seq + t : nullptr;
        attend(qbuf.data(), n_rep, d, t + 1, key, val, vis, scale, op + q_off, d, lse_row, n_seq);
      }
    });
  });
}

void kv_write(const Tensor& k, const Tensor& v, const Tensor& out_cache_loc, Tensor& k_cache,
              Tensor& v_cache) {
  const int64_t n_tokens = k.size(0), n_slots = k_cache.size(0);
  const size_t row_bytes = static_cast<size_t>(k.size(1) * k.size(2)) * k.element_size();
  const int32_t* loc = out_cache_loc.data<int32_t>();
  for (int64_t i = 0; i < n_tokens; ++i)
    VELA_CHECK(loc[i] >= 0 && loc[i] < n_slots, "kv_write: slot ", loc[i], " out of range [0, ",
               n_slots, ")");
  const char* kp = static_cast<const char*>(k.data_ptr());
  const char* vp = static_cast<const char*>(v.data_ptr());
  char* kc = static_cast<char*>(k_cache.data_ptr());
  char* vc = static_cast<char*>(v_cache.data_ptr());
  const int64_t ks = k.stride(0) * static_cast<int64_t>(k.element_size());
  const int64_t vs = v.stride(0) * static_cast<int64_t>(v.element_size());
  for (int64_t i = 0; i < n_tokens; ++i) {
    std::memcpy(kc + loc[i] * row_bytes, kp + i * ks, row_bytes);
    std::memcpy(vc + loc[i] * row_bytes, vp + i * vs, row_bytes);
  }
}

void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                     const Tensor& req_to_token, const Tensor& req_pool_indices,
                     const Tensor& seq_lens, const Tensor& qo_indptr, float scale, Tensor& out) {
  const int64_t n_heads = q.size(1), d = q.size(2);
  const int64_t n_kv = k_cache.size(1), n_rep = n_heads / n_kv, n_slots = k_cache.size(0);
  const int64_t n_seqs = seq_lens.size(0), max_ctx = req_to_token.size(1);
  const int32_t* qo = qo_indptr.data<int32_t>();
  const int32_t* lens = seq_lens.data<int32_t>();
  const int32_t* rows = req_pool_indices.data<int32_t>();
  const int32_t* r2t = req_to_token.data<int32_t>();
  // Work blocks (sequence, first query token, query count), and a slot range check before any
  // kernel reads through the table. Reused across steps: no allocation once warm.
  struct Block {
    int32_t seq, t0, n_q;
  };
  thread_local std::vector<Block> blocks_storage;
  std::vector<Block>& blocks = blocks_storage;  // this thread's: the workers below read it
  blocks.clear();
  for (int64_t s = 0; s < n_seqs; ++s) {
    for (int32_t t = qo[s]; t < qo[s + 1]; t += static_cast<int32_t>(kQueryBlock))
      blocks.push_back({static_cast<int32_t>(s), t,
                        std::min(qo[s + 1] - t, static_cast<int32_t>(kQueryBlock))});
    const int32_t* slots = r2t + rows[s] * max_ctx;
    for (int32_t p = 0; p < lens[s]; ++p)
      VELA_CHECK(slots[p] >= 0 && slots[p] < n_slots, "paged_attention: sequence ", s,
                 " position ", p, " maps to slot ", slots[p], " outside the cache");
  }
  const int64_t q_row_stride = q.stride(0);
  visit_float(q.dtype(), [&](auto qtag) {
    using TQ = typename decltype(qtag)::type;
    visit_float(k_cache.dtype(), [&](auto ktag) {
      using TK = typename decltype(ktag)::type;
      const TQ* qp = static_cast<const TQ*>(q.data_ptr());
      const TK* kc = static_cast<const TK*>(k_cache.data_ptr());
      const TK* vc = static_cast<const TK*>(v_cache.data_ptr());
      TQ* op = static_cast<TQ*>(out.data_ptr());
      // A prompt's keys and values widened to f32 (K transposed) once per KV head, shared by its
      // query blocks instead of widened by each of them (a 1024-token prompt has 64 blocks).
      // (This thread's buffers, by reference: a worker naming a thread_local gets its own.)
      thread_local std::vector<int64_t> wide_off_storage;  // per sequence: offset in wide, or -1
      thread_local std::vector<float> wide_storage;
      thread_local std::vector<WideFill> fills_storage;
      std::vector<int64_t>& wide_off = wide_off_storage;
      std::vector<float>& wide = wide_storage;
      std::vector<WideFill>& fills = fills_storage;
      wide_off.assign(static_cast<size_t>(n_seqs), -1);
      fills.clear();
      int64_t wide_size = 0;
      for (int64_t s = 0; s < n_seqs; ++s) {
        const int64_t len = lens[s], need = 2 * n_kv * len * d;
        if (qo[s + 1] - qo[s] <= kQueryBlock || wide_size + need > kWideMaxFloats) continue;
        wide_off[static_cast<size_t>(s)] = wide_size;
        for (int64_t g = 0; g < n_kv; ++g)
          for (int64_t p = 0; p < len; p += kWideChunk)
            fills.push_back({static_cast<int32_t>(s), static_cast<int32_t>(g),
                             static_cast<int32_t>(p),
                             static_cast<int32_t>(std::min<int64_t>(len, p + kWideChunk))});
        wide_size += need;
      }
      if (static_cast<int64_t>(wide.size()) < wide_size)
        wide.resize(static_cast<size_t>(wide_size));
      // (s, g)'s block: K^T [d, len] then V [len, d].
      auto wide_at = [&](int64_t s, int64_t g) {
        return wide.data() + wide_off[static_cast<size_t>(s)] + 2 * g * lens[s] * d;
      };
      parallel_for(static_cast<int64_t>(fills.size()), 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const WideFill& f = fills[static_cast<size_t>(i)];
          const int32_t* slots = r2t + rows[f.seq] * max_ctx;
          const int64_t len = lens[f.seq];
          auto key = [&](int64_t p) { return kc + (slots[p] * n_kv + f.g) * d; };
          auto val = [&](int64_t p) { return vc + (slots[p] * n_kv + f.g) * d; };
          float* kt = wide_at(f.seq, f.g);
          widen_keys(key, val, f.p_begin, f.p_end, d, kt, len, kt + len * d);
        }
      });
      // Items differ in cost (a causal block's keys grow with its position): taken one at a time.
      parallel_for_dynamic(static_cast<int64_t>(blocks.size()) * n_kv, 1,
                           [&](int64_t begin, int64_t end) {
        thread_local std::vector<float> qbuf;
        if (qbuf.size() < static_cast<size_t>(kQueryBlock * n_rep * d))
          qbuf.resize(static_cast<size_t>(kQueryBlock * n_rep * d));
        for (int64_t item = begin; item < end; ++item) {
          const int64_t g = item % n_kv;
          const Block& b = blocks[static_cast<size_t>(item / n_kv)];
          const int64_t q_len = qo[b.seq + 1] - qo[b.seq];
          const int64_t first_pos = lens[b.seq] - q_len + (b.t0 - qo[b.seq]);
          const int32_t* slots = r2t + rows[b.seq] * max_ctx;
          for (int64_t qi = 0; qi < b.n_q; ++qi)
            query_rows_f32(qp + (b.t0 + qi) * q_row_stride + g * n_rep * d, n_rep, d,
                           qbuf.data() + qi * n_rep * d);
          auto key = [&](int64_t p) { return kc + (slots[p] * n_kv + g) * d; };
          auto val = [&](int64_t p) { return vc + (slots[p] * n_kv + g) * d; };
          if (b.n_q == 1) {  // decode: one query per KV head group
            TQ* dst = op + (b.t0 * n_heads + g * n_rep) * d;
            if (!attend_one_query_fast(qbuf.data(), n_rep, d, first_pos + 1, key, val, scale, dst,
                                       d)) {
              auto vis = [](int64_t) { return true; };
              attend(qbuf.data(), n_rep, d, first_pos + 1, key, val, vis, scale, dst, d);
            }
          } else {
            auto dst = [&](int64_t r) {
              return op + ((b.t0 + r / n_rep) * n_heads + g * n_rep + r % n_rep) * d;
            };
            WideKeys wk;
            if (wide_off[static_cast<size_t>(b.seq)] >= 0) {
              const float* kt = wide_at(b.seq, g);
              wk = {kt, lens[b.seq], kt + lens[b.seq] * d};
            }
            attend_query_block<TQ>(qbuf.data(), b.n_q, n_rep, d, first_pos, key, val, wk, scale,
                                   dst);
          }
        }
      });
    });
  });
}

void paged_decode_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const Tensor& req_to_token, const Tensor& req_pool_indices,
                            const Tensor& seq_lens, float scale, int /*n_splits*/,
                            Tensor& /*o_part*/, Tensor& /*lse_part*/, Tensor& out,
                            const L2Warm& /*warm*/) {
  // One query per sequence: qo_indptr = 0, 1, ..., n_seqs.
  // qo_indptr = 0, 1, ..., n_seqs in a buffer kept across steps (decode allocates nothing).
  const int64_t n_seqs = seq_lens.size(0);
  thread_local std::vector<int32_t> qo;
  if (static_cast<int64_t>(qo.size()) < n_seqs + 1) qo.resize(static_cast<size_t>(n_seqs + 1));
  for (int64_t s = 0; s <= n_seqs; ++s) qo[s] = static_cast<int32_t>(s);
  Tensor qo_indptr = Tensor::from_blob(qo.data(), {n_seqs + 1}, DType::kI32, Device::cpu());
  paged_attention(q, k_cache, v_cache, req_to_token, req_pool_indices, seq_lens, qo_indptr, scale,
                  out);
}

void paged_prefill_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                             const Tensor& req_to_token, const Tensor& req_pool_indices,
                             const Tensor& seq_lens, const Tensor& qo_indptr,
                             const Tensor& /*tile_seq_idx*/, const Tensor& /*tile_q_start*/,
                             int64_t /*n_tiles*/, int /*tile_q*/, float scale, Tensor& out) {
  paged_attention(q, k_cache, v_cache, req_to_token, req_pool_indices, seq_lens, qo_indptr, scale,
                  out);
}

}  // namespace vela::ops::cpu
