// gemm / matmul against a double-precision reference: all four transpose combinations, f32 / bf16 /
// f16 inputs with f32 or input-dtype output, batches (shared and batched b), alpha / beta, strided
// leading dims, K = 0, and the InvalidArgument paths.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ops/gemm.h"
#include "ops/op_test_util.h"

namespace vela {
namespace {

using test::random_tensor;
using test::to_doubles;

struct Ref {
  std::vector<double> c;      // alpha * op(a) @ op(b) + beta * c0
  std::vector<double> bound;  // allowed abs error per element
};

// a, b, c0 2-D or 3-D (b may be 2-D with a 3-D a). Bound: fp32 accumulation error (relative to
// sum |a||b|) plus the rounding of the output dtype.
Ref reference(const Tensor& a, const Tensor& b, const Tensor& c0, bool ta, bool tb, float alpha,
              float beta) {
  std::vector<double> va = to_doubles(a), vb = to_doubles(b), vc = to_doubles(c0);
  const int64_t n_batch = a.dim() == 3 ? a.size(0) : 1;
  const int64_t m = c0.size(-2), n = c0.size(-1), k = ta ? a.size(-2) : a.size(-1);
  const int64_t a_cols = a.size(-1), b_cols = b.size(-1);
  const bool b_batched = b.dim() == 3;
  const double out_eps = test::dtype_eps(c0.dtype());
  Ref r;
  r.c.resize(vc.size());
  r.bound.resize(vc.size());
  for (int64_t bi = 0; bi < n_batch; ++bi) {
    const double* pa = va.data() + bi * m * k;
    const double* pb = vb.data() + (b_batched ? bi * k * n : 0);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0.0, abs_s = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          double x = ta ? pa[p * a_cols + i] : pa[i * a_cols + p];
          double y = tb ? pb[j * b_cols + p] : pb[p * b_cols + j];
          s += x * y;
          abs_s += std::fabs(x * y);
        }
        size_t idx = static_cast<size_t>((bi * m + i) * n + j);
        double old = beta != 0.0f ? vc[idx] : 0.0;
        r.c[idx] = alpha * s + beta * old;
        r.bound[idx] = 2e-6 * std::sqrt(static_cast<double>(k) + 1.0) *
                           (std::fabs(alpha) * abs_s + std::fabs(beta * old)) +
                       2.0 * out_eps * std::fabs(r.c[idx]) + 1e-6;
      }
    }
  }
  return r;
}

std::string describe(const Tensor& a, const Tensor& b, const Tensor& c, bool ta, bool tb) {
  return "gemm a=" + a.str() + " b=" + b.str() + " c=" + c.str() + " ta=" + std::to_string(ta) +
         " tb=" + std::to_string(tb);
}

// Runs gemm on c (whose prior contents matter only when beta != 0) and checks it.
void check_gemm(const Tensor& a, const Tensor& b, Tensor& c, bool ta, bool tb, float alpha = 1.0f,
                float beta = 0.0f) {
  Tensor c0 = c.clone();
  Ref r = reference(a, b, c0, ta, tb, alpha, beta);
  ops::gemm(a, b, c, ta, tb, alpha, beta);
  test::expect_within(to_doubles(c), r.c, r.bound, describe(a, b, c, ta, tb));
}

Tensor nan_filled(const Shape& shape, DType dt) {
  Tensor t = Tensor::empty(shape, dt);
  for (int64_t i = 0; i < t.numel(); ++i) test::set_f32(t, i, NAN);
  return t;
}

Shape op_shape(int64_t rows, int64_t cols, bool trans) {
  return trans ? Shape{cols, rows} : Shape{rows, cols};
}

struct Mnk {
  int64_t m, n, k;
};

// Covers: M = 1 (GEMV) with a masked K tail, small-M kernel (M <= 16), the panel path with M and
// N beyond one panel, degenerate extents, and (K % 32 == 0) the AMX tiles for bf16 on CPUs that
// have them: row blocks padded past M, row chunks past 256, a last partial column block.
const Mnk kShapes[] = {{1, 4096, 127}, {3, 127, 33}, {7, 33, 4096}, {16, 65, 200},
                       {33, 7, 1},     {17, 1, 127}, {520, 600, 24}, {40, 50, 64},
                       {300, 37, 96},  {1, 48, 32}};

TEST(Gemm, AllTransposesDtypesAndShapes) {
  uint64_t seed = 1;
  for (DType dt : test::kFloatDTypes) {
    for (DType out_dt : {DType::kF32, dt}) {
      if (out_dt != DType::kF32 && dt == DType::kF32) continue;
      for (const Mnk& s : kShapes) {
        for (int t = 0; t < 4; ++t) {
          bool ta = t & 1, tb = t & 2;
          Tensor a = random_tensor(op_shape(s.m, s.k, ta), dt, seed++);
          Tensor b = random_tensor(op_shape(s.k, s.n, tb), dt, seed++);
          Tensor c = nan_filled({s.m, s.n}, out_dt);  // beta = 0 must not read c
          check_gemm(a, b, c, ta, tb);
        }
      }
    }
  }
}

// The small-M kernels (M <= 16, 16-bit or f32 inputs; any M on the AMX path) give each row of
// op(a) the same bits whatever the other rows: a decode row equals that row of a verify step or a
// prefill.
TEST(Gemm, SmallMRowsAreBatchInvariant) {
  uint64_t seed = 100;
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (DType out_dt : {DType::kF32, dt}) {
      if (dt == DType::kF32 && out_dt == dt) continue;  // the same case twice
      for (int64_t k : {33, 200, 768}) {
        // Past 16 rows only bf16_wt (AMX or vdpbf16ps tiles, built where avx512_bf16 is) is
        // batch-invariant (the panel path is sgemm).
        std::vector<int64_t> ms = {2, 5, 9, 16};
#if defined(__AVX512BF16__)
        if (dt == DType::kBF16) ms.push_back(300);
#endif
        for (int64_t m : ms) {
          for (bool ta : {false, true}) {
            SCOPED_TRACE(std::string(dtype_name(dt)) + " -> " + dtype_name(out_dt) +
                         " m=" + std::to_string(m) + " k=" + std::to_string(k) +
                         " ta=" + std::to_string(ta));
            // 150 columns at k = 768: column groups far enough from a thread's end to prefetch.
            const int64_t n = k == 768 ? 150 : 37;
            Tensor a = random_tensor(op_shape(m, k, ta), dt, seed++);
            Tensor b = random_tensor({n, k}, dt, seed++);
            Tensor c = Tensor::empty({m, n}, out_dt);
            ops::gemm(a, b, c, ta, true);
            const std::vector<double> all = to_doubles(c);
            for (int64_t r = 0; r < m; ++r) {
              Tensor row = (ta ? a.slice(1, r, r + 1) : a.slice(0, r, r + 1)).contiguous();
              Tensor c1 = Tensor::empty({1, n}, out_dt);
              ops::gemm(row, b, c1, ta, true);
              const std::vector<double> one = to_doubles(c1);
              for (int64_t j = 0; j < n; ++j)
                ASSERT_EQ(one[j], all[r * n + j]) << "row " << r << " column " << j;
            }
          }
        }
      }
    }
  }
}

TEST(Gemm, AlphaBeta) {
  uint64_t seed = 100;
  for (DType dt : test::kFloatDTypes) {
    for (Mnk s : {Mnk{1, 300, 70}, Mnk{5, 64, 33}, Mnk{40, 70, 50}}) {
      for (int t = 0; t < 4; ++t) {
        bool ta = t & 1, tb = t & 2;
        Tensor a = random_tensor(op_shape(s.m, s.k, ta), dt, seed++);
        Tensor b = random_tensor(op_shape(s.k, s.n, tb), dt, seed++);
        Tensor c = random_tensor({s.m, s.n}, dt, seed++);
        check_gemm(a, b, c, ta, tb, 0.5f, -1.5f);
        Tensor c32 = random_tensor({s.m, s.n}, DType::kF32, seed++);
        check_gemm(a, b, c32, ta, tb, -2.0f, 1.0f);
      }
    }
  }
}

TEST(Gemm, Batched) {
  uint64_t seed = 200;
  const int64_t n_batch = 3;
  for (DType dt : test::kFloatDTypes) {
    for (Mnk s : {Mnk{1, 50, 40}, Mnk{4, 33, 65}, Mnk{20, 30, 17}}) {
      for (int t = 0; t < 4; ++t) {
        bool ta = t & 1, tb = t & 2;
        Shape as = op_shape(s.m, s.k, ta), bs = op_shape(s.k, s.n, tb);
        Tensor a = random_tensor({n_batch, as[0], as[1]}, dt, seed++);
        // b shared by all batches (one folded GEMM when a is not transposed) ...
        Tensor b2 = random_tensor(bs, dt, seed++);
        Tensor c = random_tensor({n_batch, s.m, s.n}, DType::kF32, seed++);
        check_gemm(a, b2, c, ta, tb, 1.0f, 0.5f);
        // ... and one b per batch.
        Tensor b3 = random_tensor({n_batch, bs[0], bs[1]}, dt, seed++);
        Tensor c2 = nan_filled({n_batch, s.m, s.n}, dt);
        check_gemm(a, b3, c2, ta, tb);
      }
    }
  }
}

TEST(Gemm, StridedLeadingDims) {
  uint64_t seed = 300;
  for (DType dt : test::kFloatDTypes) {
    for (Mnk s : {Mnk{1, 40, 31}, Mnk{6, 45, 70}, Mnk{30, 20, 40}}) {
      for (int t = 0; t < 4; ++t) {
        bool ta = t & 1, tb = t & 2;
        Shape as = op_shape(s.m, s.k, ta), bs = op_shape(s.k, s.n, tb);
        Tensor a = test::strided_rows(as[0], as[1], 5, dt, seed++);
        Tensor b = test::strided_rows(bs[0], bs[1], 3, dt, seed++);
        Tensor wide_c = random_tensor({s.m, s.n + 7}, DType::kF32, seed++);
        Tensor c = wide_c.slice(1, 0, s.n);
        std::vector<double> before = to_doubles(wide_c.slice(1, s.n, s.n + 7));
        check_gemm(a, b, c, ta, tb, 1.0f, 1.0f);
        EXPECT_EQ(to_doubles(wide_c.slice(1, s.n, s.n + 7)), before)
            << "gemm wrote past the columns of c (" << describe(a, b, c, ta, tb) << ")";
      }
    }
  }
}

TEST(Gemm, BatchedTransposedView) {
  // a is a [B, K, M] tensor seen as op(a) via trans_a, c a slice of a wider batch.
  Tensor a = random_tensor({2, 9, 5}, DType::kBF16, 400);
  Tensor b = random_tensor({2, 9, 11}, DType::kBF16, 401);
  Tensor wide = random_tensor({2, 5, 16}, DType::kF32, 402);
  Tensor c = wide.slice(2, 2, 13);
  check_gemm(a, b, c, true, false, 1.0f, 0.25f);
}

TEST(Gemm, ZeroK) {
  for (DType dt : test::kFloatDTypes) {
    Tensor a = Tensor::empty({4, 0}, dt), b = Tensor::empty({0, 6}, dt);
    Tensor c = random_tensor({4, 6}, dt, 500);
    check_gemm(a, b, c, false, false, 1.0f, 2.0f);
    Tensor c0 = nan_filled({4, 6}, DType::kF32);
    check_gemm(a, b, c0, false, false, 1.0f, 0.0f);
  }
}

TEST(Gemm, Matmul) {
  Tensor a = random_tensor({3, 7, 5}, DType::kBF16, 600);
  Tensor b = random_tensor({9, 5}, DType::kBF16, 601);
  Tensor c = ops::matmul(a, b, false, true);
  EXPECT_EQ(c.shape(), (Shape{3, 7, 9}));
  EXPECT_EQ(c.dtype(), DType::kBF16);
  Tensor zero = Tensor::zeros({3, 7, 9}, DType::kBF16);
  Ref r = reference(a, b, zero, false, true, 1.0f, 0.0f);
  test::expect_within(to_doubles(c), r.c, r.bound, "matmul");
  Tensor c2 = ops::matmul(random_tensor({5, 4}, DType::kF32, 602),
                          random_tensor({5, 6}, DType::kF32, 603), true, false);
  EXPECT_EQ(c2.shape(), (Shape{4, 6}));
}

TEST(Gemm, InvalidArguments) {
  Tensor a = random_tensor({4, 8}, DType::kF32, 1), b = random_tensor({8, 5}, DType::kF32, 2);
  Tensor c = Tensor::empty({4, 5}, DType::kF32);
  // K mismatch
  Tensor b_bad = random_tensor({7, 5}, DType::kF32, 3);
  EXPECT_THROW(ops::gemm(a, b_bad, c), InvalidArgument);
  EXPECT_THROW(ops::gemm(a, b, c, false, true), InvalidArgument);
  // c shape
  Tensor c_bad = Tensor::empty({4, 6}, DType::kF32);
  EXPECT_THROW(ops::gemm(a, b, c_bad), InvalidArgument);
  // dtype mismatch between a and b; c neither f32 nor the input dtype
  Tensor b16 = random_tensor({8, 5}, DType::kBF16, 4);
  EXPECT_THROW(ops::gemm(a, b16, c), InvalidArgument);
  Tensor a16 = random_tensor({4, 8}, DType::kBF16, 5);
  Tensor c_f16 = Tensor::empty({4, 5}, DType::kF16);
  EXPECT_THROW(ops::gemm(a16, b16, c_f16), InvalidArgument);
  Tensor ai = Tensor::zeros({4, 8}, DType::kI32), bi = Tensor::zeros({8, 5}, DType::kI32);
  EXPECT_THROW(ops::gemm(ai, bi, c), InvalidArgument);
  // rank
  Tensor a1 = random_tensor({8}, DType::kF32, 6);
  EXPECT_THROW(ops::gemm(a1, b, c), InvalidArgument);
  Tensor c3 = Tensor::empty({1, 4, 5}, DType::kF32);
  EXPECT_THROW(ops::gemm(a, b, c3), InvalidArgument);
  // batch mismatch
  Tensor ab = random_tensor({2, 4, 8}, DType::kF32, 7),
         bb = random_tensor({3, 8, 5}, DType::kF32, 8);
  Tensor cb = Tensor::empty({2, 4, 5}, DType::kF32);
  EXPECT_THROW(ops::gemm(ab, bb, cb), InvalidArgument);
  // innermost dim not contiguous (a transposed view must be passed with trans_a instead)
  Tensor at = random_tensor({8, 4}, DType::kF32, 9).transpose(0, 1);
  EXPECT_THROW(ops::gemm(at, b, c), InvalidArgument);
  // undefined
  EXPECT_THROW(ops::gemm(Tensor(), b, c), InvalidArgument);
  try {
    ops::gemm(a, b_bad, c);
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("gemm"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("f32[7, 5]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vela
