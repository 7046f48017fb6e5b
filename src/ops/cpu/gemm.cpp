// CPU GEMM. f32: 1..16 rows against an [N, K] weight on the direct small-M kernel, else OpenBLAS
// sgemm, single-threaded per OpenMP chunk of C. bf16 a @ w^T on avx512_bf16 CPUs, any M: AMX
// tiles where the CPU has them, else register tiles of vdpbf16ps (bf16 pairs straight into fp32
// sums, B streamed once per 256 rows, parallel over N). Other 16-bit products: the direct kernel
// for decode-sized M (widened in registers), else f32 panels of A and B widened into scratch and
// fed to sgemm. Accumulation is always fp32. The register-tile kernels prefetch the weight rows
// ahead into L2 and split the columns with parallel_for_balanced. The bf16 w^T kernels and the
// small-M kernel are batch-invariant: a row's result is the same bits whatever the other rows (an
// M = 1 decode equals that row of an M = 5 verify step or of a prefill).
#include <cblas.h>

#include <algorithm>
#include <cstring>

#include "core/parallel.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/gemm_amx.h"
#include "ops/cpu/vec.h"

namespace vela::ops::cpu {

namespace {

constexpr int64_t kSmallM = 16;     // up to this many rows of op(a): direct kernel
constexpr int64_t kPanelM = 512;    // rows of op(a) widened per pass over B
constexpr int64_t kPanelN = 256;    // columns of op(b) widened per sgemm call (per thread)
constexpr int64_t kColChunk = 256;  // columns per accumulator block in the non-transposed-B kernel
// Decode-sized products against an [N, K] weight: how far ahead of the register tiles the weight
// rows are prefetched, and the weight bytes of the column chunks the threads take.
constexpr int64_t kPrefetchBytes = 24 << 10;
constexpr int64_t kChunkBytes = 64 << 10;

// Whole groups of `group` weight rows of row_bytes each in about `bytes` (at least one group).
inline int64_t rows_in(int64_t bytes, int64_t group, int64_t row_bytes) {
  return group * std::max<int64_t>(1, bytes / (group * row_bytes));
}

// One batch of one operand: base pointer and leading dimension (elements).
template <typename T>
struct Mat {
  T* p;
  int64_t ld;
};

struct Dims {
  int64_t m, n, k;
  bool ta, tb;
  float alpha, beta;
};

int64_t ld_of(const Tensor& t) {
  int64_t rows = t.size(-2), cols = t.size(-1);
  return std::max<int64_t>(rows <= 1 ? cols : t.stride(-2), 1);
}

// v = alpha * acc + beta * old (old not read when beta == 0, BLAS convention).
template <typename TC>
inline TC epilogue(float acc, const TC* old, const Dims& d) {
  float v = d.alpha * acc;
  if (d.beta != 0.0f) v += d.beta * to_f32(*old);
  return from_f32<TC>(v);
}

// ---------------------------------------------------------------------------------------------
// f32

// Smallest amount of work worth a thread of its own: multiply-adds, or elements widened to f32.
constexpr int64_t kMinMacsPerThread = int64_t{1} << 18;
constexpr int64_t kMinWidenPerThread = int64_t{1} << 15;

// Grain (in output columns or rows) such that each chunk does at least kMinMacsPerThread.
inline int64_t grain_for(int64_t macs_per_unit, int64_t min_grain) {
  return std::max(min_grain, kMinMacsPerThread / std::max<int64_t>(macs_per_unit, 1) + 1);
}

// OpenBLAS runs single-threaded inside OpenMP chunks of the output: one thread pool for all CPU
// ops. (Two pools - OpenBLAS's pthreads spinning after each call next to OpenMP's team - fight for
// the cores and slow small GEMMs down by 10x or more on a busy machine.)
void blas_single_threaded() {
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

void sgemm_block(const Dims& d, int64_t m, int64_t n, const float* a, int64_t lda, const float* b,
                 int64_t ldb, float* c, int64_t ldc) {
  if (m == 1) {
    // One row: y = alpha * op(b)^T x + beta * y, with x the single row of op(a).
    int64_t incx = d.ta ? lda : 1;
    if (d.beta == 0.0f) std::fill(c, c + n, 0.0f);
    if (d.tb) {
      cblas_sgemv(CblasRowMajor, CblasNoTrans, n, d.k, d.alpha, b, ldb, a, incx, d.beta, c, 1);
    } else {
      cblas_sgemv(CblasRowMajor, CblasTrans, d.k, n, d.alpha, b, ldb, a, incx, d.beta, c, 1);
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, d.ta ? CblasTrans : CblasNoTrans, d.tb ? CblasTrans : CblasNoTrans, m,
              n, d.k, d.alpha, a, lda, b, ldb, d.beta, c, ldc);
}

// c[m, n] = alpha * op(a) op(b) + beta * c, split over the longer of M and N across threads.
void sgemm_parallel(const Dims& d, const float* a, int64_t lda, const float* b, int64_t ldb,
                    float* c, int64_t ldc) {
  blas_single_threaded();
  if (d.n >= d.m) {
    parallel_for(d.n, grain_for(d.m * d.k, 16), [&](int64_t n0, int64_t n1) {
      sgemm_block(d, d.m, n1 - n0, a, lda, b + (d.tb ? n0 * ldb : n0), ldb, c + n0, ldc);
    });
  } else {
    parallel_for(d.m, grain_for(d.n * d.k, 4), [&](int64_t m0, int64_t m1) {
      sgemm_block(d, m1 - m0, d.n, a + (d.ta ? m0 : m0 * lda), lda, b, ldb, c + m0 * ldc, ldc);
    });
  }
}

void sgemm_batch(Mat<const float> a, Mat<const float> b, Mat<float> c, const Dims& d) {
  sgemm_parallel(d, a.p, a.ld, b.p, b.ld, c.p, c.ld);
}

// ---------------------------------------------------------------------------------------------
// 16-bit inputs, small M: direct kernels.

#if defined(__AVX2__)  // (AVX-512 builds define it too)
// The kBytes at p into L2, a prefetch a cache line.
template <int64_t kBytes>
inline void prefetch_l2(const void* p) {
  for (int64_t off = 0; off < kBytes; off += 64)
    _mm_prefetch(static_cast<const char*>(p) + off, _MM_HINT_T1);
}
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__)
// out[j] = dot(af + j*k, brow) for j < NM; KU independent accumulators per row hide FMA latency.
// With `ahead`, the row there goes to L2 as brow streams (the same span a step).
template <int NM, int KU, typename T>
inline void dot_rows(const float* af, int64_t k, const T* brow, float* out,
                     const T* ahead = nullptr) {
  __m512 acc[NM][KU];
  for (int j = 0; j < NM; ++j)
    for (int u = 0; u < KU; ++u) acc[j][u] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 * KU <= k; i += 16 * KU) {
    if (ahead) prefetch_l2<16 * KU * sizeof(T)>(ahead + i);
    for (int u = 0; u < KU; ++u) {
      __m512 bv = widen16(brow + i + 16 * u);
      for (int j = 0; j < NM; ++j)
        acc[j][u] = _mm512_fmadd_ps(_mm512_loadu_ps(af + j * k + i + 16 * u), bv, acc[j][u]);
    }
  }
  for (; i < k; i += 16) {
    __mmask16 mask = k - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (k - i)) - 1u);
    __m512 bv = widen16(brow + i, mask);
    for (int j = 0; j < NM; ++j)
      acc[j][0] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, af + j * k + i), bv, acc[j][0]);
  }
  for (int j = 0; j < NM; ++j) {
    __m512 s = acc[j][0];
    for (int u = 1; u < KU; ++u) s = _mm512_add_ps(s, acc[j][u]);
    out[j] = hsum512(s);
  }
}
#elif defined(__AVX2__) && defined(__FMA__)
// AVX2 (no AVX-512: e.g. AMD Zen 2 / 3): the same kernel with 8-lane vectors. Element i of a row
// goes to accumulator (i / 8) % KU while a full 8 * KU step remains, the rest in chunks of 8
// (zero-padded) to accumulator 0, then the accumulators are added in order: the bits depend on K
// alone, never on NM, so a row's result is the same in every group.
// out[j] = dot(af + j*k, brow) for j < NM (NM * KU <= 8 accumulators of AVX2's 16 registers).
template <int NM, int KU, typename T>
inline void dot_rows(const float* af, int64_t k, const T* brow, float* out,
                     const T* ahead = nullptr) {
  __m256 acc[NM][KU];
  for (int j = 0; j < NM; ++j)
    for (int u = 0; u < KU; ++u) acc[j][u] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 * KU <= k; i += 8 * KU) {
    if (ahead) prefetch_l2<8 * KU * sizeof(T)>(ahead + i);
    for (int u = 0; u < KU; ++u) {
      const __m256 bv = widen8(brow + i + 8 * u);
      for (int j = 0; j < NM; ++j)
        acc[j][u] = _mm256_fmadd_ps(_mm256_loadu_ps(af + j * k + i + 8 * u), bv, acc[j][u]);
    }
  }
  for (; i < k; i += 8) {
    const int64_t n = std::min<int64_t>(8, k - i);
    const __m256 bv = n == 8 ? widen8(brow + i) : widen8_tail(brow + i, n);
    for (int j = 0; j < NM; ++j) {
      const __m256 av = n == 8 ? _mm256_loadu_ps(af + j * k + i) : widen8_tail(af + j * k + i, n);
      acc[j][0] = _mm256_fmadd_ps(av, bv, acc[j][0]);
    }
  }
  for (int j = 0; j < NM; ++j) {
    __m256 s = acc[j][0];
    for (int u = 1; u < KU; ++u) s = _mm256_add_ps(s, acc[j][u]);
    out[j] = hsum256(s);
  }
}
#else
template <int NM, int KU, typename T>
inline void dot_rows(const float* af, int64_t k, const T* brow, float* out,
                     const T* /*ahead*/ = nullptr) {
  for (int j = 0; j < NM; ++j) {
    const float* ar = af + j * k;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < k; ++i) s += ar[i] * to_f32(brow[i]);
    out[j] = s;
  }
}
#endif

// Rows [m0, m0+nm) of op(a) (as f32 in af) times one row of b ([N, K] layout). The same two
// accumulators per row for every nm: a row's summation order does not depend on its group.
template <typename T>
inline void dot_group(const float* af, int64_t k, int64_t nm, const T* brow, float* out,
                      const T* ahead = nullptr) {
  switch (nm) {
    case 1:
      dot_rows<1, 2>(af, k, brow, out, ahead);
      break;
    case 2:
      dot_rows<2, 2>(af, k, brow, out, ahead);
      break;
    case 3:
      dot_rows<3, 2>(af, k, brow, out, ahead);
      break;
    default:
      dot_rows<4, 2>(af, k, brow, out, ahead);
      break;
  }
}

#if defined(__AVX512F__) && defined(__AVX512BW__)
// R rows of af (f32, stride k) times C rows of b (stride ldb) into out[r][c], each output summed
// exactly as dot_rows<NM, 2> sums it (chunk pairs into two accumulators, the rest into the first),
// so a row's bits do not depend on the tile; each chunk of b is loaded (widened) once for R rows
// and each chunk of a row of af once for C columns: R + C loads for R x C FMAs, where dot_rows
// takes 1 + NM loads for NM. With `ahead`, the C rows there go to L2 as the tile streams its own.
template <int R, int C, typename T>
inline void dot_tile(const float* af, int64_t k, const T* b, int64_t ldb, float (&out)[3][4],
                     const T* ahead = nullptr) {
  __m512 acc0[R][C], acc1[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc0[r][c] = acc1[r][c] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    if (ahead)
      for (int c = 0; c < C; ++c) prefetch_l2<32 * sizeof(T)>(ahead + c * ldb + i);
    __m512 b0[C], b1[C];
    for (int c = 0; c < C; ++c) {
      b0[c] = widen16(b + c * ldb + i);
      b1[c] = widen16(b + c * ldb + i + 16);
    }
    for (int r = 0; r < R; ++r) {
      const __m512 a0 = _mm512_loadu_ps(af + r * k + i), a1 = _mm512_loadu_ps(af + r * k + i + 16);
      for (int c = 0; c < C; ++c) {
        acc0[r][c] = _mm512_fmadd_ps(a0, b0[c], acc0[r][c]);
        acc1[r][c] = _mm512_fmadd_ps(a1, b1[c], acc1[r][c]);
      }
    }
  }
  for (; i < k; i += 16) {
    const __mmask16 mask = k - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (k - i)) - 1u);
    __m512 bv[C];
    for (int c = 0; c < C; ++c) bv[c] = widen16(b + c * ldb + i, mask);
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_maskz_loadu_ps(mask, af + r * k + i);
      for (int c = 0; c < C; ++c) acc0[r][c] = _mm512_fmadd_ps(av, bv[c], acc0[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) out[r][c] = hsum512(_mm512_add_ps(acc0[r][c], acc1[r][c]));
}

#define VELA_SMALL_M_TILES 1      // dot_tile exists
constexpr int64_t kTileCols = 4;  // its columns: 4 with AVX-512's 32 registers
#elif defined(__AVX2__) && defined(__FMA__)
// Keeps v in a register: gcc would otherwise fold its load into every FMA that reads it (a load
// per column instead of one).
inline void in_register(__m256& v) { asm("" : "+x"(v)); }

// The AVX2 twin: R rows of af times C rows of b, each output summed exactly as the AVX2
// dot_rows<NM, 2> sums it (8-element chunk pairs into two accumulators, the rest zero-padded into
// the first), so a row's bits do not depend on the tile. A 3 x 2 tile keeps its 12 accumulators,
// two chunks of b and a chunk of a row in 15 of the 16 registers: 10 loads for 12 FMAs, where
// dot_rows<4, 2> takes 10 for 8 (100m decode B = 8 on an AVX2 EPYC, one thread: 47-58 -> 39-42 ms a
// step).
template <int R, int C, typename T>
inline void dot_tile(const float* af, int64_t k, const T* b, int64_t ldb, float (&out)[3][4],
                     const T* ahead = nullptr) {
  __m256 acc0[R][C], acc1[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc0[r][c] = acc1[r][c] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    if (ahead)
      for (int c = 0; c < C; ++c) prefetch_l2<16 * sizeof(T)>(ahead + c * ldb + i);
    // The two chunks one after the other, so only one chunk of b is live at a time.
    __m256 bv[C];
    for (int c = 0; c < C; ++c) bv[c] = widen8(b + c * ldb + i);
    for (int r = 0; r < R; ++r) {
      __m256 av = _mm256_loadu_ps(af + r * k + i);
      in_register(av);
      for (int c = 0; c < C; ++c) acc0[r][c] = _mm256_fmadd_ps(av, bv[c], acc0[r][c]);
    }
    for (int c = 0; c < C; ++c) bv[c] = widen8(b + c * ldb + i + 8);
    for (int r = 0; r < R; ++r) {
      __m256 av = _mm256_loadu_ps(af + r * k + i + 8);
      in_register(av);
      for (int c = 0; c < C; ++c) acc1[r][c] = _mm256_fmadd_ps(av, bv[c], acc1[r][c]);
    }
  }
  for (; i < k; i += 8) {
    const int64_t n = std::min<int64_t>(8, k - i);
    __m256 bv[C];
    for (int c = 0; c < C; ++c)
      bv[c] = n == 8 ? widen8(b + c * ldb + i) : widen8_tail(b + c * ldb + i, n);
    for (int r = 0; r < R; ++r) {
      const __m256 av = n == 8 ? _mm256_loadu_ps(af + r * k + i) : widen8_tail(af + r * k + i, n);
      for (int c = 0; c < C; ++c) acc0[r][c] = _mm256_fmadd_ps(av, bv[c], acc0[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) out[r][c] = hsum256(_mm256_add_ps(acc0[r][c], acc1[r][c]));
}

#define VELA_SMALL_M_TILES 1
constexpr int64_t kTileCols = 2;  // with AVX2's 16 registers
#endif

// Calls fn.template operator()<R, C>() for a tile of nr (1..3) rows and nc (1..kMaxC) columns: the
// register tiles' shapes are template arguments.
template <int R, int kMaxC, typename Fn>
inline void with_tile_cols(int64_t nc, Fn&& fn) {
  if constexpr (kMaxC > 1) {
    if (nc < kMaxC) return with_tile_cols<R, kMaxC - 1>(nc, fn);
  }
  fn.template operator()<R, kMaxC>();
}
template <int kMaxC, typename Fn>
inline void with_tile_shape(int64_t nr, int64_t nc, Fn&& fn) {
  if (nr == 1) return with_tile_cols<1, kMaxC>(nc, fn);
  if (nr == 2) return with_tile_cols<2, kMaxC>(nc, fn);
  with_tile_cols<3, kMaxC>(nc, fn);
}

#if defined(__AVX512BF16__)
// R rows of the bf16 a buffer (stride lda) times C rows of b (stride ldb) into out[r][c]:
// vdpbf16ps multiplies the bf16 pairs exactly and adds them into fp32 sums, 32 MACs an instruction
// with no widening. Each 32-element chunk of a row of a is loaded once for C columns and each chunk
// of b once for R rows (R + C loads for R x C instructions). Every output keeps two accumulators
// (even and odd chunks; the tail goes to the odd one) whatever R and C, so its bits depend on
// neither: any blocking, hence any batch, gives the same result. With `ahead`, the C rows there
// (stride ldb) go to L2 a line per row per chunk, as the tile streams its own.
template <int R, int C>
inline void dp_tile(const bf16* a, int64_t lda, int64_t k, const bf16* b, int64_t ldb,
                    float (&out)[3][4], const bf16* ahead = nullptr) {
  __m512 acc0[R][C], acc1[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc0[r][c] = acc1[r][c] = _mm512_setzero_ps();
  auto ld = [](const bf16* p) { return (__m512bh)_mm512_loadu_si512(p); };
  // acc[r][c] += a[r][i, i + 32) . b[c][i, i + 32)
  auto chunk = [&](__m512(&acc)[R][C], int64_t i, auto load) {
    __m512bh bv[C];
    for (int c = 0; c < C; ++c) bv[c] = load(b + c * ldb + i);
    for (int r = 0; r < R; ++r) {
      const __m512bh av = load(a + r * lda + i);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], av, bv[c]);
    }
  };
  int64_t i = 0;
  for (; i + 64 <= k; i += 64) {
    if (ahead)
      for (int c = 0; c < C; ++c) prefetch_l2<64 * sizeof(bf16)>(ahead + c * ldb + i);
    chunk(acc0, i, ld);
    chunk(acc1, i + 32, ld);
  }
  if (i + 32 <= k) {
    chunk(acc0, i, ld);
    i += 32;
  }
  if (i < k) {  // both operands masked: a zero in b must not meet an Inf / NaN past a's row
    const __mmask32 mask = static_cast<__mmask32>((uint64_t{1} << (k - i)) - 1u);
    chunk(acc1, i, [mask](const bf16* p) { return (__m512bh)_mm512_maskz_loadu_epi16(mask, p); });
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) out[r][c] = hsum512(_mm512_add_ps(acc0[r][c], acc1[r][c]));
}

// Rows of op(a) per pass over the weight in bf16_wt: their dense and packed copies (~1 KB a row
// at K = 2048) stay in L2 while the threads stream w.
constexpr int64_t kRowChunk = 256;

// The AMX tile path takes this product: bf16 a @ w^T with K a multiple of 32 on an AMX CPU.
inline bool amx_tiles(const Dims& d) { return d.tb && d.k % amx::kTileK == 0 && amx::available(); }

// c = op(a) @ b^T for bf16 a and b ([N, K]), any M. Per chunk of kRowChunk rows, op(a) is copied
// to a dense bf16 [m, k] buffer (exact) and packed for the tiles, then threads take blocks of 16
// columns: full blocks are tile products (gemm_amx.h) when AMX is there, a last partial block (or
// all, without AMX) the vdpbf16ps register tiles (dp_tile). Which kernel a column gets depends on
// N and K only, never on M.
template <typename TC>
void bf16_wt(Mat<const bf16> a, Mat<const bf16> b, Mat<TC> c, const Dims& d) {
  const bool tiles = amx_tiles(d);
  constexpr int64_t kBlock = amx::kTileN, kSpan = 256;  // columns per tile call
  const int64_t n_blocks = (d.n + kBlock - 1) / kBlock;
  for (int64_t m0 = 0; m0 < d.m; m0 += kRowChunk) {
    const int64_t m = std::min(kRowChunk, d.m - m0);
    const int64_t dense = m * d.k, packed_n = tiles ? amx::packed_size(m, d.k) : 0;
    bf16* ab = reinterpret_cast<bf16*>(scratch(static_cast<size_t>(dense + packed_n) / 2 + 1, 0));
    for (int64_t r = 0; r < m; ++r) {
      if (!d.ta) {
        std::memcpy(ab + r * d.k, a.p + (m0 + r) * a.ld, static_cast<size_t>(d.k) * sizeof(bf16));
      } else {
        for (int64_t i = 0; i < d.k; ++i) ab[r * d.k + i] = a.p[i * a.ld + m0 + r];
      }
    }
    bf16* packed = ab + dense;
    if (tiles) amx::pack_rows(ab, m, d.k, packed);
    TC* c0 = c.p + m0 * c.ld;
    auto body = [&](int64_t b0, int64_t b1) {
      const int64_t n0 = b0 * kBlock, n1 = std::min(d.n, b1 * kBlock);
      int64_t col = n0;
      if (tiles) {
        float* acc = scratch(static_cast<size_t>(m * kSpan), 1);
        for (const int64_t full = n0 + (n1 - n0) / kBlock * kBlock; col < full;) {
          const int64_t span = std::min(kSpan, full - col);
          amx::gemm_rows_wt(packed, m, d.k, b.p + col * b.ld, b.ld, span, acc, span);
          for (int64_t r = 0; r < m; ++r) {
            TC* dst = c0 + r * c.ld + col;
            for (int64_t j = 0; j < span; ++j) dst[j] = epilogue(acc[r * span + j], dst + j, d);
          }
          col += span;
        }
      }
      // Groups of 4 columns (their weight rows stay in L1 / L2) against every row of the chunk,
      // 3 rows at a time. One or two rows (decode) take one column at a time: the weight is then
      // one sequential stream, which the hardware prefetcher follows (four interleaved streams of
      // one row each made bench 100m decode B=1 15% slower on an AMD EPYC VM); same bits.
      const int64_t group = m <= 2 ? 1 : 4;
      // The hardware prefetcher does not follow short or interleaved weight streams across pages
      // far enough ahead of DRAM: the first row tile sends the group ~24 KB ahead to L2 as it
      // goes, a line per weight row per chunk (100m shapes, bench/results/model_cpu.txt: 3-8 rows
      // 25-30% faster than all of a group's lines at once before the tile, 35% than none; one
      // row ~10% faster than none).
      const int64_t ahead = rows_in(kPrefetchBytes, group, d.k * int64_t{sizeof(bf16)});
      float out[3][4];
      for (; col < n1; col += group) {
        const int64_t nc = std::min<int64_t>(group, n1 - col);
        const bool fetch = col + ahead + group <= d.n;  // past the chunk: the share goes on
        for (int64_t r0 = 0; r0 < m; r0 += 3) {
          const int64_t nr = std::min<int64_t>(3, m - r0);
          const bf16* pf = fetch && r0 == 0 ? b.p + (col + ahead) * b.ld : nullptr;
          with_tile_shape<4>(nr, nc, [&]<int R, int C>() {
            dp_tile<R, C>(ab + r0 * d.k, d.k, d.k, b.p + col * b.ld, b.ld, out, pf);
          });
          for (int64_t rr = 0; rr < nr; ++rr) {
            TC* dst = c0 + (r0 + rr) * c.ld + col;
            for (int64_t jj = 0; jj < nc; ++jj) dst[jj] = epilogue(out[rr][jj], dst + jj, d);
          }
        }
      }
    };
    // Each thread streams its share of the columns in chunks of ~64 KB of weights; one whose core
    // fell behind (a shared VM's) hands its share's tail to the others instead of holding them at
    // the join (decode B=1 on 2 vCPUs: the other thread's wait 7.8% -> 5.5% of the samples).
    const int64_t chunk = rows_in(kChunkBytes, kBlock, d.k * int64_t{sizeof(bf16)}) / kBlock;
    parallel_for_balanced(n_blocks, std::max<int64_t>(1, grain_for(m * d.k, 16) / kBlock), chunk,
                          body);
  }
}
#endif

// op(a) as a dense f32 [m, k] matrix (small: m <= kSmallM).
template <typename T>
void widen_a(Mat<const T> a, const Dims& d, float* af) {
  if (!d.ta) {
    for (int64_t r = 0; r < d.m; ++r) load_f32(a.p + r * a.ld, af + r * d.k, d.k);
  } else {
    for (int64_t i = 0; i < d.k; ++i)
      for (int64_t r = 0; r < d.m; ++r) af[r * d.k + i] = to_f32(a.p[i * a.ld + r]);
  }
}

template <typename T, typename TC>
void small_m_batch(Mat<const T> a, Mat<const T> b, Mat<TC> c, const Dims& d) {
  float* af = scratch(static_cast<size_t>(d.m * d.k), 0);
  widen_a(a, d, af);
  if (d.tb) {
    // As bf16_wt: the threads take chunks of ~kChunkBytes of weight rows (a multiple of the tiles'
    // 4 columns), and the weight ~kPrefetchBytes ahead goes to L2 as the kernels stream.
    const int64_t row_bytes = d.k * int64_t{sizeof(T)};
    const int64_t chunk = rows_in(kChunkBytes, 4, row_bytes);
#if defined(VELA_SMALL_M_TILES)
    if (d.m >= 3) {  // register tiles: groups of kTileCols columns against the rows, 3 at a time
      const int64_t ahead = rows_in(kPrefetchBytes, kTileCols, row_bytes);
      parallel_for_balanced(d.n, grain_for(d.m * d.k, 16), chunk, [&](int64_t n0, int64_t n1) {
        float out[3][4];
        for (int64_t col = n0; col < n1; col += kTileCols) {
          const int64_t nc = std::min<int64_t>(kTileCols, n1 - col);
          const bool fetch = col + ahead + kTileCols <= d.n;
          for (int64_t r0 = 0; r0 < d.m; r0 += 3) {
            const int64_t nr = std::min<int64_t>(3, d.m - r0);
            const T* pf = fetch && r0 == 0 ? b.p + (col + ahead) * b.ld : nullptr;
            with_tile_shape<kTileCols>(nr, nc, [&]<int R, int C>() {
              dot_tile<R, C>(af + r0 * d.k, d.k, b.p + col * b.ld, b.ld, out, pf);
            });
            for (int64_t rr = 0; rr < nr; ++rr) {
              TC* dst = c.p + (r0 + rr) * c.ld + col;
              for (int64_t jj = 0; jj < nc; ++jj) dst[jj] = epilogue(out[rr][jj], dst + jj, d);
            }
          }
        }
      });
      return;
    }
#endif
    // b is [N, K]: each output column is a dot product with one contiguous row of b.
    const int64_t ahead = rows_in(kPrefetchBytes, 1, row_bytes);
    parallel_for_balanced(d.n, grain_for(d.m * d.k, 16), chunk, [&](int64_t n0, int64_t n1) {
      float out[4];
      for (int64_t col = n0; col < n1; ++col) {
        const T* brow = b.p + col * b.ld;
        const T* pf = col + ahead < d.n ? brow + ahead * b.ld : nullptr;
        for (int64_t m0 = 0; m0 < d.m; m0 += 4) {
          int64_t nm = std::min<int64_t>(4, d.m - m0);
          dot_group(af + m0 * d.k, d.k, nm, brow, out, m0 == 0 ? pf : nullptr);
          for (int64_t j = 0; j < nm; ++j) {
            TC* dst = c.p + (m0 + j) * c.ld + col;
            *dst = epilogue(out[j], dst, d);
          }
        }
      }
    });
    return;
  }
  // b is [K, N]: accumulate rows of b scaled by a[m, k] into column blocks, reading b once.
  parallel_for(d.n, grain_for(d.m * d.k, 64), [&](int64_t n0, int64_t n1) {
    float* acc = scratch(static_cast<size_t>(d.m * kColChunk), 1);
    float* brow = scratch(kColChunk, 2);
    for (int64_t c0 = n0; c0 < n1; c0 += kColChunk) {
      int64_t nc = std::min<int64_t>(kColChunk, n1 - c0);
      std::fill(acc, acc + d.m * nc, 0.0f);
      for (int64_t i = 0; i < d.k; ++i) {
        load_f32(b.p + i * b.ld + c0, brow, nc);
        for (int64_t r = 0; r < d.m; ++r) {
          float s = af[r * d.k + i];
          float* ar = acc + r * nc;
#pragma omp simd
          for (int64_t j = 0; j < nc; ++j) ar[j] += s * brow[j];
        }
      }
      for (int64_t r = 0; r < d.m; ++r) {
        TC* dst = c.p + r * c.ld + c0;
        for (int64_t j = 0; j < nc; ++j) dst[j] = epilogue(acc[r * nc + j], dst + j, d);
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------
// 16-bit inputs, larger M: widen a panel of A rows once (shared), then each thread widens its own
// column panels of B into private scratch and runs single-threaded sgemm on its block of C.

template <typename T, typename TC>
void panel_batch(Mat<const T> a, Mat<const T> b, Mat<TC> c, const Dims& d) {
  blas_single_threaded();
  const int64_t pm_max = std::min(kPanelM, d.m);
  float* abuf = scratch(static_cast<size_t>(pm_max * d.k), 0);
  for (int64_t m0 = 0; m0 < d.m; m0 += kPanelM) {
    const int64_t pm = std::min(kPanelM, d.m - m0);
    const int64_t lda = d.ta ? pm : d.k;
    if (!d.ta) {  // rows m0.. of a [M, K] -> abuf [pm, K]
      parallel_for(pm, std::max<int64_t>(1, kMinWidenPerThread / d.k), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) load_f32(a.p + (m0 + r) * a.ld, abuf + r * d.k, d.k);
      });
    } else {  // columns m0.. of a [K, M] -> abuf [K, pm]
      parallel_for(d.k, std::max<int64_t>(1, kMinWidenPerThread / pm), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) load_f32(a.p + r * a.ld + m0, abuf + r * pm, pm);
      });
    }
    parallel_for(d.n, grain_for(pm * d.k, 16), [&](int64_t n_lo, int64_t n_hi) {
      const int64_t pn_max = std::min(kPanelN, n_hi - n_lo);
      float* bbuf = scratch(static_cast<size_t>(pn_max * d.k), 1);
      float* cbuf =
          std::is_same_v<TC, float> ? nullptr : scratch(static_cast<size_t>(pm * pn_max), 2);
      for (int64_t n0 = n_lo; n0 < n_hi; n0 += kPanelN) {
        const int64_t pn = std::min(kPanelN, n_hi - n0);
        int64_t ldb;
        if (d.tb) {  // rows n0.. of b [N, K] -> bbuf [pn, K]
          ldb = d.k;
          for (int64_t r = 0; r < pn; ++r) load_f32(b.p + (n0 + r) * b.ld, bbuf + r * d.k, d.k);
        } else {  // columns n0.. of b [K, N] -> bbuf [K, pn]
          ldb = pn;
          for (int64_t r = 0; r < d.k; ++r) load_f32(b.p + r * b.ld + n0, bbuf + r * pn, pn);
        }
        Dims blk = d;
        blk.m = pm;
        blk.n = pn;
        TC* cblk = c.p + m0 * c.ld + n0;
        if constexpr (std::is_same_v<TC, float>) {
          sgemm_block(blk, pm, pn, abuf, lda, bbuf, ldb, cblk, c.ld);
        } else {
          if (d.beta != 0.0f) {
            for (int64_t r = 0; r < pm; ++r) load_f32(cblk + r * c.ld, cbuf + r * pn, pn);
          }
          sgemm_block(blk, pm, pn, abuf, lda, bbuf, ldb, cbuf, pn);
          for (int64_t r = 0; r < pm; ++r) store_f32(cbuf + r * pn, cblk + r * c.ld, pn);
        }
      }
    });
  }
}

// Runs bf16_wt when it takes this product (bf16 a @ w^T on avx512_bf16); false otherwise.
template <typename T, typename TC>
bool try_bf16_wt(Mat<const T> a, Mat<const T> b, Mat<TC> c, const Dims& d) {
#if defined(__AVX512BF16__)
  if constexpr (std::is_same_v<T, bf16>) {
    if (d.tb) {
      bf16_wt(a, b, c, d);
      return true;
    }
  }
#endif
  (void)a, (void)b, (void)c, (void)d;
  return false;
}

// c = beta * c for every element of one batch (K == 0).
template <typename TC>
void scale_only(Mat<TC> c, const Dims& d) {
  for (int64_t r = 0; r < d.m; ++r)
    for (int64_t j = 0; j < d.n; ++j) c.p[r * c.ld + j] = epilogue(0.0f, c.p + r * c.ld + j, d);
}

template <typename T, typename TC>
void gemm_typed(const Tensor& a, const Tensor& b, Tensor& c, Dims d) {
  int64_t n_batch = a.dim() == 3 ? a.size(0) : 1;
  int64_t sa = a.dim() == 3 ? a.stride(0) : 0, sb = b.dim() == 3 ? b.stride(0) : 0,
          sc = c.dim() == 3 ? c.stride(0) : 0;
  Mat<const T> ma{static_cast<const T*>(a.data_ptr()), ld_of(a)};
  Mat<const T> mb{static_cast<const T*>(b.data_ptr()), ld_of(b)};
  Mat<TC> mc{static_cast<TC*>(c.data_ptr()), ld_of(c)};
  // A shared B with batch-contiguous A and C is one GEMM with n_batch * M rows.
  if (n_batch > 1 && b.dim() == 2 && !d.ta && sa == d.m * ma.ld && sc == d.m * mc.ld) {
    d.m *= n_batch;
    n_batch = 1;
  }
  for (int64_t bi = 0; bi < n_batch; ++bi) {
    Mat<const T> ab{ma.p + bi * sa, ma.ld};
    Mat<const T> bb{mb.p + bi * sb, mb.ld};
    Mat<TC> cb{mc.p + bi * sc, mc.ld};
    if (d.k == 0) {
      scale_only(cb, d);
    } else if constexpr (std::is_same_v<T, float>) {
      // 1..16 rows against an [N, K] weight (f32 decode and verify steps): the dot-product kernels
      // stream each weight row once for all rows, where sgemm packs the weight on every call and
      // sgemv streamed at ~50% of the read bandwidth (bench/results/model_cpu.txt).
      if (d.tb && d.m <= kSmallM)
        small_m_batch(ab, bb, cb, d);
      else
        sgemm_batch(ab, bb, cb, d);
    } else if (try_bf16_wt(ab, bb, cb, d)) {
    } else if (d.m <= kSmallM) {
      small_m_batch(ab, bb, cb, d);
    } else {
      panel_batch(ab, bb, cb, d);
    }
  }
}

}  // namespace

bool bf16_native() {
#if defined(__AVX512BF16__)
  static const bool on = __builtin_cpu_supports("avx512bf16");
  return on;
#else
  return false;
#endif
}

void gemm(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha,
          float beta) {
  Dims d{c.size(-2), c.size(-1), trans_a ? a.size(-2) : a.size(-1), trans_a, trans_b, alpha, beta};
  if (d.m == 0 || d.n == 0 || (a.dim() == 3 && a.size(0) == 0)) return;
  bool c_f32 = c.dtype() == DType::kF32;
  switch (a.dtype()) {
    case DType::kF32:
      gemm_typed<float, float>(a, b, c, d);
      break;
    case DType::kBF16:
      c_f32 ? gemm_typed<bf16, float>(a, b, c, d) : gemm_typed<bf16, bf16>(a, b, c, d);
      break;
    case DType::kF16:
      c_f32 ? gemm_typed<f16, float>(a, b, c, d) : gemm_typed<f16, f16>(a, b, c, d);
      break;
    default:
      VELA_THROW(InternalError, "cpu gemm: unsupported dtype ", dtype_name(a.dtype()));
  }
}

}  // namespace vela::ops::cpu
