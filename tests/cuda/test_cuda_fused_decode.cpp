// The fused decode ops against their CPU twins: rms_norm_gemm / gemm_add / silu_mul_gemm_add
// (ops/fused_gemm.h: the CUDA GEMV with a norm or SiLU*up prologue and a residual-add epilogue,
// rms_norm_gemm_silu_mul, 1..8 rows, and the unfused fallback at 9 rows), qkv_rotary_kv_write
// (ops/qkv_rotary.h: head_dim 16 .. 256, partial rotary, QK-norm in f32 and bf16, shuffled slots),
// rms_norm_gemm_rotary_kv_write (the q|k|v GEMV with the rotary / cache-write epilogue),
// gemm_rotary_kv_write (the multi-row q|k|v wgmma GEMM with that epilogue, sm_90),
// the norm-pieces forms (the norm in the multi-row GEMMs: NormPieceGemmsMatchUnfused), the fused
// engine paths against the unfused ones at batch 1 and in multi-row steps (greedy tokens, logprobs
// within bf16 noise), and an opt-in benchmark (DISABLED_FusedDecodeBench) of the GEMV variants at
// bench-1b's shapes.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/cuda/stream.h"
#include "core/json.h"
#include "cuda/cuda_test_util.h"
#include "engine/engine.h"
#include "ops/cast.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/elementwise.h"
#include "ops/fused_gemm.h"
#include "ops/gemm.h"
#include "ops/qkv_rotary.h"
#include "ops/rms_norm.h"
#include "ops/rotary.h"
#include "ops/swiglu.h"

namespace vela {
namespace {

using test::CudaTest;

class CudaFusedDecodeTest : public CudaTest {};

// One rounding of the projection (and of the residual sum), fp32 sums in another order; the norm
// or SiLU*up input is rounded once on both sides, so a 1-ulp flip there moves the dot a little.
test::Tol fused_tol(DType dt, int64_t k) {
  test::Tol t = test::tol_for(dt);
  return {t.atol * 2 + 2e-5 * std::sqrt(static_cast<double>(k)), t.rtol * 2};
}

TEST_F(CudaFusedDecodeTest, FusedGemmsMatchCpu) {
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (int64_t m : {1, 2, 3, 5, 8, 9}) {
      for (auto [n, k] :
           {std::pair<int64_t, int64_t>{13, 1536}, {1000, 264}, {70, 6912}, {600, 512}}) {
        const std::string what = std::string(dtype_name(dt)) + " m" + std::to_string(m) + " n" +
                                 std::to_string(n) + " k" + std::to_string(k);
        SCOPED_TRACE(what);
        Tensor x = test::random_cpu({m, k}, dt, 1, -3.0, 3.0);
        Tensor w = test::random_cpu({n + 8, k}, dt, 2).slice(0, 8, n + 8);  // a fused part
        Tensor dx = x.to(gpu()), dw = w.to(gpu());
        for (DType norm_dt : {DType::kF32, dt}) {
          Tensor nw = test::random_cpu({k}, norm_dt, 3, 0.5, 1.5);
          Tensor want = Tensor::empty({m, n}, dt), got = Tensor::empty({m, n}, dt, gpu());
          ops::rms_norm_gemm(x, nw, 1e-5f, w, want);
          ops::rms_norm_gemm(dx, nw.to(gpu()), 1e-5f, dw, got);
          test::expect_close(got, want, fused_tol(dt, k), what + " rms_norm_gemm");
        }
        {
          // gate | up, scaled so that gate and up stay O(1): a 1-ulp flip of a large gate would
          // move silu(gate) * up by more than the output's own rounding.
          Tensor w2 = test::random_cpu({2 * n, k}, dt, 12, -0.02, 0.02);
          Tensor nw = test::random_cpu({k}, DType::kF32, 13, 0.5, 1.5);
          Tensor want = Tensor::empty({m, n}, dt), got = Tensor::empty({m, n}, dt, gpu());
          ops::rms_norm_gemm_silu_mul(x, nw, 1e-5f, w2, want);
          ops::rms_norm_gemm_silu_mul(dx, nw.to(gpu()), 1e-5f, w2.to(gpu()), got);
          test::expect_close(got, want, fused_tol(dt, k), what + " rms_norm_gemm_silu_mul");
        }
        {
          Tensor r = test::random_cpu({m, n}, dt, 4, -4.0, 4.0);
          Tensor got = r.to(gpu());
          ops::gemm_add(x, w, r);
          ops::gemm_add(dx, dw, got);
          test::expect_close(got, r, fused_tol(dt, k), what + " gemm_add");
        }
        {
          Tensor h = test::random_cpu({m, 2 * k}, dt, 5, -3.0, 3.0);
          Tensor r = test::random_cpu({m, n}, dt, 6, -4.0, 4.0);
          Tensor got = r.to(gpu());
          ops::silu_mul_gemm_add(h, w, r);
          ops::silu_mul_gemm_add(h.to(gpu()), dw, got);
          test::expect_close(got, r, fused_tol(dt, k), what + " silu_mul_gemm_add");
        }
      }
    }
  }
}

// The persistent GEMV grids (a block takes column groups blockIdx.x, + gridDim.x, ...): with the
// grid capped at a few blocks every block runs many groups (the next group's loads and residual
// read ahead of the reduction, the W > 1 partial sums reused, the staged norm kept), and every
// output must be the same bits as with one group per block or the resident grid.
TEST_F(CudaFusedDecodeTest, PersistentGroupsGiveTheSameBits) {
  struct CapReset {
    ~CapReset() { ops::cuda::gemv_set_max_grid(0); }
  } reset;
  const DType dt = DType::kBF16;
  for (int64_t m : {1, 2, 4, 8}) {
    for (auto [n, k] :
         {std::pair<int64_t, int64_t>{3000, 1024}, {1000, 264}, {200, 6912}, {6000, 512}}) {
      const std::string what =
          "m" + std::to_string(m) + " n" + std::to_string(n) + " k" + std::to_string(k);
      SCOPED_TRACE(what);
      Tensor x = test::random_cpu({m, k}, dt, 1, -3.0, 3.0).to(gpu());
      Tensor w = test::random_cpu({n, k}, dt, 2).to(gpu());
      Tensor w2 = test::random_cpu({2 * n, k}, dt, 3, -0.02, 0.02).to(gpu());
      Tensor nw = test::random_cpu({k}, DType::kF32, 4, 0.5, 1.5).to(gpu());
      Tensor r0 = test::random_cpu({m, n}, dt, 5, -4.0, 4.0);
      auto run = [&](int cap) {
        ops::cuda::gemv_set_max_grid(cap);
        std::vector<Tensor> outs;
        Tensor plain = Tensor::empty({m, n}, DType::kF32, gpu());
        ops::gemm(x, w, plain, false, true);
        outs.push_back(plain.to(Device::cpu()));
        Tensor normed = Tensor::empty({m, n}, dt, gpu());
        ops::rms_norm_gemm(x, nw, 1e-5f, w, normed);
        outs.push_back(normed.to(Device::cpu()));
        Tensor act = Tensor::empty({m, n}, dt, gpu());
        ops::rms_norm_gemm_silu_mul(x, nw, 1e-5f, w2, act);
        outs.push_back(act.to(Device::cpu()));
        Tensor r = r0.to(gpu());
        ops::gemm_add(x, w, r);
        outs.push_back(r.to(Device::cpu()));
        cudaDeviceSynchronize();
        return outs;
      };
      const std::vector<Tensor> resident = run(0), capped = run(3), one = run(1);
      const char* names[] = {"gemm", "rms_norm_gemm", "rms_norm_gemm_silu_mul", "gemm_add"};
      for (size_t i = 0; i < resident.size(); ++i) {
        ASSERT_EQ(resident[i].nbytes(), capped[i].nbytes());
        EXPECT_EQ(std::memcmp(resident[i].data_ptr(), capped[i].data_ptr(), resident[i].nbytes()),
                  0)
            << names[i] << " grid 3";
        EXPECT_EQ(std::memcmp(resident[i].data_ptr(), one[i].data_ptr(), resident[i].nbytes()), 0)
            << names[i] << " grid 1";
      }
      // And the capped run against the CPU twins (the values, not only their agreement).
      Tensor want = Tensor::empty({m, n}, dt);
      ops::rms_norm_gemm(x.to(Device::cpu()), nw.to(Device::cpu()), 1e-5f, w.to(Device::cpu()),
                         want);
      test::expect_close(capped[1], want, fused_tol(dt, k), what + " rms_norm_gemm vs cpu");
      Tensor r = r0.clone();
      ops::gemm_add(x.to(Device::cpu()), w.to(Device::cpu()), r);
      test::expect_close(capped[3], r, fused_tol(dt, k), what + " gemm_add vs cpu");
    }
  }
}

// The one-row GEMVs against their CPU twins: the four fused forms at bench-1b's shapes, long rows
// (K = 16384 and 20000), W = 1 / 2 / 4 / 8 (K = 512 / 1536 / 4096 / 6912), a persistent grid of 2
// blocks (each wraps many times); and a two-layer chain of the decode block's GEMVs (each lets the
// next launch before its own wait) as a CUDA graph, replayed: the same bits as eager.
TEST_F(CudaFusedDecodeTest, OneRowGemvMatchesCpuAndReplays) {
  struct Reset {
    ~Reset() { ops::cuda::gemv_set_max_grid(0); }
  } reset;
  const DType dt = DType::kBF16;
  for (auto [n, k] : {std::pair<int64_t, int64_t>{1536, 1536},
                      {1536, 6912},
                      {300, 16384},
                      {40, 20000},
                      {6912, 1536},
                      {700, 512},
                      {500, 4096}}) {
    for (int cap : {0, 2}) {
      const std::string what =
          "n" + std::to_string(n) + " k" + std::to_string(k) + " cap" + std::to_string(cap);
      SCOPED_TRACE(what);
      Tensor x = test::random_cpu({1, k}, dt, 1, -3.0, 3.0);
      Tensor w = test::random_cpu({n, k}, dt, 2, -0.1, 0.1);
      Tensor w2 = test::random_cpu({2 * n, k}, dt, 3, -0.02, 0.02);
      Tensor nw = test::random_cpu({k}, DType::kF32, 4, 0.5, 1.5);
      Tensor r0 = test::random_cpu({1, n}, dt, 5, -4.0, 4.0);
      Tensor dx = x.to(gpu()), dw = w.to(gpu()), dw2 = w2.to(gpu()), dnw = nw.to(gpu());
      auto run = [&] {
        ops::cuda::gemv_set_max_grid(cap);
        std::vector<Tensor> outs;
        Tensor normed = Tensor::empty({1, n}, dt, gpu()), act = normed.clone();
        ops::rms_norm_gemm(dx, dnw, 1e-5f, dw, normed);
        ops::rms_norm_gemm_silu_mul(dx, dnw, 1e-5f, dw2, act);
        Tensor r = r0.to(gpu());
        ops::gemm_add(dx, dw, r);
        Tensor logits = Tensor::empty({1, n}, DType::kF32, gpu());
        ops::gemm(dx, dw, logits, false, true);
        for (Tensor* t : {&normed, &act, &r, &logits}) outs.push_back(t->to(Device::cpu()));
        return outs;
      };
      const std::vector<Tensor> got = run();
      Tensor want_n = Tensor::empty({1, n}, dt), want_a = want_n.clone(), want_r = r0.clone();
      Tensor want_l = Tensor::empty({1, n}, DType::kF32);
      ops::rms_norm_gemm(x, nw, 1e-5f, w, want_n);
      ops::rms_norm_gemm_silu_mul(x, nw, 1e-5f, w2, want_a);
      ops::gemm_add(x, w, want_r);
      ops::gemm(x, w, want_l, false, true);
      const Tensor* want[] = {&want_n, &want_a, &want_r, &want_l};
      const char* names[] = {"rms_norm_gemm", "rms_norm_gemm_silu_mul", "gemm_add", "gemm f32"};
      for (int i = 0; i < 4; ++i)
        test::expect_close(got[i], *want[i], fused_tol(dt, k), what + " " + names[i]);
    }
  }

  // The decode block's chain at bench-1b's shapes, two layers, eagerly and as a replayed graph.
  ops::cuda::gemv_set_max_grid(0);
  const int64_t hidden = 1536, inter = 6912, h = 24, hkv = 4, d = 64;
  Tensor w_qkv = test::random_cpu({(h + 2 * hkv) * d, hidden}, dt, 11, -0.05, 0.05).to(gpu());
  Tensor w_o = test::random_cpu({hidden, hidden}, dt, 12, -0.05, 0.05).to(gpu());
  Tensor w_gu = test::random_cpu({2 * inter, hidden}, dt, 13, -0.05, 0.05).to(gpu());
  Tensor w_down = test::random_cpu({hidden, inter}, dt, 14, -0.02, 0.02).to(gpu());
  Tensor nw = test::random_cpu({hidden}, DType::kF32, 15, 0.5, 1.5).to(gpu());
  ops::RopeConfig rc;
  rc.rotary_dim = d;
  Tensor table = ops::make_rope_table(rc, 512).to(gpu());
  Tensor positions = Tensor::from_vector(std::vector<int32_t>{77}).to(gpu());
  Tensor loc = Tensor::from_vector(std::vector<int32_t>{5}).to(gpu());
  Tensor resid0 = test::random_cpu({1, hidden}, dt, 16, -2.0, 2.0).to(gpu());
  Tensor resid = resid0.clone(), q = Tensor::empty({1, h, d}, dt, gpu());
  Tensor kc = Tensor::zeros({8, hkv, d}, dt, gpu()), vc = kc.clone();
  Tensor act = Tensor::empty({1, inter}, dt, gpu());
  auto chain = [&] {
    for (int layer = 0; layer < 2; ++layer) {
      ops::rms_norm_gemm_rotary_kv_write(resid, nw, 1e-5f, w_qkv, positions, table, loc, q, kc, vc);
      ops::gemm_add(q.view({1, h * d}), w_o, resid);
      ops::rms_norm_gemm_silu_mul(resid, nw, 1e-5f, w_gu, act);
      ops::gemm_add(act, w_down, resid);
    }
  };
  auto outputs = [&] {
    return std::vector<Tensor>{resid.to(Device::cpu()), q.to(Device::cpu()), kc.to(Device::cpu()),
                               vc.to(Device::cpu()), act.to(Device::cpu())};
  };
  chain();
  const std::vector<Tensor> eager = outputs();
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  {
    cuda::StreamGuard sg(stream);
    cudaGraph_t graph;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    chain();
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    cudaGraphDestroy(graph);
    for (int replay = 0; replay < 3; ++replay) {
      SCOPED_TRACE("replay " + std::to_string(replay));
      resid.copy_(resid0);
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      const Tensor got[] = {resid, q, kc, vc, act};
      for (size_t i = 0; i < eager.size(); ++i) {
        const Tensor g = got[i].to(Device::cpu());
        EXPECT_EQ(std::memcmp(g.data_ptr(), eager[i].data_ptr(), g.nbytes()), 0) << "output " << i;
      }
    }
    cudaGraphExecDestroy(exec);
  }
  cudaStreamDestroy(stream);
}

TEST_F(CudaFusedDecodeTest, FusedGemmsRejectBadShapes) {
  Tensor x = Tensor::empty({2, 64}, DType::kBF16, gpu());
  Tensor w = Tensor::empty({32, 48}, DType::kBF16, gpu());
  Tensor out = Tensor::empty({2, 32}, DType::kBF16, gpu());
  Tensor nw = Tensor::empty({64}, DType::kF32, gpu());
  EXPECT_THROW(ops::rms_norm_gemm(x, nw, 1e-5f, w, out), Error);
  EXPECT_THROW(ops::gemm_add(x, w, out), Error);
  Tensor h = Tensor::empty({2, 95}, DType::kBF16, gpu());
  EXPECT_THROW(ops::silu_mul_gemm_add(h, w, out), Error);
}

struct QkvCase {
  int64_t n_tokens, n_heads, n_kv, d, rotary_dim;
  bool qk_norm;
  DType norm_dt;
  int64_t col0 = 0;  // first column of the q|k|v view (1: rows not 16-byte aligned)
};

TEST_F(CudaFusedDecodeTest, QkvRotaryKvWriteMatchesCpu) {
  const QkvCase cases[] = {
      {1, 24, 4, 64, 64, false, DType::kF32},    {3, 8, 2, 128, 128, true, DType::kF32},
      {5, 4, 4, 48, 48, true, DType::kBF16},     {2, 2, 1, 256, 256, true, DType::kF32},
      {4, 6, 2, 80, 40, false, DType::kF32},     {8, 4, 2, 16, 16, false, DType::kF32},
      {1, 12, 12, 96, 64, true, DType::kF32},    {64, 24, 4, 64, 64, false, DType::kF32},
      {64, 16, 8, 128, 128, true, DType::kBF16}, {100, 8, 2, 64, 64, true, DType::kF32},
      {7, 4, 2, 64, 64, true, DType::kF32, 1},  // the one-warp kernel: unaligned rows
  };
  ops::RopeConfig rc;
  rc.theta = 10000.0;
  for (DType dt : test::kFloatDTypes) {
    for (const QkvCase& c : cases) {
      const std::string what = std::string(dtype_name(dt)) + " n" + std::to_string(c.n_tokens) +
                               " H" + std::to_string(c.n_heads) + " Hkv" + std::to_string(c.n_kv) +
                               " d" + std::to_string(c.d) + " rot" + std::to_string(c.rotary_dim) +
                               (c.qk_norm ? " qknorm" : "") + (c.col0 ? " unaligned" : "");
      SCOPED_TRACE(what);
      rc.rotary_dim = c.rotary_dim;
      Tensor table = ops::make_rope_table(rc, 4096);
      const int64_t width = (c.n_heads + 2 * c.n_kv) * c.d, n_slots = 3 * c.n_tokens + 2;
      // Row stride width + 8 on both devices (Tensor::to copies contiguous, so slice after it).
      Tensor qkv_rows = test::random_cpu({c.n_tokens, width + 8}, dt, 7, -2.0, 2.0);
      Tensor qkv = qkv_rows.slice(1, c.col0, c.col0 + width);
      Tensor dqkv = qkv_rows.to(gpu()).slice(1, c.col0, c.col0 + width);
      std::vector<int32_t> pos(static_cast<size_t>(c.n_tokens)), slots(pos.size());
      for (int64_t t = 0; t < c.n_tokens; ++t) {
        pos[t] = static_cast<int32_t>(37 * t + 5 + (t == 1 ? 3000 : 0));
        slots[t] = static_cast<int32_t>((n_slots - 1 - 2 * t) % n_slots);
      }
      Tensor positions = Tensor::from_vector(pos), loc = Tensor::from_vector(slots);
      Tensor qn, kn;
      if (c.qk_norm) {
        qn = test::random_cpu({c.d}, c.norm_dt == DType::kF32 ? DType::kF32 : dt, 8, 0.5, 1.5);
        kn = test::random_cpu({c.d}, qn.dtype(), 9, 0.5, 1.5);
      }
      Tensor kc = test::random_cpu({n_slots, c.n_kv, c.d}, dt, 10);
      Tensor vc = test::random_cpu({n_slots, c.n_kv, c.d}, dt, 11);
      Tensor q = Tensor::empty({c.n_tokens, c.n_heads, c.d}, dt);
      Tensor dkc = kc.to(gpu()), dvc = vc.to(gpu());
      Tensor dq = Tensor::empty(q.shape(), dt, gpu());
      ops::qkv_rotary_kv_write(qkv, positions, table, qn, kn, 1e-6f, loc, q, kc, vc);
      ops::qkv_rotary_kv_write(dqkv, positions.to(gpu()), table.to(gpu()),
                               qn.defined() ? qn.to(gpu()) : qn, kn.defined() ? kn.to(gpu()) : kn,
                               1e-6f, loc.to(gpu()), dq, dkc, dvc);
      test::expect_close(dq, q, test::tol_for(dt), what + " q");
      test::expect_close(dkc, kc, test::tol_for(dt), what + " k_cache");
      test::expect_equal(dvc, vc, what + " v_cache");
    }
  }
}

// gemm_rotary_kv_write (the multi-row q|k|v GEMM with QK-norm, rotary and the q / cache stores in
// the wgmma kernel's split-K epilogue, sm_90) against the unfused CUDA ops (GEMM +
// qkv_rotary_kv_write) and the CPU twin: head_dim 64 and 128 with and without QK-norm (f32 and
// 16-bit weights), 3..64 rows, a position outside the table (not rotated) and a slot of -1 (not
// written); head_dim 80, partial rotary and 65 rows take the unfused path inside the op.
TEST_F(CudaFusedDecodeTest, GemmRotaryKvWriteMatchesUnfused) {
  struct Case {
    int64_t n_heads, n_kv, d, rotary_dim;
    bool qk_norm, norm_f32;
  };
  const Case cases[] = {{24, 4, 64, 64, false, true},  {16, 8, 128, 128, true, true},
                        {8, 2, 128, 128, true, false}, {24, 4, 64, 64, true, false},
                        {4, 4, 80, 80, false, true},   {4, 2, 64, 32, false, true}};
  ops::RopeConfig rc;
  rc.theta = 10000.0;
  const int64_t k = 384;
#ifdef VELA_HAS_SM90A
  struct Restore {  // the wgmma GEMM forced on with TMA loads, whatever the VELA_WGMMA_* switches
                    // say
    ~Restore() {
      ops::cuda::gemm_wgmma_set_enabled(-1);
      ops::cuda::gemm_wgmma_set_tma(-1);
    }
  } restore;
  ops::cuda::gemm_wgmma_set_enabled(1);
  ops::cuda::gemm_wgmma_set_tma(1);
  const cudaDeviceProp& prop = vela::cuda::device_properties();
  const bool sm90 = prop.major == 9 && prop.minor == 0;
#endif
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (const Case& c : cases) {
      for (int64_t m : {3, 17, 64, 65}) {
        const std::string what = std::string(dtype_name(dt)) + " m" + std::to_string(m) + " H" +
                                 std::to_string(c.n_heads) + " Hkv" + std::to_string(c.n_kv) +
                                 " d" + std::to_string(c.d) + " rot" +
                                 std::to_string(c.rotary_dim) + (c.qk_norm ? " qknorm" : "");
        SCOPED_TRACE(what);
        rc.rotary_dim = c.rotary_dim;
        Tensor table = ops::make_rope_table(rc, 512);
        const int64_t width = (c.n_heads + 2 * c.n_kv) * c.d, n_slots = 2 * m + 3;
        Tensor x = test::random_cpu({m, k}, dt, 1, -3.0, 3.0);
        Tensor w = test::random_cpu({width, k}, dt, 2, -0.1, 0.1);
        Tensor qn, kn;
        if (c.qk_norm) {
          qn = test::random_cpu({c.d}, c.norm_f32 ? DType::kF32 : dt, 8, 0.5, 1.5);
          kn = test::random_cpu({c.d}, qn.dtype(), 9, 0.5, 1.5);
        }
        Tensor dqn = qn.defined() ? qn.to(gpu()) : qn, dkn = kn.defined() ? kn.to(gpu()) : kn;
        std::vector<int32_t> pos(static_cast<size_t>(m)), slots(pos.size());
        for (int64_t t = 0; t < m; ++t) {
          pos[t] = static_cast<int32_t>((53 * t + 7) % 512);
          slots[t] = static_cast<int32_t>((n_slots - 1 - 2 * t) % n_slots);
        }
        Tensor kc0 = test::random_cpu({n_slots, c.n_kv, c.d}, dt, 4);
        Tensor vc0 = test::random_cpu({n_slots, c.n_kv, c.d}, dt, 5);
        std::vector<int32_t> dpos = pos, dslots = slots;
        dpos[1] = 100000;  // trusted device metadata: skipped, as the ops do
        dslots[2] = -1;
        Tensor dx = x.to(gpu()), dw = w.to(gpu()), dtab = table.to(gpu());
        Tensor dp = Tensor::from_vector(dpos).to(gpu()), dl = Tensor::from_vector(dslots).to(gpu());
        Tensor fq = Tensor::empty({m, c.n_heads, c.d}, dt, gpu());
        Tensor fk = kc0.to(gpu()), fv = vc0.to(gpu());
#ifdef VELA_HAS_SM90A
        // The fused path: whole heads in a 128-column tile, full rotary, the wgmma GEMM's rows, and
        // K split over a cluster (a GPU that holds no clusters of 2, a MIG slice, has none).
        const bool fused_shape =
            (c.d == 64 || c.d == 128) && c.rotary_dim == c.d && m > ops::cuda::gemv_max_rows() &&
            m <= 64 && ops::cuda::wgmma_gemm_splits(width, k, prop.multiProcessorCount) > 1;
        EXPECT_EQ(ops::cuda::gemm_wgmma_rotary_kv_write(dx, dw, dp, dtab, dqn, dkn, 1e-6f, dl, fq,
                                                        fk, fv),
                  fused_shape && sm90);
#endif
        ops::gemm_rotary_kv_write(dx, dw, dp, dtab, dqn, dkn, 1e-6f, dl, fq, fk, fv);
        Tensor uq = Tensor::empty({m, c.n_heads, c.d}, dt, gpu());
        Tensor uk = kc0.to(gpu()), uv = vc0.to(gpu());
        Tensor qkv = Tensor::empty({m, width}, dt, gpu());
        ops::gemm(dx, dw, qkv, false, true);
        ops::qkv_rotary_kv_write(qkv, dp, dtab, dqn, dkn, 1e-6f, dl, uq, uk, uv);
        test::expect_close(fq, uq, test::tol_for(dt), what + " q vs unfused");
        test::expect_close(fk, uk, test::tol_for(dt), what + " k_cache vs unfused");
        test::expect_equal(fv, uv, what + " v_cache vs unfused");
        // The CPU twin on in-range metadata.
        Tensor cq = Tensor::empty({m, c.n_heads, c.d}, dt);
        Tensor ck = kc0.clone(), cv = vc0.clone();
        Tensor positions = Tensor::from_vector(pos), loc = Tensor::from_vector(slots);
        ops::gemm_rotary_kv_write(x, w, positions, table, qn, kn, 1e-6f, loc, cq, ck, cv);
        Tensor gq = Tensor::empty({m, c.n_heads, c.d}, dt, gpu());
        Tensor gk = kc0.to(gpu()), gv = vc0.to(gpu());
        ops::gemm_rotary_kv_write(dx, dw, positions.to(gpu()), dtab, dqn, dkn, 1e-6f, loc.to(gpu()),
                                  gq, gk, gv);
        test::expect_close(gq, cq, fused_tol(dt, k), what + " q vs cpu");
        test::expect_close(gk, ck, fused_tol(dt, k), what + " k_cache vs cpu");
        test::expect_close(gv, cv, fused_tol(dt, k), what + " v_cache vs cpu");
      }
    }
  }
}

// The norm-pieces forms (ops/fused_gemm.h) at the wgmma GEMM's rows: gemm_add with pieces (the
// residual add, round(residual * next_w) and the per-128-column sums of squares in the split-K
// reduction; 700 columns: a partial last tile) against gemm_add (within a rounding) and its pieces
// against norm_pieces of the stored residual (the same bits); rms_norm_gemm_silu_mul /
// rms_norm_gemm_rotary_kv_write on pieces (rstd applied to the product, so one rounding moves;
// norm weights f32 and 16-bit; QK-norm on and off; head_dim 64 and 128) as close to the f32 CPU
// ops as rms_norm followed by the unnormed GEMM is (at most twice its largest error), and on sm_90
// that the single-kernel forms ran.
TEST_F(CudaFusedDecodeTest, NormPieceGemmsMatchUnfused) {
#ifdef VELA_HAS_SM90A
  struct Restore {
    ~Restore() { ops::cuda::gemm_wgmma_set_enabled(-1); }
  } restore;
  ops::cuda::gemm_wgmma_set_enabled(1);
  const cudaDeviceProp& prop = vela::cuda::device_properties();
  const bool sm90 = prop.major == 9 && prop.minor == 0;
#endif
  const int64_t k = 1024, n_res = 700, inter = 512;
  ops::RopeConfig rc;
  // The largest |got - want| (want: f32 on the CPU).
  auto max_err = [](const Tensor& got, const Tensor& want) {
    const std::vector<double> g = test::to_doubles(got), w = test::to_doubles(want);
    double e = 0.0;
    for (size_t i = 0; i < g.size(); ++i) e = std::max(e, std::fabs(g[i] - w[i]));
    return e;
  };
  auto f32 = [](const Tensor& t) { return ops::to_dtype(t.to(Device::cpu()), DType::kF32); };
  // fused at most twice as far from the f32 result as unfused (+ a floor for exact results).
  auto expect_as_close = [&](const Tensor& fused, const Tensor& unfused, const Tensor& ref,
                             const std::string& what) {
    const double ef = max_err(fused, ref), eu = max_err(unfused, ref);
    EXPECT_LE(ef, 2.0 * eu + 1e-3) << what << ": fused " << ef << ", unfused " << eu;
  };
  auto pieces_for = [](int64_t m, int64_t n, DType dt) {
    return ops::NormPieces{
        Tensor::empty({m, n}, dt, gpu()),
        Tensor::empty({m, (n + ops::kRowSqGroup - 1) / ops::kRowSqGroup}, DType::kF32, gpu())};
  };
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (int64_t m : {3, 17, 64}) {
      for (bool norm_f32 : {true, false}) {
        const std::string what = std::string(dtype_name(dt)) + " m" + std::to_string(m) +
                                 (norm_f32 ? " norm f32" : " norm 16-bit");
        SCOPED_TRACE(what);
        const DType wdt = norm_f32 ? DType::kF32 : dt;
        // gemm_add with the next norm's pieces.
        Tensor a = test::random_cpu({m, k}, dt, 1, -1.0, 1.0).to(gpu());
        Tensor w = test::random_cpu({n_res, k}, dt, 2, -0.1, 0.1).to(gpu());
        Tensor next_w = test::random_cpu({n_res}, wdt, 11, 0.5, 1.5).to(gpu());
        Tensor r0 = test::random_cpu({m, n_res}, dt, 3, -3.0, 3.0).to(gpu());
        Tensor r = r0.clone(), r_want = r0.clone();
        ops::NormPieces next = pieces_for(m, n_res, dt), next_want = pieces_for(m, n_res, dt);
#ifdef VELA_HAS_SM90A
        EXPECT_EQ(ops::cuda::gemm_wgmma_add(a, w, r, next_w, next.scaled, next.row_sq), sm90);
        r = r0.clone();
#endif
        ops::gemm_add(a, w, r, next_w, next);
        ops::gemm_add(a, w, r_want);  // (the plain GEMM may sum in another order at a few rows)
        test::expect_close(r, r_want, fused_tol(dt, k), what + " residual");
        ops::norm_pieces(r, next_w, next_want);  // the pieces of what was stored: the same bits
        test::expect_equal(next.scaled, next_want.scaled, what + " scaled");
        test::expect_equal(next.row_sq, next_want.row_sq, what + " row_sq");

        // rms_norm_gemm_silu_mul on the pieces of a residual x of varied row scales.
        Tensor x = test::random_cpu({m, k}, dt, 4, -4.0, 4.0).to(gpu());
        Tensor nw = test::random_cpu({k}, wdt, 5, 0.5, 1.5).to(gpu());
        ops::NormPieces xp = pieces_for(m, k, dt);
        ops::norm_pieces(x, nw, xp);
        Tensor normed = Tensor::empty({m, k}, dt, gpu());
        ops::rms_norm(x, nw, 1e-5f, normed);
        Tensor wgu = test::random_cpu({2 * inter, k}, dt, 6, -0.1, 0.1).to(gpu());
        Tensor act = Tensor::empty({m, inter}, dt, gpu()), act_want = act.clone();
#ifdef VELA_HAS_SM90A
        EXPECT_EQ(ops::cuda::gemm_wgmma_silu_mul(xp.scaled, wgu, act, xp.row_sq, 1e-5f), sm90);
#endif
        ops::rms_norm_gemm_silu_mul(xp, 1e-5f, wgu, act);
        ops::gemm_silu_mul(normed, wgu, act_want);
        Tensor normed32 = Tensor::empty({m, k}, DType::kF32);
        ops::rms_norm(f32(x), f32(nw), 1e-5f, normed32);
        Tensor act32 = Tensor::empty({m, inter}, DType::kF32);
        ops::gemm_silu_mul(normed32, f32(wgu), act32);
        expect_as_close(act, act_want, act32, what + " act");

        // rms_norm_gemm_rotary_kv_write on the pieces.
        for (auto [h, hkv, d, qk_norm] :
             {std::tuple<int64_t, int64_t, int64_t, bool>{24, 4, 64, true},
              {8, 2, 128, false},
              {8, 4, 128, true}}) {
          SCOPED_TRACE("d" + std::to_string(d) + (qk_norm ? " qknorm" : ""));
          rc.rotary_dim = d;
          Tensor tab = ops::make_rope_table(rc, 512).to(gpu());
          const int64_t width = (h + 2 * hkv) * d, n_slots = 2 * m + 1;
          Tensor wqkv = test::random_cpu({width, k}, dt, 7, -0.1, 0.1).to(gpu());
          Tensor qn, kn;
          if (qk_norm) {
            qn = test::random_cpu({d}, wdt, 8, 0.5, 1.5).to(gpu());
            kn = test::random_cpu({d}, wdt, 9, 0.5, 1.5).to(gpu());
          }
          std::vector<int32_t> pos(static_cast<size_t>(m)), slots(pos.size());
          for (int64_t t = 0; t < m; ++t) {
            pos[t] = static_cast<int32_t>((37 * t + 3) % 512);
            slots[t] = static_cast<int32_t>((n_slots - 1 - 2 * t) % n_slots);
          }
          Tensor dp = Tensor::from_vector(pos).to(gpu()), dl = Tensor::from_vector(slots).to(gpu());
          Tensor kc0 = test::random_cpu({n_slots, hkv, d}, dt, 10).to(gpu());
          Tensor q = Tensor::empty({m, h, d}, dt, gpu()), kc = kc0.clone(), vc = kc0.clone();
          Tensor q_want = q.clone(), kc_want = kc0.clone(), vc_want = kc0.clone();
#ifdef VELA_HAS_SM90A
          EXPECT_EQ(ops::cuda::gemm_wgmma_rotary_kv_write(xp.scaled, wqkv, dp, tab, qn, kn, 1e-6f,
                                                          dl, q, kc, vc, xp.row_sq, 1e-5f),
                    sm90 && ops::cuda::wgmma_gemm_splits(width, k, prop.multiProcessorCount) > 1);
#endif
          ops::rms_norm_gemm_rotary_kv_write(xp, 1e-5f, wqkv, dp, tab, qn, kn, 1e-6f, dl, q, kc,
                                             vc);
          ops::gemm_rotary_kv_write(normed, wqkv, dp, tab, qn, kn, 1e-6f, dl, q_want, kc_want,
                                    vc_want);
          Tensor q32 = Tensor::empty({m, h, d}, DType::kF32), kc32 = f32(kc0), vc32 = f32(kc0);
          ops::gemm_rotary_kv_write(normed32, f32(wqkv), Tensor::from_vector(pos), f32(tab),
                                    qn.defined() ? f32(qn) : qn, kn.defined() ? f32(kn) : kn, 1e-6f,
                                    Tensor::from_vector(slots), q32, kc32, vc32);
          expect_as_close(q, q_want, q32, what + " q");
          expect_as_close(kc, kc_want, kc32, what + " k_cache");
          expect_as_close(vc, vc_want, vc32, what + " v_cache");
        }
      }
    }
  }
}

// The wgmma GEMMs' o / down (+ residual, next norm's pieces) and gate|up (SiLU) epilogues
// pipelined over their items (gemm_wgmma_set_pipe_items, VELA_WGMMA_PIPE_ITEMS) give the same bits
// as the plain walk: 3..64 rows, shapes of 2..16 splits (past 8, gate|up keeps the plain walk).
TEST_F(CudaFusedDecodeTest, PipelinedEpiloguesGiveTheSameBits) {
#ifndef VELA_HAS_SM90A
  GTEST_SKIP() << "the wgmma GEMM is built for sm_90a only";
#else
  const cudaDeviceProp& prop = vela::cuda::device_properties();
  if (prop.major != 9 || prop.minor != 0) GTEST_SKIP() << "the wgmma GEMM runs on sm_90 only";
  struct Restore {
    ~Restore() {
      ops::cuda::gemm_wgmma_set_pipe_items(-1);
      ops::cuda::gemm_wgmma_set_enabled(-1);
    }
  } restore;
  ops::cuda::gemm_wgmma_set_enabled(1);
  auto pieces_for = [](int64_t m, int64_t n, DType dt) {
    return ops::NormPieces{
        Tensor::empty({m, n}, dt, gpu()),
        Tensor::empty({m, (n + ops::kRowSqGroup - 1) / ops::kRowSqGroup}, DType::kF32, gpu())};
  };
  auto label = [&](const char* kind, int64_t n, int64_t k, int64_t w_rows) {
    return std::string(kind) + " n" + std::to_string(n) + " k" + std::to_string(k) + " (" +
           std::to_string(ops::cuda::wgmma_gemm_splits(w_rows, k, prop.multiProcessorCount)) +
           " splits)";
  };
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (int64_t m : {3, 17, 40, 64}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " m" + std::to_string(m));
      Tensor x = test::random_cpu({m, 5632}, dt, 1, -1.0, 1.0).to(gpu());
      // The residual add with the next norm's pieces (o / down): 5, 8, 11 and 16 splits on the
      // H100 / H200's 132 SMs.
      for (auto [n, k] :
           {std::pair<int64_t, int64_t>{4096, 1024}, {700, 1024}, {1536, 4096}, {256, 5632}}) {
        const std::string what = label("add", n, k, n);
        Tensor a = x.slice(1, 0, k).contiguous();
        Tensor w = test::random_cpu({n, k}, dt, 2, -0.1, 0.1).to(gpu());
        Tensor next_w = test::random_cpu({n}, dt, 3, 0.5, 1.5).to(gpu());
        Tensor r0 = test::random_cpu({m, n}, dt, 4, -3.0, 3.0).to(gpu());
        Tensor r[2];
        ops::NormPieces next[2] = {pieces_for(m, n, dt), pieces_for(m, n, dt)};
        for (int pipe = 0; pipe < 2; ++pipe) {
          ops::cuda::gemm_wgmma_set_pipe_items(pipe);
          r[pipe] = r0.clone();
          ASSERT_TRUE(ops::cuda::gemm_wgmma_add(a, w, r[pipe], next_w, next[pipe].scaled,
                                                next[pipe].row_sq))
              << what;
        }
        test::expect_equal(r[1], r[0], what + " residual");
        test::expect_equal(next[1].scaled, next[0].scaled, what + " scaled");
        test::expect_equal(next[1].row_sq, next[0].row_sq, what + " row_sq");
      }
      // gate|up with SiLU * up on a norm's pieces: 8, 3 and 2 splits, and 16 (the plain walk).
      for (auto [inter, k] :
           {std::pair<int64_t, int64_t>{512, 1024}, {2816, 1024}, {5632, 2048}, {128, 5632}}) {
        const std::string what = label("silu_mul", inter, k, 2 * inter);
        Tensor a = x.slice(1, 0, k).contiguous();
        Tensor nw = test::random_cpu({k}, dt, 6, 0.5, 1.5).to(gpu());
        ops::NormPieces ap = pieces_for(m, k, dt);
        ops::norm_pieces(a, nw, ap);
        Tensor wgu = test::random_cpu({2 * inter, k}, dt, 5, -0.1, 0.1).to(gpu());
        Tensor act[2];
        for (int pipe = 0; pipe < 2; ++pipe) {
          ops::cuda::gemm_wgmma_set_pipe_items(pipe);
          act[pipe] = Tensor::empty({m, inter}, dt, gpu());
          ASSERT_TRUE(ops::cuda::gemm_wgmma_silu_mul(ap.scaled, wgu, act[pipe], ap.row_sq, 1e-5f))
              << what;
        }
        test::expect_equal(act[1], act[0], what + " act");
      }
    }
  }
#endif
}

// rms_norm_gemm_rotary_kv_write (the q|k|v GEMV with rotary and the cache write in its epilogue)
// against the unfused CUDA ops it stands for (the same bits: each column sums in the same order)
// and the CPU twin, 1..8 rows (9: the unfused fallback), head sizes 16..256, with a position
// outside the rope table (not rotated) and a slot of -1 (not written) on the device, a persistent
// grid capped at 3 blocks, and partial rotary (the unfused fallback inside the op).
TEST_F(CudaFusedDecodeTest, RotaryGemvMatchesUnfused) {
  struct CapReset {
    ~CapReset() { ops::cuda::gemv_set_max_grid(0); }
  } reset;
  struct Case {
    int64_t n_heads, n_kv, d, rotary_dim;
  };
  const Case cases[] = {{24, 4, 64, 64},  {4, 4, 80, 80}, {8, 2, 128, 128},
                        {2, 1, 256, 256}, {3, 1, 48, 48}, {4, 2, 64, 32}};
  ops::RopeConfig rc;
  rc.theta = 10000.0;
  const int64_t k = 384;
  for (DType dt : test::kFloatDTypes) {
    for (const Case& c : cases) {
      for (int64_t m : {1, 2, 3, 8, 9}) {
        for (int cap : {0, 3}) {
          const std::string what = std::string(dtype_name(dt)) + " m" + std::to_string(m) + " H" +
                                   std::to_string(c.n_heads) + " Hkv" + std::to_string(c.n_kv) +
                                   " d" + std::to_string(c.d) + " rot" +
                                   std::to_string(c.rotary_dim) + " cap" + std::to_string(cap);
          SCOPED_TRACE(what);
          ops::cuda::gemv_set_max_grid(cap);
          rc.rotary_dim = c.rotary_dim;
          Tensor table = ops::make_rope_table(rc, 512);
          const int64_t width = (c.n_heads + 2 * c.n_kv) * c.d, n_slots = 2 * m + 3;
          Tensor x = test::random_cpu({m, k}, dt, 1, -3.0, 3.0);
          Tensor w = test::random_cpu({width, k}, dt, 2, -0.1, 0.1);
          Tensor nw = test::random_cpu({k}, DType::kF32, 3, 0.5, 1.5);
          std::vector<int32_t> pos(static_cast<size_t>(m)), slots(pos.size());
          for (int64_t t = 0; t < m; ++t) {
            pos[t] = static_cast<int32_t>(53 * t + 7);
            slots[t] = static_cast<int32_t>((n_slots - 1 - 2 * t) % n_slots);
          }
          Tensor kc0 = test::random_cpu({n_slots, c.n_kv, c.d}, dt, 4);
          Tensor vc0 = test::random_cpu({n_slots, c.n_kv, c.d}, dt, 5);
          // The device run: fused and the unfused CUDA ops, with one row's position past the
          // table and another row's slot -1 (trusted device metadata: skipped, as the ops do).
          std::vector<int32_t> dpos = pos, dslots = slots;
          if (m > 1) dpos[1] = 100000;
          if (m > 2) dslots[2] = -1;
          Tensor dx = x.to(gpu()), dw = w.to(gpu()), dnw = nw.to(gpu()), dtab = table.to(gpu());
          Tensor dp = Tensor::from_vector(dpos).to(gpu()),
                 dl = Tensor::from_vector(dslots).to(gpu());
          Tensor fq = Tensor::empty({m, c.n_heads, c.d}, dt, gpu());
          Tensor fk = kc0.to(gpu()), fv = vc0.to(gpu());
          ops::rms_norm_gemm_rotary_kv_write(dx, dnw, 1e-5f, dw, dp, dtab, dl, fq, fk, fv);
          Tensor uq = Tensor::empty({m, c.n_heads, c.d}, dt, gpu());
          Tensor uk = kc0.to(gpu()), uv = vc0.to(gpu());
          Tensor qkv = Tensor::empty({m, width}, dt, gpu());
          ops::rms_norm_gemm(dx, dnw, 1e-5f, dw, qkv);
          ops::qkv_rotary_kv_write(qkv, dp, dtab, Tensor(), Tensor(), 0.0f, dl, uq, uk, uv);
          test::expect_equal(fq, uq, what + " q vs unfused");
          test::expect_equal(fk, uk, what + " k_cache vs unfused");
          test::expect_equal(fv, uv, what + " v_cache vs unfused");
          // The CPU twin on in-range metadata.
          Tensor cq = Tensor::empty({m, c.n_heads, c.d}, dt);
          Tensor ck = kc0.clone(), cv = vc0.clone();
          Tensor positions = Tensor::from_vector(pos), loc = Tensor::from_vector(slots);
          ops::rms_norm_gemm_rotary_kv_write(x, nw, 1e-5f, w, positions, table, loc, cq, ck, cv);
          Tensor gq = Tensor::empty({m, c.n_heads, c.d}, dt, gpu());
          Tensor gk = kc0.to(gpu()), gv = vc0.to(gpu());
          ops::rms_norm_gemm_rotary_kv_write(dx, dnw, 1e-5f, dw, positions.to(gpu()), dtab,
                                             loc.to(gpu()), gq, gk, gv);
          test::expect_close(gq, cq, fused_tol(dt, k), what + " q vs cpu");
          test::expect_close(gk, ck, fused_tol(dt, k), what + " k_cache vs cpu");
          test::expect_close(gv, cv, fused_tol(dt, k), what + " v_cache vs cpu");
        }
      }
    }
  }
}

std::string fixture(const std::string& name) { return "fixtures/models/" + name; }

// The fixture's reference prompt, 12 greedy tokens with logprobs, EOS ignored.
Request greedy_reference_request(const std::string& dir) {
  std::ifstream f(dir + "/reference.json");
  Request r;
  r.prompt = json::parse(f)["prompt_ids"].get<std::vector<int32_t>>();
  r.params.temperature = 0;
  r.params.max_tokens = 12;
  r.params.ignore_eos = true;
  r.params.logprobs = true;
  return r;
}

// Request by request: max_tokens greedy tokens in each of xs and ys, the same tokens, logprobs
// within bf16 noise (0.05); with first_only, only the first token and its logprob (within 0.1).
void expect_same_greedy(const std::vector<RequestResult>& xs, const std::vector<RequestResult>& ys,
                        const std::vector<Request>& reqs, bool first_only = false) {
  ASSERT_EQ(xs.size(), reqs.size());
  ASSERT_EQ(ys.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    const Completion& x = xs[i].completions[0];
    const Completion& y = ys[i].completions[0];
    ASSERT_EQ(x.tokens.size(), static_cast<size_t>(reqs[i].params.max_tokens)) << i;
    ASSERT_EQ(y.tokens.size(), x.tokens.size()) << i;
    if (first_only) {
      EXPECT_EQ(x.tokens[0], y.tokens[0]) << "request " << i;
      EXPECT_NEAR(x.logprobs[0].logprob, y.logprobs[0].logprob, 0.1) << "request " << i;
      continue;
    }
    EXPECT_EQ(x.tokens, y.tokens) << "request " << i;
    for (size_t t = 0; t < std::min(x.logprobs.size(), y.logprobs.size()); ++t)
      EXPECT_NEAR(x.logprobs[t].logprob, y.logprobs[t].logprob, 0.05)
          << "request " << i << " token " << t;
  }
}

// The engine tests' two copies of a fixture in bf16 on the GPU, multi-row fused blocks off (their
// own test is FusedBatchEngineMatchesUnfused), and their small engine.
std::pair<Transformer, Transformer> load_bf16_pair(const std::string& dir) {
  std::pair<Transformer, Transformer> m{Transformer::load(dir, DType::kBF16, Device::cuda(0)),
                                        Transformer::load(dir, DType::kBF16, Device::cuda(0))};
  m.first.fused_batch = m.second.fused_batch = false;
  return m;
}
EngineConfig small_engine() {
  EngineConfig cfg;
  cfg.max_ctx = 64;
  cfg.max_seqs = 4;
  return cfg;
}

// bf16 engines with the fused decode path on and off: the same greedy tokens, logprobs within
// bf16 noise (the fused GEMVs sum in another order).
TEST_F(CudaFusedDecodeTest, FusedEngineMatchesUnfused) {
  for (const char* name : {"llama_gqa", "qwen3_qknorm", "llama_hd80_mha", "qwen3_hd256"}) {
    SCOPED_TRACE(name);
    const std::string dir = fixture(name);
    const Request r = greedy_reference_request(dir);
    auto [fused_model, plain_model] = load_bf16_pair(dir);
    plain_model.fused_decode = false;
    Engine fused(std::move(fused_model), nullptr, small_engine());
    Engine plain(std::move(plain_model), nullptr, small_engine());
    // One request at a time: the fused blocks run single-row steps (batch-1 decode).
    std::vector<Request> reqs = {r, r};
    reqs[1].prompt.resize(reqs[1].prompt.size() / 2);
    for (size_t i = 0; i < reqs.size(); ++i) {
      const Completion x = fused.generate({reqs[i]})[0].completions[0];
      const Completion y = plain.generate({reqs[i]})[0].completions[0];
      EXPECT_EQ(x.tokens.size(), 12u) << "request " << i;
      EXPECT_EQ(x.tokens, y.tokens) << "request " << i;
      for (size_t t = 0; t < std::min(x.logprobs.size(), y.logprobs.size()); ++t)
        EXPECT_NEAR(x.logprobs[t].logprob, y.logprobs[t].logprob, 0.05)
            << "request " << i << " token " << t;
    }
  }
}

// Multi-row steps (batched decode, prefill) with the fused q|k|v GEMM + qkv_rotary_kv_write
// (Attention::fused_qkv) and with three GEMMs + the unfused ops: the same greedy tokens, logprobs
// within bf16 noise (one GEMM over the fused weight may sum in another order).
TEST_F(CudaFusedDecodeTest, FusedQkvEngineMatchesUnfused) {
  for (const char* name : {"llama_gqa", "qwen3_qknorm", "llama_hd80_mha", "qwen3_hd256"}) {
    SCOPED_TRACE(name);
    const std::string dir = fixture(name);
    const Request r = greedy_reference_request(dir);
    auto [fused_model, plain_model] = load_bf16_pair(dir);
    for (DecoderBlock& b : plain_model.blocks) b.attn.fused_qkv = false;
    for (DecoderBlock& b : fused_model.blocks) ASSERT_TRUE(b.attn.fused_qkv);
    Engine fused(std::move(fused_model), nullptr, small_engine());
    Engine plain(std::move(plain_model), nullptr, small_engine());
    std::vector<Request> reqs = {r, r, r, r};  // four sequences at once: multi-row steps
    for (size_t i = 1; i < reqs.size(); ++i) reqs[i].prompt.resize(reqs[i].prompt.size() - 2 * i);
    expect_same_greedy(fused.generate(reqs), plain.generate(reqs), reqs);
  }
}

// Multi-row steps through the fused blocks with norm pieces (Transformer::fused_batch: on sm_90
// the norms inside the wgmma GEMMs, no norm kernel) against the unfused blocks. The fused path
// applies each norm's rstd to the product instead of the input (one rounding moves), so bf16
// results are close, not equal. The random Qwen3-shaped model (hidden 1024, QK-norm, head_dim
// 128: every single-kernel form runs) gives the same greedy tokens with logprobs within bf16
// noise, 8 sequences decoding together. The fixtures are narrow (mostly the fallbacks) and have
// deliberately large weights (std 0.3: bf16 itself loses greedy agreement with f32 within a few
// tokens, CudaEngine.Bf16StaysCloseToF32), so there the first token (the prefill, through the
// pieces) agrees and its logprob is within 0.1.
TEST_F(CudaFusedDecodeTest, FusedBatchEngineMatchesUnfused) {
  auto compare = [&](Transformer fused_model, Transformer plain_model, std::vector<Request> reqs,
                     int max_seqs, bool whole_sequences) {
    ASSERT_TRUE(fused_model.fused_batch);
    plain_model.fused_batch = false;
    EngineConfig cfg;
    cfg.max_ctx = 64;
    cfg.max_seqs = max_seqs;
    Engine fused(std::move(fused_model), nullptr, cfg);
    Engine plain(std::move(plain_model), nullptr, cfg);
    expect_same_greedy(fused.generate(reqs), plain.generate(reqs), reqs, !whole_sequences);
  };
  for (const char* name : {"llama_gqa", "qwen3_qknorm"}) {
    SCOPED_TRACE(name);
    const std::string dir = fixture(name);
    const Request r = greedy_reference_request(dir);
    std::vector<Request> reqs = {r, r, r, r};
    for (size_t i = 1; i < reqs.size(); ++i) reqs[i].prompt.resize(reqs[i].prompt.size() - 2 * i);
    compare(Transformer::load(dir, DType::kBF16, gpu()),
            Transformer::load(dir, DType::kBF16, gpu()), reqs, 4, false);
  }
  SCOPED_TRACE("random qwen3-shaped");
  const ModelConfig mc = ModelConfig::from_json(json::parse(R"({"model_type": "qwen3",
      "vocab_size": 512, "hidden_size": 1024, "num_hidden_layers": 2, "intermediate_size": 1536,
      "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 128,
      "max_position_embeddings": 512, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
      "tie_word_embeddings": false})"));
  std::vector<Request> reqs(8);
  for (size_t i = 0; i < reqs.size(); ++i) {
    for (int t = 0; t < 5 + static_cast<int>(i); ++t)
      reqs[i].prompt.push_back(static_cast<int32_t>((97 * i + 31 * t + 5) % 512));
    reqs[i].params.temperature = 0;
    reqs[i].params.max_tokens = 8;
    reqs[i].params.ignore_eos = true;
    reqs[i].params.logprobs = true;
  }
  compare(Transformer::random(mc, DType::kBF16, gpu(), 3, 0.05f),
          Transformer::random(mc, DType::kBF16, gpu(), 3, 0.05f), reqs, 8, true);
}

// ---- opt-in benchmark: GB/s of each GEMV form at bench-1b's decode shapes ----
// Timed as the engine runs them: `per_graph` calls captured in one CUDA graph (PDL edges between
// them), replayed; each call reads another copy of the weights (as 24 layers do), so L2 holds none.

double graph_us(const std::function<void()>& f, int per_graph = 24, int replays = 20) {
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  double us = 0;
  {
    cuda::StreamGuard guard(stream);
    f();  // first call outside the capture (shared-memory opt-in, plan caches)
    cudaStreamSynchronize(stream);
    us = test::graph_us(stream, per_graph, replays, [&](int) { f(); });
  }
  cudaStreamDestroy(stream);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  return us;
}

TEST_F(CudaFusedDecodeTest, DISABLED_FusedDecodeBench) {
  const DType dt = DType::kBF16;
  const int64_t hidden = 1536, inter = 6912, qkv_n = 2048, vocab = 100000;
  const int kCopies = 8;
  auto weights = [&](int64_t n, int64_t k) {
    std::vector<Tensor> w;
    for (int i = 0; i < kCopies; ++i) {
      w.push_back(Tensor::empty({n, k}, dt, gpu()));
      cudaMemset(w.back().data_ptr(), 0, static_cast<size_t>(n * k) * 2);
    }
    return w;
  };
  auto w_qkv = weights(qkv_n, hidden), w_o = weights(hidden, hidden);
  auto w_gu = weights(2 * inter, hidden), w_down = weights(hidden, inter);
  Tensor w_head = Tensor::empty({vocab, hidden}, dt, gpu());
  const double b_qkv = qkv_n * hidden * 2.0, b_o = hidden * hidden * 2.0;
  const double b_gu = 2.0 * inter * hidden * 2.0, b_down = hidden * inter * 2.0;
  for (int64_t m : {1, 4}) {
    Tensor x = test::random_cpu({m, hidden}, dt, 1).to(gpu());
    Tensor nw = test::random_cpu({hidden}, dt, 2).to(gpu());
    Tensor normed = Tensor::empty({m, hidden}, dt, gpu());
    Tensor qkv = Tensor::empty({m, qkv_n}, dt, gpu());
    Tensor attn = test::random_cpu({m, hidden}, dt, 3).to(gpu());
    Tensor resid = test::random_cpu({m, hidden}, dt, 4).to(gpu());
    Tensor h = test::random_cpu({m, 2 * inter}, dt, 5, -0.1, 0.1).to(gpu());
    Tensor act = Tensor::empty({m, inter}, dt, gpu());
    Tensor y = Tensor::empty({m, hidden}, dt, gpu());
    Tensor logits = Tensor::empty({m, vocab}, DType::kF32, gpu());
    // bench-1b's heads (24 q, 4 kv, d64) for the rotary / cache-write forms.
    ops::RopeConfig rc;
    rc.rotary_dim = 64;
    Tensor table = ops::make_rope_table(rc, 4096).to(gpu());
    std::vector<int32_t> pos_h(static_cast<size_t>(m)), loc_h(pos_h.size());
    for (int64_t t = 0; t < m; ++t) pos_h[t] = loc_h[t] = static_cast<int32_t>(1000 + t);
    Tensor positions = Tensor::from_vector(pos_h).to(gpu()),
           loc = Tensor::from_vector(loc_h).to(gpu());
    Tensor q = Tensor::empty({m, 24, 64}, dt, gpu());
    Tensor kc = Tensor::empty({4096, 4, 64}, dt, gpu()),
           vc = Tensor::empty({4096, 4, 64}, dt, gpu());
    int i = 0;
    auto next = [&] { return (i++) % kCopies; };
    struct Row {
      const char* name;
      double bytes;
      std::function<void()> f;
    };
    std::vector<Row> rows = {
        {"qkv gemv", b_qkv, [&] { ops::gemm(x, w_qkv[next()], qkv, false, true); }},
        {"qkv rms_norm + gemv (2 kernels)", b_qkv,
         [&] {
           ops::rms_norm(x, nw, 1e-5f, normed);
           ops::gemm(normed, w_qkv[next()], qkv, false, true);
         }},
        {"qkv rms_norm_gemm", b_qkv, [&] { ops::rms_norm_gemm(x, nw, 1e-5f, w_qkv[next()], qkv); }},
        {"qkv rms_norm_gemm + qkv_rotary (2 kernels)", b_qkv,
         [&] {
           ops::rms_norm_gemm(x, nw, 1e-5f, w_qkv[next()], qkv);
           ops::qkv_rotary_kv_write(qkv, positions, table, Tensor(), Tensor(), 0.0f, loc, q, kc,
                                    vc);
         }},
        {"qkv rms_norm_gemm_rotary_kv_write", b_qkv,
         [&] {
           ops::rms_norm_gemm_rotary_kv_write(x, nw, 1e-5f, w_qkv[next()], positions, table, loc, q,
                                              kc, vc);
         }},
        {"o gemv + add (2 kernels)", b_o,
         [&] {
           ops::gemm(attn, w_o[next()], y, false, true);
           ops::add(resid, y, resid);
         }},
        {"o gemm_add", b_o, [&] { ops::gemm_add(attn, w_o[next()], resid); }},
        {"gate_up gemv", b_gu, [&] { ops::gemm(normed, w_gu[next()], h, false, true); }},
        {"gate_up rms_norm_gemm", b_gu, [&] { ops::rms_norm_gemm(x, nw, 1e-5f, w_gu[next()], h); }},
        {"gate_up rms_norm_gemm_silu_mul", b_gu,
         [&] { ops::rms_norm_gemm_silu_mul(x, nw, 1e-5f, w_gu[next()], act); }},
        {"down gemm_add", b_down, [&] { ops::gemm_add(act, w_down[next()], resid); }},
        {"down silu + gemv + add (3 kernels)", b_down,
         [&] {
           ops::silu_and_mul(h, act);
           ops::gemm(act, w_down[next()], y, false, true);
           ops::add(resid, y, resid);
         }},
        {"down gemv", b_down, [&] { ops::gemm(act, w_down[next()], y, false, true); }},
        {"down silu_mul_gemm_add", b_down,
         [&] { ops::silu_mul_gemm_add(h, w_down[next()], resid); }},
        {"lm head gemv (f32 out)", vocab * hidden * 2.0,
         [&] { ops::gemm(normed, w_head, logits, false, true); }},
    };
    // (parts, cols) splits to compare against the heuristic (0, 0); cols > 1 only at one row.
    const std::pair<int, int> splits[] = {{0, 0}, {1, 1}, {2, 1}, {4, 1}, {8, 1}, {1, 2}, {2, 2}};
    // The register kernel's splits.
    for (const Row& r : rows) {
      for (auto [parts, cols] : splits) {
        if (m > 1 && cols > 1) continue;
        if (parts != 0 && std::string(r.name).find("kernels") != std::string::npos) continue;
        ops::cuda::gemv_set_split(parts, cols);
        const double us = graph_us(r.f, r.bytes > 1e8 ? 4 : 24);
        std::printf("B=%lld %-36s split %d/%d %8.2f us %8.0f GB/s\n", static_cast<long long>(m),
                    r.name, parts, cols, us, r.bytes / us / 1e3);
      }
      ops::cuda::gemv_set_split(0, 0);
    }
    // One layer's 4 fused GEMVs back to back (what the graph replays, minus attention).
    {
      const char* kind = "regs";
      const double layer = graph_us([&] {
        const int c = next();
        ops::rms_norm_gemm(x, nw, 1e-5f, w_qkv[c], qkv);
        ops::qkv_rotary_kv_write(qkv, positions, table, Tensor(), Tensor(), 0.0f, loc, q, kc, vc);
        ops::gemm_add(attn, w_o[c], resid);
        ops::rms_norm_gemm_silu_mul(x, nw, 1e-5f, w_gu[c], act);
        ops::gemm_add(act, w_down[c], resid);
      });
      const double lb = b_qkv + b_o + b_gu + b_down;
      std::printf("B=%lld %s %-31s %8.2f us %8.0f GB/s  (x24 = %.3f ms)\n",
                  static_cast<long long>(m), kind, "layer: 4 fused GEMVs (+ qkv_rotary)", layer,
                  lb / layer / 1e3, 24 * layer / 1e3);
      // The same with rotary and the cache write in the q|k|v GEMV (the llama decode path).
      const double layer_rot = graph_us([&] {
        const int c = next();
        ops::rms_norm_gemm_rotary_kv_write(x, nw, 1e-5f, w_qkv[c], positions, table, loc, q, kc,
                                           vc);
        ops::gemm_add(attn, w_o[c], resid);
        ops::rms_norm_gemm_silu_mul(x, nw, 1e-5f, w_gu[c], act);
        ops::gemm_add(act, w_down[c], resid);
      });
      std::printf("B=%lld %s %-31s %8.2f us %8.0f GB/s  (x24 = %.3f ms)\n",
                  static_cast<long long>(m), kind, "layer: 4 fused GEMVs, rotary epi", layer_rot,
                  lb / layer_rot / 1e3, 24 * layer_rot / 1e3);
    }
  }
}

// ---- opt-in benchmark: one layer's projections at bench-1b's shapes in multi-row steps, with the
// norms as kernels (add_rms_norm after o and down) and folded into the GEMMs (norm pieces) ----
TEST_F(CudaFusedDecodeTest, DISABLED_BenchNormPiecesLayer) {
  const DType dt = DType::kBF16;
  const int64_t hidden = 1536, inter = 6912, h = 24, hkv = 4, d = 64, qkv_n = (h + 2 * hkv) * d;
  const int kCopies = 8;
  auto weights = [&](int64_t n, int64_t k) {
    std::vector<Tensor> w;
    for (int i = 0; i < kCopies; ++i)
      w.push_back(test::random_cpu({n, k}, dt, 7 + i, -0.02, 0.02).to(gpu()));
    return w;
  };
  auto w_qkv = weights(qkv_n, hidden), w_o = weights(hidden, hidden);
  auto w_gu = weights(2 * inter, hidden), w_down = weights(hidden, inter);
  ops::RopeConfig rc;
  rc.rotary_dim = d;
  Tensor table = ops::make_rope_table(rc, 4096).to(gpu());
  for (int64_t m : {4, 16, 64}) {
    Tensor resid = test::random_cpu({m, hidden}, dt, 1).to(gpu());
    Tensor nw = test::random_cpu({hidden}, dt, 2, 0.5, 1.5).to(gpu());
    Tensor normed = Tensor::empty({m, hidden}, dt, gpu()), y = normed.clone();
    Tensor attn = test::random_cpu({m, h * d}, dt, 3).to(gpu());
    Tensor act = test::random_cpu({m, inter}, dt, 4).to(gpu());
    ops::NormPieces pieces{Tensor::empty({m, hidden}, dt, gpu()),
                           Tensor::empty({m, hidden / ops::kRowSqGroup}, DType::kF32, gpu())};
    ops::norm_pieces(resid, nw, pieces);
    std::vector<int32_t> pos_h(static_cast<size_t>(m));
    for (int64_t t = 0; t < m; ++t) pos_h[t] = static_cast<int32_t>(1000 + t);
    Tensor positions = Tensor::from_vector(pos_h).to(gpu());
    Tensor q = Tensor::empty({m, h, d}, dt, gpu());
    Tensor kc = Tensor::empty({4096, hkv, d}, dt, gpu()), vc = kc.clone();
    int i = 0;
    auto next = [&] { return (i++) % kCopies; };
    struct Row {
      const char* name;
      std::function<void()> f;
    };
    const std::vector<Row> rows = {
        {"qkv gemm_rotary_kv_write",
         [&] {
           ops::gemm_rotary_kv_write(normed, w_qkv[next()], positions, table, Tensor(), Tensor(),
                                     0.0f, positions, q, kc, vc);
         }},
        {"qkv rms_norm_gemm_rotary (pieces)",
         [&] {
           ops::rms_norm_gemm_rotary_kv_write(pieces, 1e-5f, w_qkv[next()], positions, table,
                                              Tensor(), Tensor(), 0.0f, positions, q, kc, vc);
         }},
        {"o gemm + add_rms_norm",
         [&] {
           ops::gemm(attn, w_o[next()], y, false, true);
           ops::add_rms_norm(y, resid, nw, 1e-5f, normed);
         }},
        {"o gemm_add (pieces)", [&] { ops::gemm_add(attn, w_o[next()], resid, nw, pieces); }},
        {"gate_up gemm_silu_mul", [&] { ops::gemm_silu_mul(normed, w_gu[next()], act); }},
        {"gate_up rms_norm_gemm_silu_mul (pieces)",
         [&] { ops::rms_norm_gemm_silu_mul(pieces, 1e-5f, w_gu[next()], act); }},
        {"down gemm + add_rms_norm",
         [&] {
           ops::gemm(act, w_down[next()], y, false, true);
           ops::add_rms_norm(y, resid, nw, 1e-5f, normed);
         }},
        {"down gemm_add (pieces)", [&] { ops::gemm_add(act, w_down[next()], resid, nw, pieces); }},
        {"layer: norm kernels (6 kernels)",
         [&] {
           const int c = next();
           ops::gemm_rotary_kv_write(normed, w_qkv[c], positions, table, Tensor(), Tensor(), 0.0f,
                                     positions, q, kc, vc);
           ops::gemm(attn, w_o[c], y, false, true);
           ops::add_rms_norm(y, resid, nw, 1e-5f, normed);
           ops::gemm_silu_mul(normed, w_gu[c], act);
           ops::gemm(act, w_down[c], y, false, true);
           ops::add_rms_norm(y, resid, nw, 1e-5f, normed);
         }},
        {"layer: norm pieces (4 kernels)",
         [&] {
           const int c = next();
           ops::rms_norm_gemm_rotary_kv_write(pieces, 1e-5f, w_qkv[c], positions, table, Tensor(),
                                              Tensor(), 0.0f, positions, q, kc, vc);
           ops::gemm_add(attn, w_o[c], resid, nw, pieces);
           ops::rms_norm_gemm_silu_mul(pieces, 1e-5f, w_gu[c], act);
           ops::gemm_add(act, w_down[c], resid, nw, pieces);
         }},
    };
    for (const Row& r : rows)
      std::printf("B=%-3lld %-42s %8.2f us\n", static_cast<long long>(m), r.name, graph_us(r.f));
  }
}

}  // namespace
}  // namespace vela
