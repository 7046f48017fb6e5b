// The segmented LoRA ops (ops/lora.h, CPU twin): one shrink / expand over a Linear's segments
// (q|k|v into separate outputs, with a row of base slot -1) equals a double-precision reference
// and is bit-identical to the same segments done one at a time; bad segment lists are refused.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "ops/lora.h"
#include "op_test_util.h"

namespace vela {
namespace {

struct Case {
  int64_t n = 9, in = 48, r = 8, slots = 3;
  std::vector<int64_t> cols = {40, 16, 24};  // q, k, v widths
};

TEST(LoraOps, SegmentedShrinkExpandMatchReferenceAndOneAtATime) {
  const Case c;
  std::vector<int32_t> sl(static_cast<size_t>(c.n));
  for (int64_t i = 0; i < c.n; ++i) sl[static_cast<size_t>(i)] = static_cast<int32_t>(i % 4) - 1;
  const Tensor slots = Tensor::from_vector(sl);
  const std::vector<float> sc = {0.5f, 2.0f, 1.25f};
  const Tensor scales = Tensor::from_vector(sc);
  for (DType dt : test::kFloatDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = test::random_tensor({c.n, c.in}, dt, 1);
    ops::LoraSegments segs;
    segs.n = 3;
    std::vector<Tensor> y_ref;
    for (int g = 0; g < 3; ++g) {
      segs.a[g] = test::random_tensor({c.slots, c.r, c.in}, dt, 10 + g);
      segs.b[g] = test::random_tensor({c.slots, c.cols[g], c.r}, dt, 20 + g);
      // Each output is a column block of a wider tensor (strided rows).
      Tensor wide = test::random_tensor({c.n, c.cols[g] + 8}, dt, 30 + g);
      segs.y[g] = wide.slice(1, 4, 4 + c.cols[g]);
      y_ref.push_back(segs.y[g].contiguous());
    }
    Tensor xa = Tensor::empty({c.n, 3 * c.r}, DType::kF32);
    ops::lora_shrink(x, segs, slots, xa);

    // Reference in double from the same rounded inputs.
    const std::vector<double> xd = test::to_doubles(x), xad = test::to_doubles(xa);
    for (int g = 0; g < 3; ++g) {
      const std::vector<double> ad = test::to_doubles(segs.a[g]);
      std::vector<double> want(static_cast<size_t>(c.n * c.r)), got(want.size());
      for (int64_t i = 0; i < c.n; ++i)
        for (int64_t k = 0; k < c.r; ++k) {
          const int32_t s = sl[static_cast<size_t>(i)];
          double acc = 0;
          if (s >= 0)
            for (int64_t j = 0; j < c.in; ++j)
              acc += xd[static_cast<size_t>(i * c.in + j)] *
                     ad[static_cast<size_t>((s * c.r + k) * c.in + j)];
          want[static_cast<size_t>(i * c.r + k)] = acc;
          got[static_cast<size_t>(i * c.r + k)] = xad[static_cast<size_t>(i * 3 * c.r + g * c.r + k)];
        }
      test::expect_close(got, want, 1e-4, 1e-4, "shrink segment " + std::to_string(g));
    }

    // Expand: segmented vs one segment at a time (same loops: the same bits).
    std::vector<Tensor> one_at_a_time;
    for (int g = 0; g < 3; ++g) {
      Tensor yg = y_ref[static_cast<size_t>(g)].clone();
      Tensor xa_g = xa.slice(1, g * c.r, (g + 1) * c.r).contiguous();
      ops::lora_expand(xa_g, segs.b[g], slots, scales, yg);
      one_at_a_time.push_back(yg);
    }
    ops::lora_expand(xa, segs, slots, scales);
    for (int g = 0; g < 3; ++g) {
      const std::vector<double> got = test::to_doubles(segs.y[g]);
      const std::vector<double> want = test::to_doubles(one_at_a_time[static_cast<size_t>(g)]);
      EXPECT_EQ(got, want) << "segment " << g;
      // And against a double reference of y + scale * b @ xa.
      const std::vector<double> y0 = test::to_doubles(y_ref[static_cast<size_t>(g)]);
      const std::vector<double> bd = test::to_doubles(segs.b[g]);
      std::vector<double> ref(y0);
      for (int64_t i = 0; i < c.n; ++i) {
        const int32_t s = sl[static_cast<size_t>(i)];
        if (s < 0) continue;
        for (int64_t col = 0; col < c.cols[g]; ++col) {
          double acc = 0;
          for (int64_t k = 0; k < c.r; ++k)
            acc += bd[static_cast<size_t>((s * c.cols[g] + col) * c.r + k)] *
                   xad[static_cast<size_t>(i * 3 * c.r + g * c.r + k)];
          ref[static_cast<size_t>(i * c.cols[g] + col)] += sc[static_cast<size_t>(s)] * acc;
        }
      }
      const double tol = 8 * test::dtype_eps(dt);
      test::expect_close(got, ref, tol * 8, tol, "expand segment " + std::to_string(g));
    }
  }
}

TEST(LoraOps, ShrinkPartsAddUpToTheWholeSums) {
  const int64_t n = 5, in = 700, r = 8, p = 3;  // lora_chunk(700, 3) = 256: parts 256, 256, 188
  const Tensor slots = Tensor::from_vector(std::vector<int32_t>{0, -1, 1, 1, 0});
  const Tensor scales = Tensor::from_vector(std::vector<float>{0.5f, 2.0f});
  const Tensor x = test::random_tensor({n, in}, DType::kF32, 1);
  ops::LoraSegments segs;
  segs.n = 2;
  for (int g = 0; g < 2; ++g) {
    segs.a[g] = test::random_tensor({2, r, in}, DType::kF32, 2 + g);
    segs.b[g] = test::random_tensor({2, 12, r}, DType::kF32, 4 + g);
  }
  Tensor whole = Tensor::empty({n, 2 * r}, DType::kF32);
  Tensor split = Tensor::empty({p, n, 2 * r}, DType::kF32);
  ops::lora_shrink(x, segs, slots, whole);
  ops::lora_shrink(x, segs, slots, split);
  const std::vector<double> w = test::to_doubles(whole), sp = test::to_doubles(split);
  std::vector<double> summed(w.size(), 0.0);
  for (int64_t z = 0; z < p; ++z)
    for (size_t e = 0; e < w.size(); ++e) summed[e] += sp[static_cast<size_t>(z) * w.size() + e];
  test::expect_close(summed, w, 1e-5, 1e-5, "parts");
  Tensor y1 = test::random_tensor({n, 12}, DType::kF32, 8), y2 = y1.clone();
  Tensor y1b = test::random_tensor({n, 12}, DType::kF32, 9), y2b = y1b.clone();
  segs.y[0] = y1;
  segs.y[1] = y1b;
  ops::lora_expand(whole, segs, slots, scales);
  segs.y[0] = y2;
  segs.y[1] = y2b;
  ops::lora_expand(split, segs, slots, scales);
  test::expect_close(test::to_doubles(y2), test::to_doubles(y1), 1e-5, 1e-5, "expand of parts");
  test::expect_close(test::to_doubles(y2b), test::to_doubles(y1b), 1e-5, 1e-5, "expand of parts");
}

TEST(LoraOps, SegmentedOpsRefuseBadSegmentLists) {
  const Tensor x = test::random_tensor({4, 16}, DType::kF32, 1);
  const Tensor slots = Tensor::from_vector(std::vector<int32_t>{0, 0, -1, 0});
  const Tensor scales = Tensor::from_vector(std::vector<float>{1.0f});
  ops::LoraSegments segs;
  Tensor xa = Tensor::empty({4, 8}, DType::kF32);
  EXPECT_THROW(ops::lora_shrink(x, segs, slots, xa), Error);  // no segments
  segs.n = 2;
  segs.a[0] = test::random_tensor({1, 4, 16}, DType::kF32, 2);
  segs.a[1] = test::random_tensor({1, 8, 16}, DType::kF32, 3);  // another rank
  EXPECT_THROW(ops::lora_shrink(x, segs, slots, xa), Error);
  segs.a[1] = test::random_tensor({1, 4, 16}, DType::kF32, 3);
  Tensor xa_small = Tensor::empty({4, 4}, DType::kF32);  // room for one segment only
  EXPECT_THROW(ops::lora_shrink(x, segs, slots, xa_small), Error);
  ops::lora_shrink(x, segs, slots, xa);
  segs.b[0] = test::random_tensor({1, 6, 4}, DType::kF32, 4);
  segs.b[1] = test::random_tensor({1, 6, 4}, DType::kF32, 5);
  segs.y[0] = Tensor::zeros({4, 6}, DType::kF32);
  segs.y[1] = Tensor::zeros({4, 5}, DType::kF32);  // does not fit b[1]
  EXPECT_THROW(ops::lora_expand(xa, segs, slots, scales), Error);
  segs.y[1] = Tensor::zeros({4, 6}, DType::kF32);
  ops::lora_expand(xa, segs, slots, scales);
}

}  // namespace
}  // namespace vela
