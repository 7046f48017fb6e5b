// CPU GEMM. f32: OpenBLAS sgemm (sgemv for one row). bf16/f16 inputs: a direct small-M kernel for
// decode-sized M (the 16-bit B is streamed once and widened in registers, parallel over N), else
// f32 panels of A and B converted into scratch and fed to sgemm. Accumulation is always fp32.
#include <cblas.h>

#include <algorithm>

#include "core/parallel.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/vec.h"

namespace vela::ops::cpu {

namespace {

constexpr int64_t kSmallM = 16;     // up to this many rows of op(a): direct kernel
constexpr int64_t kPanelM = 256;    // rows of op(a) converted per sgemm call
constexpr int64_t kPanelN = 1024;   // columns of op(b) converted per sgemm call
constexpr int64_t kColChunk = 256;  // columns per accumulator block in the non-transposed-B kernel

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
void sgemm_batch(Mat<const float> a, Mat<const float> b, Mat<float> c, const Dims& d) {
  if (d.m == 1) {
    // One row: y = alpha * op(b)^T x + beta * y, with x the single row of op(a).
    int64_t incx = d.ta ? a.ld : 1;
    if (d.beta == 0.0f) std::fill(c.p, c.p + d.n, 0.0f);
    if (d.tb) {
      cblas_sgemv(CblasRowMajor, CblasNoTrans, d.n, d.k, d.alpha, b.p, b.ld, a.p, incx, d.beta, c.p,
                  1);
    } else {
      cblas_sgemv(CblasRowMajor, CblasTrans, d.k, d.n, d.alpha, b.p, b.ld, a.p, incx, d.beta, c.p,
                  1);
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, d.ta ? CblasTrans : CblasNoTrans, d.tb ? CblasTrans : CblasNoTrans,
              d.m, d.n, d.k, d.alpha, a.p, a.ld, b.p, b.ld, d.beta, c.p, c.ld);
}

// ---------------------------------------------------------------------------------------------
// 16-bit inputs, small M: direct kernels.

#if defined(__AVX512F__) && defined(__AVX512BW__)
inline __m512 widen16(const bf16* p) {
  __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline __m512 widen16(const f16* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 widen16(const bf16* p, __mmask16 m) {
  __m256i h = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline __m512 widen16(const f16* p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

// out[j] = dot(af + j*k, brow) for j < NM; KU independent accumulators per row hide FMA latency.
template <int NM, int KU, typename T>
inline void dot_rows(const float* af, int64_t k, const T* brow, float* out) {
  __m512 acc[NM][KU];
  for (int j = 0; j < NM; ++j)
    for (int u = 0; u < KU; ++u) acc[j][u] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 * KU <= k; i += 16 * KU) {
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
    out[j] = _mm512_reduce_add_ps(s);
  }
}
#else
template <int NM, int KU, typename T>
inline void dot_rows(const float* af, int64_t k, const T* brow, float* out) {
  for (int j = 0; j < NM; ++j) {
    const float* ar = af + j * k;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < k; ++i) s += ar[i] * to_f32(brow[i]);
    out[j] = s;
  }
}
#endif

// Rows [m0, m0+nm) of op(a) (as f32 in af) times one row of b ([N, K] layout).
template <typename T>
inline void dot_group(const float* af, int64_t k, int64_t nm, const T* brow, float* out) {
  switch (nm) {
    case 1:
      dot_rows<1, 4>(af, k, brow, out);
      break;
    case 2:
      dot_rows<2, 2>(af, k, brow, out);
      break;
    case 3:
      dot_rows<3, 1>(af, k, brow, out);
      break;
    default:
      dot_rows<4, 1>(af, k, brow, out);
      break;
  }
}

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
    // b is [N, K]: each output column is a dot product with one contiguous row of b.
    parallel_for(d.n, 16, [&](int64_t n0, int64_t n1) {
      float out[4];
      for (int64_t col = n0; col < n1; ++col) {
        const T* brow = b.p + col * b.ld;
        for (int64_t m0 = 0; m0 < d.m; m0 += 4) {
          int64_t nm = std::min<int64_t>(4, d.m - m0);
          dot_group(af + m0 * d.k, d.k, nm, brow, out);
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
  parallel_for(d.n, 64, [&](int64_t n0, int64_t n1) {
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
// 16-bit inputs, larger M: convert panels to f32 and call sgemm.

template <typename T, typename TC>
void panel_batch(Mat<const T> a, Mat<const T> b, Mat<TC> c, const Dims& d) {
  const int64_t pm_max = std::min(kPanelM, d.m), pn_max = std::min(kPanelN, d.n);
  float* abuf = scratch(static_cast<size_t>(pm_max * d.k), 0);
  float* bbuf = scratch(static_cast<size_t>(pn_max * d.k), 1);
  float* cbuf =
      std::is_same_v<TC, float> ? nullptr : scratch(static_cast<size_t>(pm_max * pn_max), 2);
  int64_t a_panel = -1;  // m0 of the A panel currently in abuf
  for (int64_t n0 = 0; n0 < d.n; n0 += kPanelN) {
    int64_t pn = std::min(kPanelN, d.n - n0);
    int64_t ldb;
    if (d.tb) {  // rows n0.. of b [N, K] -> bbuf [pn, K]
      ldb = d.k;
      parallel_for(pn, 8, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) load_f32(b.p + (n0 + r) * b.ld, bbuf + r * d.k, d.k);
      });
    } else {  // columns n0.. of b [K, N] -> bbuf [K, pn]
      ldb = pn;
      parallel_for(d.k, 8, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) load_f32(b.p + r * b.ld + n0, bbuf + r * pn, pn);
      });
    }
    for (int64_t m0 = 0; m0 < d.m; m0 += kPanelM) {
      int64_t pm = std::min(kPanelM, d.m - m0);
      int64_t lda = d.ta ? pm : d.k;
      if (a_panel != m0) {
        if (!d.ta) {  // rows m0.. of a [M, K] -> abuf [pm, K]
          parallel_for(pm, 8, [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r) load_f32(a.p + (m0 + r) * a.ld, abuf + r * d.k, d.k);
          });
        } else {  // columns m0.. of a [K, M] -> abuf [K, pm]
          parallel_for(d.k, 8, [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r) load_f32(a.p + r * a.ld + m0, abuf + r * pm, pm);
          });
        }
        a_panel = m0;
      }
      auto ta = d.ta ? CblasTrans : CblasNoTrans, tb = d.tb ? CblasTrans : CblasNoTrans;
      TC* cblk = c.p + m0 * c.ld + n0;
      if constexpr (std::is_same_v<TC, float>) {
        cblas_sgemm(CblasRowMajor, ta, tb, pm, pn, d.k, d.alpha, abuf, lda, bbuf, ldb, d.beta, cblk,
                    c.ld);
      } else {
        if (d.beta != 0.0f) {
          for (int64_t r = 0; r < pm; ++r) load_f32(cblk + r * c.ld, cbuf + r * pn, pn);
        }
        cblas_sgemm(CblasRowMajor, ta, tb, pm, pn, d.k, d.alpha, abuf, lda, bbuf, ldb, d.beta, cbuf,
                    pn);
        parallel_for(pm, 16, [&](int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; ++r) store_f32(cbuf + r * pn, cblk + r * c.ld, pn);
        });
      }
    }
    if (d.m > kPanelM) a_panel = -1;  // abuf holds the last panel only
  }
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
      sgemm_batch(ab, bb, cb, d);
    } else if (d.m <= kSmallM) {
      small_m_batch(ab, bb, cb, d);
    } else {
      panel_batch(ab, bb, cb, d);
    }
  }
}

}  // namespace

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
