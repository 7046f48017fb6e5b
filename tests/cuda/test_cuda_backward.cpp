// CUDA backward ops against their CPU twins (the reference; CPU backward is f32, so for bf16 / f16
// the CPU runs on the same rounded inputs widened to f32). Tolerances: outputs stored in the
// activation dtype use tol_for(dt) scaled by the output's magnitude; f32 parameter gradients
// (sums over rows) differ only by summation order: atol 1e-4 * max|want|, rtol 1e-4 (f32 inputs)
// or 1e-3 (16-bit inputs). The dense attention (forward and backward) runs every CUDA path
// (cuBLASLt GEMMs, the recompute kernels and the flash kernels, chosen through
// VELA_CUDA_DENSE_ATTN; flash falls back for f32). Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <vector>

#include "cuda_test_util.h"
#include "ops/attention.h"
#include "ops/cast.h"
#include "ops/cross_entropy.h"
#include "ops/embedding.h"
#include "ops/reduce.h"
#include "ops/rms_norm.h"
#include "ops/rotary.h"
#include "ops/swiglu.h"

namespace vela {
namespace {

using test::CudaTest;
using test::random_cpu;
using test::Tol;

const DType kDTypes[] = {DType::kF32, DType::kBF16};

Tensor f32(const Tensor& t) { return ops::to_dtype(t.to(Device::cpu()), DType::kF32); }

double max_abs(const Tensor& t) {
  double m = 0.0;
  for (double v : test::to_doubles(t)) m = std::max(m, std::fabs(v));
  return m;
}

// Activation-dtype output vs the f32 CPU reference.
void expect_act_close(const Tensor& got, const Tensor& want, DType dt, const std::string& what) {
  Tol t = test::tol_for(dt);
  const double scale = std::max(1.0, max_abs(want));
  test::expect_close(f32(got), want, {t.atol * scale, t.rtol}, what);
}

// f32 parameter-gradient vs the CPU reference.
void expect_grad_close(const Tensor& got, const Tensor& want, DType dt, const std::string& what) {
  const double rtol = dt == DType::kF32 ? 1e-4 : 1e-3;
  test::expect_close(got.to(Device::cpu()), want, {1e-4 * std::max(1e-6, max_abs(want)), rtol},
                     what);
}

class CudaBackward : public CudaTest {};

TEST_F(CudaBackward, RmsNormMatchesCpu) {
  for (DType dt : kDTypes) {
    for (int64_t hidden : {64, 200, 2048}) {
      const int64_t rows = 37;
      const std::string what = test::label(dt, {rows, hidden});
      Tensor x = random_cpu({rows, hidden}, dt, 1), w = random_cpu({hidden}, dt, 2, 0.5, 1.5);
      Tensor dout = random_cpu({rows, hidden}, dt, 3), dres = random_cpu({rows, hidden}, dt, 4);
      // CPU reference on the widened inputs.
      Tensor cx = f32(x), cw = f32(w), cd = f32(dout),
             cdx = Tensor::empty({rows, hidden}, DType::kF32);
      // clone(): for f32, f32() returns dres itself, and the CPU accumulation into cres must not
      // change dres before it is copied to the GPU below.
      Tensor cdw = Tensor::zeros({hidden}, DType::kF32), cres = f32(dres).clone();
      ops::rms_norm_backward(cx, cw, 1e-6f, cd, cdx, cdw);
      Tensor none;
      ops::add_rms_norm_backward(cx, cw, 1e-6f, cd, cres, none);
      // GPU: dx into a fresh tensor, then in place on dout (QK-norm's aliasing), then fused add.
      Tensor gx = x.to(gpu()), gw = w.to(gpu()), gd = dout.to(gpu());
      Tensor gdx = Tensor::empty({rows, hidden}, dt, gpu());
      Tensor gdw = Tensor::zeros({hidden}, DType::kF32, gpu());
      ops::rms_norm_backward(gx, gw, 1e-6f, gd, gdx, gdw);
      expect_act_close(gdx, cdx, dt, "rms_norm dx " + what);
      expect_grad_close(gdw, cdw, dt, "rms_norm dw " + what);
      Tensor gres = dres.to(gpu());
      ops::add_rms_norm_backward(gx, gw, 1e-6f, gd, gres, none);
      expect_act_close(gres, cres, dt, "add_rms_norm dresidual " + what);
      Tensor gdw2 = Tensor::zeros({hidden}, DType::kF32, gpu());
      Tensor galias = gd.clone();
      ops::rms_norm_backward(gx, gw, 1e-6f, galias, galias, gdw2);
      expect_act_close(galias, cdx, dt, "rms_norm dx in place " + what);
      expect_grad_close(gdw2, cdw, dt, "rms_norm dw in place " + what);
      // f32 weight with 16-bit activations.
      Tensor gdx3 = Tensor::empty({rows, hidden}, dt, gpu());
      ops::rms_norm_backward(gx, f32(w).to(gpu()), 1e-6f, gd, gdx3, none);
      expect_act_close(gdx3, cdx, dt, "rms_norm dx f32 w " + what);
    }
  }
}

TEST_F(CudaBackward, RotaryMatchesCpu) {
  ops::RopeConfig cfg;
  cfg.rotary_dim = 64;
  cfg.max_positions = 512;
  cfg.scaling.type = ops::RopeScaling::Type::kYarn;
  cfg.scaling.factor = 4.0;
  cfg.scaling.original_max_positions = 128;
  Tensor table = ops::make_rope_table(cfg, 512);
  for (DType dt : kDTypes) {
    for (int64_t head_dim : {64, 128}) {  // 128: partial rotary
      Tensor dx = random_cpu({19, 3, head_dim}, dt, 5);
      Tensor pos = test::random_ints({19}, DType::kI32, 6, 0, 512);
      Tensor want = f32(dx).clone();  // clone(): for f32, f32() is dx itself (rotated in place)
      ops::rotary_backward(want, pos, table);
      Tensor got = dx.to(gpu());
      ops::rotary_backward(got, pos.to(gpu()), table.to(gpu()));
      expect_act_close(got, want, dt, "rotary_backward " + test::label(dt, dx.shape()));
    }
  }
}

TEST_F(CudaBackward, SiluMulMatchesCpu) {
  for (DType dt : kDTypes) {
    Tensor x = random_cpu({33, 2 * 300}, dt, 7, -4.0, 4.0), dout = random_cpu({33, 300}, dt, 8);
    Tensor want = Tensor::empty({33, 600}, DType::kF32);
    ops::silu_and_mul_backward(f32(x), f32(dout), want);
    Tensor got = Tensor::empty({33, 600}, dt, gpu());
    ops::silu_and_mul_backward(x.to(gpu()), dout.to(gpu()), got);
    expect_act_close(got, want, dt, "silu_and_mul_backward " + test::label(dt, x.shape()));
  }
}

TEST_F(CudaBackward, EmbeddingScatterAddMatchesCpu) {
  for (DType dt : kDTypes) {
    Tensor ids = test::random_ints({300}, DType::kI32, 9, 0, 50);  // many repeats
    Tensor dout = random_cpu({300, 96}, dt, 10);
    Tensor init = random_cpu({50, 96}, DType::kF32, 11);
    Tensor want = init.clone();
    ops::embedding_backward(ids, f32(dout), want);
    Tensor got = init.to(gpu());
    ops::embedding_backward(ids.to(gpu()), dout.to(gpu()), got);
    expect_grad_close(got, want, dt, "embedding_backward " + test::label(dt, dout.shape()));
  }
  // Deterministic: every id's rows are added in token order by one block, as on the CPU, so f32
  // results equal the CPU bit for bit (several tiles of matches, hidden wider than a block).
  for (auto [n, vocab, hidden] : {std::tuple<int64_t, int64_t, int64_t>{1000, 7, 700},
                                  {2000, 1500, 64}}) {
    Tensor ids = test::random_ints({n}, DType::kI32, 40 + n, 0, vocab);
    Tensor dout = random_cpu({n, hidden}, DType::kF32, 41);
    Tensor want = random_cpu({vocab, hidden}, DType::kF32, 42);
    Tensor got = want.to(gpu());
    ops::embedding_backward(ids, dout, want);
    ops::embedding_backward(ids.to(gpu()), dout.to(gpu()), got);
    Tensor g = got.to(Device::cpu());
    EXPECT_EQ(std::memcmp(g.data_ptr(), want.data_ptr(), want.nbytes()), 0)
        << "embedding_backward f32 on CUDA differs from the CPU (n " << n << ", vocab " << vocab
        << ")";
  }
}

TEST_F(CudaBackward, SumRowsMatchesCpu) {
  for (DType dt : kDTypes) {
    Tensor x = random_cpu({257, 130}, dt, 12);
    Tensor want = random_cpu({130}, DType::kF32, 13), got = want.to(gpu());
    ops::sum_rows(f32(x), want, true);
    ops::sum_rows(x.to(gpu()), got, true);
    expect_grad_close(got, want, dt, "sum_rows " + test::label(dt, x.shape()));
  }
}

TEST_F(CudaBackward, CrossEntropyMatchesCpu) {
  for (DType dt : kDTypes) {
    for (float smoothing : {0.0f, 0.1f}) {
      const int64_t rows = 21, vocab = 5003;
      Tensor logits = random_cpu({rows, vocab}, dt, 14, -6.0, 6.0);
      Tensor tgt = test::random_ints({rows}, DType::kI32, 15, 0, vocab);
      tgt.data<int32_t>()[3] = -100;
      tgt.data<int32_t>()[17] = -100;
      Tensor want = Tensor::empty({rows, vocab}, DType::kF32);
      ops::cross_entropy_backward(f32(logits), tgt, want, 0.25f, -100, smoothing);
      Tensor got = Tensor::empty({rows, vocab}, DType::kF32, gpu());
      ops::cross_entropy_backward(logits.to(gpu()), tgt.to(gpu()), got, 0.25f, -100, smoothing);
      test::expect_close(got.to(Device::cpu()), want, {1e-6, 1e-4},
                         "cross_entropy_backward " + test::label(dt, logits.shape()));
      if (dt == DType::kF32) {  // in place on f32 logits
        Tensor inplace = logits.to(gpu());
        ops::cross_entropy_backward(inplace, tgt.to(gpu()), inplace, 0.25f, -100, smoothing);
        test::expect_close(inplace.to(Device::cpu()), want, {1e-6, 1e-4}, "ce in place");
      }
    }
  }
}

// The fused form the LM-head loss uses: f32 logits in, per-row losses and a bf16 / f16 / f32
// gradient out of one kernel (vector path at vocab % 4 == 0, scalar path otherwise).
TEST_F(CudaBackward, CrossEntropyBackwardWithLossesAndLowPrecisionGradient) {
  for (int64_t vocab : {int64_t{4096}, int64_t{5003}}) {
    for (float smoothing : {0.0f, 0.1f}) {
      const int64_t rows = 19;
      Tensor logits = random_cpu({rows, vocab}, DType::kF32, 24, -6.0, 6.0);
      Tensor tgt = test::random_ints({rows}, DType::kI32, 25, 0, vocab);
      tgt.data<int32_t>()[5] = -100;
      Tensor want_loss = Tensor::empty({rows}, DType::kF32);
      ops::cross_entropy(logits, tgt, want_loss, -100, smoothing);
      Tensor want = Tensor::empty({rows, vocab}, DType::kF32);
      ops::cross_entropy_backward(logits, tgt, want, 0.5f, -100, smoothing);
      for (DType gdt : {DType::kF32, DType::kBF16, DType::kF16}) {
        const std::string what = "ce fused " + test::label(gdt, logits.shape()) + " eps " +
                                 std::to_string(smoothing);
        Tensor got = Tensor::empty({rows, vocab}, gdt, gpu());
        Tensor loss = Tensor::zeros({rows}, DType::kF32, gpu());
        ops::cross_entropy_backward(logits.to(gpu()), tgt.to(gpu()), got, 0.5f, -100, smoothing,
                                    loss);
        test::expect_close(loss.to(Device::cpu()), want_loss, {1e-5, 1e-5}, what + " losses");
        // bf16 / f16: one rounding of the f32 gradient.
        const double rel = gdt == DType::kF32 ? 1e-5 : (gdt == DType::kBF16 ? 8e-3 : 1e-3);
        test::expect_close(f32(got), want, {1e-6, rel}, what + " dlogits");
      }
    }
  }
}

TEST_F(CudaBackward, CausalAttentionForwardAndBackwardMatchCpu) {
  struct Case {
    int64_t b, t, h, hkv, d;
    bool docs;
  };
  for (Case c : {Case{2, 37, 4, 2, 64, false}, Case{1, 150, 4, 1, 128, true},
                 Case{2, 130, 2, 2, 32, true}}) {
    for (DType dt : kDTypes) {
      const std::string what = test::label(dt, {c.b, c.t, c.h, c.hkv, c.d});
      Tensor q = random_cpu({c.b, c.t, c.h, c.d}, dt, 16),
             k = random_cpu({c.b, c.t, c.hkv, c.d}, dt, 17);
      Tensor v = random_cpu({c.b, c.t, c.hkv, c.d}, dt, 18), dout = random_cpu(q.shape(), dt, 19);
      Tensor docs;
      if (c.docs) {
        std::vector<int32_t> d(static_cast<size_t>(c.b * c.t));
        for (int64_t i = 0; i < c.b * c.t; ++i) d[i] = static_cast<int32_t>((i % c.t) / 40);
        docs = Tensor::from_vector(d, {c.b, c.t});
      }
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
      Tensor cq = f32(q), ck = f32(k), cv = f32(v), cd = f32(dout);
      Tensor out = Tensor::empty(q.shape(), DType::kF32);
      ops::causal_attention(cq, ck, cv, docs, scale, out);
      Tensor out_dt = ops::to_dtype(out, dt), cout = f32(out_dt);
      Tensor wq = Tensor::empty(q.shape(), DType::kF32), wk = Tensor::empty(k.shape(), DType::kF32),
             wv = Tensor::empty(k.shape(), DType::kF32);
      ops::causal_attention_backward(cq, ck, cv, docs, scale, cout, cd, wq, wk, wv);
      for (const char* path : {"gemm", "recompute", "flash"}) {
        setenv("VELA_CUDA_DENSE_ATTN", path, 1);
        Tensor gout = Tensor::empty(q.shape(), dt, gpu());
        ops::causal_attention(q.to(gpu()), k.to(gpu()), v.to(gpu()),
                              docs.defined() ? docs.to(gpu()) : docs, scale, gout);
        Tensor gq = Tensor::empty(q.shape(), dt, gpu()), gk = Tensor::empty(k.shape(), dt, gpu()),
               gv = Tensor::empty(k.shape(), dt, gpu());
        ops::causal_attention_backward(q.to(gpu()), k.to(gpu()), v.to(gpu()),
                                       docs.defined() ? docs.to(gpu()) : docs, scale,
                                       out_dt.to(gpu()), dout.to(gpu()), gq, gk, gv);
        unsetenv("VELA_CUDA_DENSE_ATTN");
        const std::string w = what + " (" + path + ")";
        expect_act_close(gout, out, dt, "attention forward " + w);
        expect_act_close(gq, wq, dt, "attention dq " + w);
        expect_act_close(gk, wk, dt, "attention dk " + w);
        expect_act_close(gv, wv, dt, "attention dv " + w);
      }
    }
  }
}

}  // namespace
}  // namespace vela
