// The fused decode ops on the CPU (ops/fused_gemm.h, ops/qkv_rotary.h): each equals the unfused
// ops it is defined by, element for element (the CPU twins are those ops in sequence; the CUDA
// kernels are checked against these twins in tests/cuda/test_cuda_fused_decode.cpp), for f32 /
// bf16 / f16 and a strided weight; and the InvalidArgument paths name what was wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/fused_gemm.h"
#include "ops/gemm.h"
#include "ops/op_test_util.h"
#include "ops/qkv_rotary.h"
#include "ops/rms_norm.h"
#include "ops/rotary.h"
#include "ops/swiglu.h"

namespace vela {
namespace {

using test::random_tensor;
using test::to_doubles;

TEST(FusedGemm, EqualsTheUnfusedOps) {
  const int64_t m = 3, k = 48, n = 20;
  for (DType dt : test::kFloatDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = random_tensor({m, k}, dt, 1, -2.0f, 2.0f);
    Tensor w = random_tensor({n + 4, k}, dt, 2).slice(0, 4, n + 4);  // a part of a fused weight
    Tensor nw = random_tensor({k}, DType::kF32, 3, 0.5f, 1.5f);

    Tensor normed = Tensor::empty({m, k}, dt), want = Tensor::empty({m, n}, dt);
    ops::rms_norm(x, nw, 1e-5f, normed);
    ops::gemm(normed, w, want, false, true);
    Tensor got = Tensor::empty({m, n}, dt);
    ops::rms_norm_gemm(x, nw, 1e-5f, w, got);
    EXPECT_EQ(to_doubles(got), to_doubles(want)) << "rms_norm_gemm";

    Tensor w2 = random_tensor({2 * n, k}, dt, 4, -0.2f, 0.2f);
    Tensor h = Tensor::empty({m, 2 * n}, dt), act_want = Tensor::empty({m, n}, dt);
    ops::gemm(normed, w2, h, false, true);
    ops::silu_and_mul(h, act_want);
    Tensor act = Tensor::empty({m, n}, dt);
    ops::rms_norm_gemm_silu_mul(x, nw, 1e-5f, w2, act);
    EXPECT_EQ(to_doubles(act), to_doubles(act_want)) << "rms_norm_gemm_silu_mul";

    ops::gemm(x, w2, h, false, true);
    ops::silu_and_mul(h, act_want);
    ops::gemm_silu_mul(x, w2, act);
    EXPECT_EQ(to_doubles(act), to_doubles(act_want)) << "gemm_silu_mul";

    Tensor r0 = random_tensor({m, n}, dt, 5, -3.0f, 3.0f);
    Tensor y = Tensor::empty({m, n}, dt), r_want = r0.clone(), r = r0.clone();
    ops::gemm(x, w, y, false, true);
    ops::add(r_want, y, r_want);
    ops::gemm_add(x, w, r);
    EXPECT_EQ(to_doubles(r), to_doubles(r_want)) << "gemm_add";

    Tensor hk = random_tensor({m, 2 * k}, dt, 6, -2.0f, 2.0f);
    Tensor a = Tensor::empty({m, k}, dt), r2_want = r0.clone(), r2 = r0.clone();
    ops::silu_and_mul(hk, a);
    ops::gemm(a, w, y, false, true);
    ops::add(r2_want, y, r2_want);
    ops::silu_mul_gemm_add(hk, w, r2);
    EXPECT_EQ(to_doubles(r2), to_doubles(r2_want)) << "silu_mul_gemm_add";
  }
}

TEST(FusedGemm, BadInputNamesTheProblem) {
  Tensor x = Tensor::empty({2, 16}, DType::kF32), w = Tensor::empty({8, 12}, DType::kF32),
         out = Tensor::empty({2, 8}, DType::kF32);
  Tensor nw = Tensor::empty({16}, DType::kF32);
  EXPECT_THROW(ops::rms_norm_gemm(x, nw, 1e-5f, w, out), InvalidArgument);
  EXPECT_THROW(ops::rms_norm_gemm(x, Tensor::empty({15}, DType::kF32), 1e-5f,
                                  Tensor::empty({8, 16}, DType::kF32), out),
               InvalidArgument);
  EXPECT_THROW(ops::gemm_add(x, w, out), InvalidArgument);
  EXPECT_THROW(ops::silu_mul_gemm_add(Tensor::empty({2, 15}, DType::kF32), w, out),
               InvalidArgument);
  Tensor act = Tensor::empty({2, 5}, DType::kF32);
  EXPECT_THROW(ops::rms_norm_gemm_silu_mul(x, nw, 1e-5f, Tensor::empty({8, 16}, DType::kF32), act),
               InvalidArgument);
  EXPECT_THROW(ops::gemm_add(x, Tensor::empty({8, 16}, DType::kBF16), out), InvalidArgument);
  // gemm_silu_mul: w must be [2 * inter, k], act [rows, inter], one dtype.
  EXPECT_THROW(ops::gemm_silu_mul(x, Tensor::empty({8, 16}, DType::kF32), act), InvalidArgument);
  EXPECT_THROW(ops::gemm_silu_mul(x, Tensor::empty({10, 12}, DType::kF32), act), InvalidArgument);
  EXPECT_THROW(ops::gemm_silu_mul(x, Tensor::empty({10, 16}, DType::kBF16), act), InvalidArgument);
  Tensor act_rows = Tensor::empty({3, 5}, DType::kF32);
  EXPECT_THROW(ops::gemm_silu_mul(x, Tensor::empty({10, 16}, DType::kF32), act_rows),
               InvalidArgument);
}

TEST(QkvRotary, EqualsSplitNormRotaryAndKvWrite) {
  const int64_t n = 3, h = 4, hkv = 2, d = 16, n_slots = 9;
  ops::RopeConfig rc;
  rc.rotary_dim = 8;  // partial rotary
  Tensor table = ops::make_rope_table(rc, 64);
  const std::vector<int32_t> pos = {0, 7, 33}, slots = {5, 0, 8};
  Tensor positions = Tensor::from_vector(pos), loc = Tensor::from_vector(slots);
  for (bool qk_norm : {false, true}) {
    for (DType dt : test::kFloatDTypes) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (qk_norm ? " qk_norm" : ""));
      Tensor qkv = random_tensor({n, (h + 2 * hkv) * d}, dt, 7, -2.0f, 2.0f);
      Tensor qn, kn;
      if (qk_norm) {
        qn = random_tensor({d}, DType::kF32, 8, 0.5f, 1.5f);
        kn = random_tensor({d}, DType::kF32, 9, 0.5f, 1.5f);
      }
      Tensor kc0 = random_tensor({n_slots, hkv, d}, dt, 10),
             vc0 = random_tensor({n_slots, hkv, d}, dt, 11);
      // The unfused reference.
      Tensor q_want = qkv.slice(1, 0, h * d).contiguous().view({n, h, d});
      Tensor k = qkv.slice(1, h * d, (h + hkv) * d).contiguous().view({n, hkv, d});
      Tensor v = qkv.slice(1, (h + hkv) * d, (h + 2 * hkv) * d).contiguous().view({n, hkv, d});
      if (qk_norm) {
        Tensor qr = q_want.view({n * h, d}), kr = k.view({n * hkv, d});
        ops::rms_norm(qr, qn, 1e-6f, qr);
        ops::rms_norm(kr, kn, 1e-6f, kr);
      }
      ops::rotary(q_want, positions, table);
      ops::rotary(k, positions, table);
      Tensor kc_want = kc0.clone(), vc_want = vc0.clone();
      ops::kv_write(k, v, loc, kc_want, vc_want);
      Tensor q = Tensor::empty({n, h, d}, dt), kc = kc0.clone(), vc = vc0.clone();
      ops::qkv_rotary_kv_write(qkv, positions, table, qn, kn, 1e-6f, loc, q, kc, vc);
      EXPECT_EQ(to_doubles(q), to_doubles(q_want));
      EXPECT_EQ(to_doubles(kc), to_doubles(kc_want));
      EXPECT_EQ(to_doubles(vc), to_doubles(vc_want));
    }
  }
  Tensor q = Tensor::empty({n, h, d}, DType::kF32),
         kc = Tensor::empty({n_slots, hkv, d}, DType::kF32);
  Tensor vc = Tensor::empty({n_slots, hkv, d}, DType::kF32);
  EXPECT_THROW(ops::qkv_rotary_kv_write(Tensor::empty({n, 100}, DType::kF32), positions, table,
                                        Tensor(), Tensor(), 1e-6f, loc, q, kc, vc),
               InvalidArgument);
  EXPECT_THROW(
      ops::qkv_rotary_kv_write(Tensor::empty({n, (h + 2 * hkv) * d}, DType::kF32), positions, table,
                               Tensor::empty({d}, DType::kF32), Tensor(), 1e-6f, loc, q, kc, vc),
      InvalidArgument);
  // A position past the rope table (64 rows) or negative is a clear error, not a read past it.
  for (int32_t bad : {64, -1}) {
    Tensor bad_pos = Tensor::from_vector(std::vector<int32_t>{0, bad, 33});
    try {
      ops::qkv_rotary_kv_write(Tensor::empty({n, (h + 2 * hkv) * d}, DType::kF32), bad_pos, table,
                               Tensor(), Tensor(), 1e-6f, loc, q, kc, vc);
      ADD_FAILURE() << "position " << bad << " accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("positions[1] = " + std::to_string(bad)),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
// rms_norm_gemm_rotary_kv_write is rms_norm_gemm followed by qkv_rotary_kv_write without QK-norm,
// gemm_rotary_kv_write is gemm followed by qkv_rotary_kv_write with or without it (the CPU runs
// exactly that; CUDA folds each into one kernel, tests/cuda/test_cuda_fused_decode.cpp); wrong
// shapes are errors that name the operand.
TEST(FusedGemm, RotaryGemmsAreTheComposition) {
  const int64_t n = 3, h = 4, hkv = 2, d = 16, k = 40, n_slots = 9;
  ops::RopeConfig rc;
  rc.rotary_dim = d;
  Tensor table = ops::make_rope_table(rc, 64);
  Tensor positions = Tensor::from_vector(std::vector<int32_t>{0, 7, 33});
  Tensor loc = Tensor::from_vector(std::vector<int32_t>{5, 0, 8});
  for (DType dt : test::kFloatDTypes) {
    for (bool qk_norm : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (qk_norm ? " qknorm" : ""));
      Tensor x = random_tensor({n, k}, dt, 1, -2.0f, 2.0f);
      Tensor nw = random_tensor({k}, DType::kF32, 2, 0.5f, 1.5f);
      Tensor w = random_tensor({(h + 2 * hkv) * d, k}, dt, 3, -0.3f, 0.3f);
      Tensor qn, kn;
      if (qk_norm) {
        qn = random_tensor({d}, DType::kF32, 6, 0.5f, 1.5f);
        kn = random_tensor({d}, DType::kF32, 7, 0.5f, 1.5f);
      }
      Tensor kc0 = random_tensor({n_slots, hkv, d}, dt, 4);
      Tensor vc0 = random_tensor({n_slots, hkv, d}, dt, 5);
      // The composition from a given projection, and the fused op's results for it.
      auto expect_composition = [&](const Tensor& qkv, auto&& fused, const char* what) {
        Tensor q_want = Tensor::empty({n, h, d}, dt), kc_want = kc0.clone(), vc_want = vc0.clone();
        ops::qkv_rotary_kv_write(qkv, positions, table, qn, kn, 1e-6f, loc, q_want, kc_want,
                                 vc_want);
        Tensor q = Tensor::empty({n, h, d}, dt), kc = kc0.clone(), vc = vc0.clone();
        fused(q, kc, vc);
        EXPECT_EQ(to_doubles(q), to_doubles(q_want)) << what;
        EXPECT_EQ(to_doubles(kc), to_doubles(kc_want)) << what;
        EXPECT_EQ(to_doubles(vc), to_doubles(vc_want)) << what;
      };
      Tensor qkv = Tensor::empty({n, w.size(0)}, dt);
      ops::gemm(x, w, qkv, false, true);
      expect_composition(
          qkv,
          [&](Tensor& q, Tensor& kc, Tensor& vc) {
            ops::gemm_rotary_kv_write(x, w, positions, table, qn, kn, 1e-6f, loc, q, kc, vc);
          },
          "gemm_rotary_kv_write");
      ops::rms_norm_gemm(x, nw, 1e-5f, w, qkv);
      // The norm-pieces form (QK-norm optional): the normed rows rebuilt from the pieces.
      ops::NormPieces pieces{Tensor::empty({n, k}, dt), Tensor::empty({n, 1}, DType::kF32)};
      ops::norm_pieces(x, nw, pieces);
      Tensor normed = Tensor::empty({n, k}, dt);
      ops::rms_scale_rows(pieces, 1e-5f, normed);
      Tensor qkv_pieces = Tensor::empty({n, w.size(0)}, dt);
      ops::gemm(normed, w, qkv_pieces, false, true);
      expect_composition(
          qkv_pieces,
          [&](Tensor& q, Tensor& kc, Tensor& vc) {
            ops::rms_norm_gemm_rotary_kv_write(pieces, 1e-5f, w, positions, table, qn, kn, 1e-6f,
                                               loc, q, kc, vc);
          },
          "rms_norm_gemm_rotary_kv_write from norm pieces");
      if (qk_norm) continue;  // the form on x has no QK-norm
      expect_composition(
          qkv,
          [&](Tensor& q, Tensor& kc, Tensor& vc) {
            ops::rms_norm_gemm_rotary_kv_write(x, nw, 1e-5f, w, positions, table, loc, q, kc, vc);
          },
          "rms_norm_gemm_rotary_kv_write");
    }
  }
  Tensor x = Tensor::empty({n, k}, DType::kF32), nw = Tensor::empty({k}, DType::kF32);
  Tensor q = Tensor::empty({n, h, d}, DType::kF32);
  Tensor kc = Tensor::empty({n_slots, hkv, d}, DType::kF32), vc = kc.clone();
  // w with a row count that is not (H + 2 Hkv) * D, and one with the wrong width.
  for (const Tensor& bad_w : {Tensor::empty({100, k}, DType::kF32),
                              Tensor::empty({(h + 2 * hkv) * d, k + 8}, DType::kF32)}) {
    EXPECT_THROW(
        ops::rms_norm_gemm_rotary_kv_write(x, nw, 1e-5f, bad_w, positions, table, loc, q, kc, vc),
        InvalidArgument);
    EXPECT_THROW(ops::gemm_rotary_kv_write(x, bad_w, positions, table, Tensor(), Tensor(), 1e-6f,
                                           loc, q, kc, vc),
                 InvalidArgument);
  }
  Tensor w = Tensor::empty({(h + 2 * hkv) * d, k}, DType::kF32);
  ops::NormPieces bad{Tensor::empty({n, k}, DType::kF32), Tensor::empty({n, 2}, DType::kF32)};
  EXPECT_THROW(ops::rms_norm_gemm_rotary_kv_write(bad, 1e-5f, w, positions, table, Tensor(),
                                                  Tensor(), 0.0f, loc, q, kc, vc),
               InvalidArgument);  // k = 40 is one 128-column group
}

// rms_norm's pieces (ops/rms_norm.h): row_sq sums squares per 128-column group (the last one
// partial), scaled = round(x * w), and rms_scale_rows rebuilds the normed rows within a rounding
// of rms_norm; gemm_add with pieces is gemm_add then norm_pieces of the updated residual, and
// rms_norm_gemm_silu_mul on pieces is rms_scale_rows then gemm_silu_mul (the CPU twin; CUDA applies
// rstd to the product, tests/cuda/test_cuda_fused_decode.cpp); wrong pieces are errors.
TEST(FusedGemm, NormPiecesFormsAreTheComposition) {
  const int64_t m = 3, k = 300, n = 260, groups_k = 3, groups_n = 3;
  for (DType dt : test::kFloatDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = random_tensor({m, k}, dt, 1, -2.0f, 2.0f);
    Tensor nw = random_tensor({k}, DType::kF32, 3, 0.5f, 1.5f);
    ops::NormPieces pieces{Tensor::empty({m, k}, dt), Tensor::empty({m, groups_k}, DType::kF32)};
    ops::norm_pieces(x, nw, pieces);
    std::vector<double> xs = to_doubles(x), sqs = to_doubles(pieces.row_sq), ws = to_doubles(nw);
    std::vector<double> scaled = to_doubles(pieces.scaled);
    const double ulp = dt == DType::kF32 ? 1e-6 : dt == DType::kBF16 ? 8e-3 : 1e-3;
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t g = 0; g < groups_k; ++g) {
        double want = 0.0;
        for (int64_t c = g * 128; c < std::min<int64_t>(k, (g + 1) * 128); ++c)
          want += xs[r * k + c] * xs[r * k + c];
        EXPECT_NEAR(sqs[r * groups_k + g], want, 1e-5 * want) << r << " " << g;
      }
      for (int64_t c = 0; c < k; ++c) {
        const double want = xs[r * k + c] * ws[c];
        EXPECT_NEAR(scaled[r * k + c], want, ulp * std::fabs(want)) << r << " " << c;
      }
    }
    Tensor normed = Tensor::empty({m, k}, dt), normed_want = Tensor::empty({m, k}, dt);
    ops::rms_scale_rows(pieces, 1e-5f, normed);
    ops::rms_norm(x, nw, 1e-5f, normed_want);
    std::vector<double> got = to_doubles(normed), want = to_doubles(normed_want);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 2 * ulp * std::fabs(want[i]) + 1e-6) << i;

    Tensor w2 = random_tensor({2 * 40, k}, dt, 4, -0.2f, 0.2f);
    Tensor act_want = Tensor::empty({m, 40}, dt), act = Tensor::empty({m, 40}, dt);
    ops::gemm_silu_mul(normed, w2, act_want);
    ops::rms_norm_gemm_silu_mul(pieces, 1e-5f, w2, act);
    EXPECT_EQ(to_doubles(act), to_doubles(act_want)) << "rms_norm_gemm_silu_mul from pieces";

    Tensor w = random_tensor({n, k}, dt, 5, -0.2f, 0.2f);
    Tensor nw2 = random_tensor({n}, dt, 7, 0.5f, 1.5f);
    Tensor r0 = random_tensor({m, n}, dt, 6, -3.0f, 3.0f);
    Tensor r_want = r0.clone(), r = r0.clone();
    ops::NormPieces next_want{Tensor::empty({m, n}, dt), Tensor::empty({m, groups_n}, DType::kF32)};
    ops::NormPieces next{Tensor::empty({m, n}, dt), Tensor::empty({m, groups_n}, DType::kF32)};
    ops::gemm_add(x, w, r_want);
    ops::norm_pieces(r_want, nw2, next_want);
    ops::gemm_add(x, w, r, nw2, next);
    EXPECT_EQ(to_doubles(r), to_doubles(r_want)) << "gemm_add with pieces";
    EXPECT_EQ(to_doubles(next.scaled), to_doubles(next_want.scaled)) << "gemm_add's scaled";
    EXPECT_EQ(to_doubles(next.row_sq), to_doubles(next_want.row_sq)) << "gemm_add's row_sq";
  }
  Tensor x = Tensor::empty({3, 300}, DType::kF32), w = Tensor::empty({260, 300}, DType::kF32);
  Tensor r = Tensor::empty({3, 260}, DType::kF32), nw = Tensor::empty({260}, DType::kF32);
  Tensor act = Tensor::empty({3, 40}, DType::kF32), w2 = Tensor::empty({80, 300}, DType::kF32);
  for (Tensor bad_sq : {Tensor::empty({3, 2}, DType::kF32), Tensor::empty({2, 3}, DType::kF32),
                        Tensor::empty({3, 3}, DType::kBF16)}) {
    ops::NormPieces bad{Tensor::empty({3, 300}, DType::kF32), bad_sq};
    EXPECT_THROW(ops::norm_pieces(x, Tensor::empty({300}, DType::kF32), bad), InvalidArgument)
        << bad_sq.str();
    ops::NormPieces next{Tensor::empty({3, 260}, DType::kF32), bad_sq};
    EXPECT_THROW(ops::gemm_add(x, w, r, nw, next), InvalidArgument) << bad_sq.str();
    ops::NormPieces in{x, bad_sq};
    EXPECT_THROW(ops::rms_norm_gemm_silu_mul(in, 1e-5f, w2, act), InvalidArgument) << bad_sq.str();
  }
  ops::NormPieces wrong_scaled{Tensor::empty({3, 200}, DType::kF32),
                               Tensor::empty({3, 3}, DType::kF32)};
  EXPECT_THROW(ops::norm_pieces(x, Tensor::empty({300}, DType::kF32), wrong_scaled),
               InvalidArgument);
  ops::NormPieces ok_next{Tensor::empty({3, 260}, DType::kF32), Tensor::empty({3, 3}, DType::kF32)};
  EXPECT_THROW(ops::gemm_add(x, w, r, Tensor::empty({300}, DType::kF32), ok_next),
               InvalidArgument);  // the next norm's weight has the residual's width
  Tensor strided_w = Tensor::empty({260, 2}, DType::kF32).select(1, 0);
  EXPECT_THROW(ops::gemm_add(x, w, r, strided_w, ok_next), InvalidArgument);  // not contiguous
  ops::NormPieces aliased{r, Tensor::empty({3, 3}, DType::kF32)};
  EXPECT_THROW(ops::gemm_add(x, w, r, nw, aliased), InvalidArgument);  // scaled is the residual
  ops::NormPieces rows3{Tensor::empty({3, 4, 100}, DType::kF32),
                        Tensor::empty({3, 1}, DType::kF32)};
  EXPECT_THROW(ops::norm_pieces(Tensor::empty({3, 4, 100}, DType::kF32),
                                Tensor::empty({100}, DType::kF32), rows3),
               InvalidArgument);  // x must be [n_rows, n]
}

}  // namespace vela
