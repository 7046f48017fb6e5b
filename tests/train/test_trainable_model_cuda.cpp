// TrainableModel on a CUDA model against the CPU (the reference): the f32 model must give the CPU
// loss and gradients up to summation order (loss relative 1e-4, every gradient tensor
// max|err| <= 2e-3 * max|cpu grad|: cuBLASLt may use other GEMM reductions); the bf16 model (f32
// gradients, bf16 activations) within bf16 error (loss relative 2e-2, gradients
// max|err| <= 0.25 * max|cpu grad| per tensor: see Bf16GradientsTrackCpu for where that comes
// from). Skipped cleanly without a usable GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/cuda/cuda_api.h"
#include "train/trainable_model.h"
#include "train_test_util.h"

namespace vela {
namespace {

void compare_with_cpu(const std::string& name, DType dt, double loss_rtol, double grad_rel,
                      bool checkpoint) {
  if (!cuda::available()) GTEST_SKIP() << "no usable CUDA device";
  const std::string dir = "fixtures/models/" + name;
  Transformer cpu_model = Transformer::load(dir, DType::kF32, Device::cpu());
  Transformer gpu_model = Transformer::load(dir, dt, Device::cuda(0));
  TrainBatch batch = test::packed_batch(cpu_model.config.vocab_size, 24, 3);
  TrainOptions o;
  o.ce_chunk_tokens = 13;
  o.label_smoothing = 0.05f;
  TrainableModel cpu(cpu_model, o);
  o.activation_checkpointing = checkpoint;
  TrainableModel gpu(gpu_model, o);
  LossStats lc = cpu.forward_backward(batch), lg = gpu.forward_backward(batch);
  EXPECT_EQ(lc.n_tokens, lg.n_tokens);
  EXPECT_NEAR(lg.mean(), lc.mean(), loss_rtol * lc.mean()) << name << " " << dtype_name(dt);
  ASSERT_EQ(cpu.parameters().size(), gpu.parameters().size());
  double worst = 0.0;
  for (size_t i = 0; i < cpu.parameters().size(); ++i) {
    const Parameter& pc = cpu.parameters()[i];
    const Parameter& pg = gpu.parameters()[i];
    ASSERT_EQ(pc.name, pg.name);
    ASSERT_TRUE(pg.grad.is_cuda()) << pg.name;
    ASSERT_EQ(pg.grad.dtype(), DType::kF32) << pg.name;
    std::vector<float> a = pc.grad.to_vector<float>(), b = pg.grad.to_vector<float>();
    double max_ref = 0.0, max_err = 0.0;
    for (size_t j = 0; j < a.size(); ++j) {
      max_ref = std::max(max_ref, static_cast<double>(std::fabs(a[j])));
      max_err = std::max(max_err, static_cast<double>(std::fabs(a[j] - b[j])));
    }
    EXPECT_LE(max_err, grad_rel * max_ref) << pc.name << " " << dtype_name(dt);
    worst = std::max(worst, max_ref > 0 ? max_err / max_ref : 0.0);
  }
  std::printf("[cuda train] %s %s%s: loss cpu %.6f cuda %.6f, worst max|err|/max|g| %.3e\n",
              name.c_str(), dtype_name(dt), checkpoint ? " (checkpointed)" : "", lc.mean(),
              lg.mean(), worst);
}

TEST(TrainableModelCuda, F32GradientsMatchCpu) {
  compare_with_cpu("qwen3_qknorm", DType::kF32, 1e-4, 2e-3, false);
  compare_with_cpu("qwen2_bias_tied", DType::kF32, 1e-4, 2e-3, true);
}

// Mixture of experts on CUDA (routing, grouped GEMMs, weight gradients, router losses on: the
// fixtures carry output_router_logits and router_z_loss_coef) against the CPU, f32.
TEST(TrainableModelCuda, MoeF32GradientsMatchCpu) {
  compare_with_cpu("qwen3_moe", DType::kF32, 1e-4, 2e-3, false);
  compare_with_cpu("qwen2_moe_shared", DType::kF32, 1e-4, 2e-3, true);
}

// The bf16 gradient tolerance is measured, not guessed. bf16 keeps 8 mantissa bits (relative
// rounding up to 2^-9), and these fixtures are deliberately ill-conditioned (initializer_range 0.3
// in tools/make_model_fixtures.py: sharp attention and large pre-activations amplify small input
// changes). Rounding ONLY the weights to bf16, with the CPU f32 pipeline otherwise unchanged,
// already moves the gradients by max|err|/max|g| up to 7.4e-2 on llama_gqa (layers.1
// input_layernorm 7.4e-2, qkv_proj 6.5e-2; layers.0 down_proj 5.0e-2, gate_up_proj 4.6e-2) and
// 3.2e-2 on qwen3_qknorm. The CUDA bf16 model also rounds every activation; on an H200 it
// measured 1.16e-1 on llama_gqa (over the old 0.1 on exactly those four tensors, 1.5-2.5x their
// weight-only error) and 6.2e-2 on qwen3_qknorm. 0.25 leaves ~2x headroom over that. Kernel
// correctness is what F32GradientsMatchCpu (2e-3, measured <= 1e-5) and the per-op bf16 checks in
// tests/cuda/test_cuda_backward.cpp pin down; this test catches gross bf16-only breakage (a wrong
// dtype path gives errors of the order of max|g| itself).
TEST(TrainableModelCuda, Bf16GradientsTrackCpu) {
  compare_with_cpu("llama_gqa", DType::kBF16, 2e-2, 0.25, false);
  compare_with_cpu("qwen3_qknorm", DType::kBF16, 2e-2, 0.25, true);
}

// GPU training is deterministic: the same batch twice gives bit-identical losses and gradients
// (flash attention without atomics, deterministic embedding / norm / bias reductions, fixed GEMM
// algorithms), so GPU runs reproduce and can be bisected.
TEST(TrainableModelCuda, GradientsAreBitReproducible) {
  if (!cuda::available()) GTEST_SKIP() << "no usable CUDA device";
  for (const char* name : {"llama_gqa", "qwen3_qknorm"}) {
    Transformer model = Transformer::load(std::string("fixtures/models/") + name, DType::kBF16,
                                          Device::cuda(0));
    TrainBatch batch = test::packed_batch(model.config.vocab_size, 24, 3);
    TrainOptions o;
    o.ce_chunk_tokens = 13;
    TrainableModel tm(model, o);
    std::vector<std::vector<float>> first;
    LossStats a = tm.forward_backward(batch);
    for (const Parameter& p : tm.parameters()) first.push_back(p.grad.to_vector<float>());
    tm.zero_grad();
    LossStats b = tm.forward_backward(batch);
    EXPECT_EQ(a.loss_sum, b.loss_sum) << name;
    for (size_t i = 0; i < first.size(); ++i) {
      std::vector<float> g = tm.parameters()[i].grad.to_vector<float>();
      EXPECT_EQ(std::memcmp(g.data(), first[i].data(), g.size() * sizeof(float)), 0)
          << name << " " << tm.parameters()[i].name << " differs between two identical steps";
    }
  }
}

}  // namespace
}  // namespace vela
