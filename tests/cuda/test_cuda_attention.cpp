// CUDA attention ops against their CPU twins: kv_write (strided rows, shuffled slots), split-KV
// paged decode (B 1 / 3 / 64, lengths 1..5000 with a padding row, GQA 1 / 2 / 6, pages of 1 and 16
// slots in shuffled order, 1..64 splits, f32 / bf16 / f16), ragged prefill through a host plan
// (q_len 1..700 with and without cached prefix; 64- and 128-row tiles at head_dim <= 64, q_len 1,
// 63, 65, 127, 129, 300 around the tile edges) and through the generic paged_attention, every
// head_dim class (exact tiles 16 / 32 / 64 / 128 / 256 and padded ones: 8, 24, 48, 80, 96, 136,
// 200) for decode (row and GQA tensor-core kernels, split merge) and prefill, CUDA-graph replay of
// the decode kernel after the sequences grew (bit-identical to eager, head_dim 64 / 80 / 256), bad
// input errors, and opt-in benchmarks (DISABLED_*Bench*) of decode GB/s and prefill TFLOP/s.
//
// Unused cache slots hold NaN, so a kernel that reads a slot outside the table fails loudly.
// Tolerances: f32 2e-5 abs + 1e-4 rel (fp32 exp2 vs the CPU's double sums); bf16 1e-2 + 2e-2 and
// f16 3e-3 + 3e-3 (one rounding of the output; prefill also rounds P to 16 bits for the mma).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/cuda/cuda_api.h"
#include "core/cuda/stream.h"
#include "core/error.h"
#include "cuda/cuda_test_util.h"
#include "ops/attention.h"
#include "ops/cuda/bench_cuda.h"
#include "ops/cuda/cuda_ops.h"

namespace vela {
namespace {

using test::CudaTest;

class CudaAttentionTest : public CudaTest {};

test::Tol attn_tol(DType dt) {
  switch (dt) {
    case DType::kBF16:
      return {1e-2, 2e-2};
    case DType::kF16:
      return {3e-3, 3e-3};
    default:
      return {2e-5, 1e-4};
  }
}

// A ragged batch over a paged cache, on the host.
struct Batch {
  Tensor q;                 // [n_tokens, n_heads, head_dim]
  Tensor k_cache, v_cache;  // [n_slots, n_kv_heads, head_dim]
  Tensor req_to_token;      // [max_reqs, max_ctx] i32
  Tensor req_pool_indices;  // [n_seqs] i32
  Tensor seq_lens;          // [n_seqs] i32
  Tensor qo_indptr;         // [n_seqs + 1] i32
};

// Sequence s has lens[s] cached tokens and the last q_lens[s] of them are queries. Slots come in
// pages of page_size consecutive slots; pages are handed out in shuffled order; request rows are
// permuted. `spare` extra positions per request row (for growth) get pages too.
Batch make_batch(DType dt, const std::vector<int>& lens, const std::vector<int>& q_lens,
                 int64_t n_heads, int64_t n_kv, int64_t d, int page_size, uint64_t seed,
                 int spare = 0) {
  const int64_t n_seqs = static_cast<int64_t>(lens.size());
  std::mt19937_64 gen(seed);
  int max_ctx = 1;
  int64_t n_pages = 0;
  for (int len : lens) {
    max_ctx = std::max(max_ctx, len + spare);
    n_pages += (len + spare + page_size - 1) / page_size;
  }
  n_pages += 3;  // never-used pages (NaN)
  std::vector<int32_t> pages(static_cast<size_t>(n_pages));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), gen);
  const int64_t max_reqs = n_seqs + 2;
  std::vector<int32_t> rows(static_cast<size_t>(max_reqs));
  std::iota(rows.begin(), rows.end(), 0);
  std::shuffle(rows.begin(), rows.end(), gen);

  Batch b;
  const int64_t n_slots = n_pages * page_size;
  b.k_cache = test::random_cpu({n_slots, n_kv, d}, dt, seed + 1);
  b.v_cache = test::random_cpu({n_slots, n_kv, d}, dt, seed + 2);
  std::vector<char> used(static_cast<size_t>(n_slots), 0);
  std::vector<int32_t> r2t(static_cast<size_t>(max_reqs * max_ctx), -1);
  std::vector<int32_t> rpi, sl, qo{0};
  size_t next_page = 0;
  for (int64_t s = 0; s < n_seqs; ++s) {
    const int32_t row = rows[static_cast<size_t>(s)];
    rpi.push_back(row);
    sl.push_back(lens[s]);
    qo.push_back(qo.back() + q_lens[s]);
    for (int p = 0; p < lens[s] + spare; p += page_size) {
      const int32_t page = pages[next_page++];
      for (int i = 0; i < page_size && p + i < max_ctx; ++i) {
        const int32_t slot = page * page_size + i;
        r2t[static_cast<size_t>(row * max_ctx + p + i)] = slot;
        used[static_cast<size_t>(slot)] = 1;
      }
    }
  }
  const int64_t row_elems = n_kv * d;
  for (int64_t slot = 0; slot < n_slots; ++slot) {
    if (used[static_cast<size_t>(slot)]) continue;
    for (int64_t i = 0; i < row_elems; ++i) {
      test::set_value(b.k_cache, slot * row_elems + i, NAN);
      test::set_value(b.v_cache, slot * row_elems + i, NAN);
    }
  }
  b.req_to_token = Tensor::from_vector(r2t, {max_reqs, max_ctx});
  b.req_pool_indices = Tensor::from_vector(rpi);
  b.seq_lens = Tensor::from_vector(sl);
  b.qo_indptr = Tensor::from_vector(qo);
  b.q = test::random_cpu({qo.back(), n_heads, d}, dt, seed + 3);
  return b;
}

Batch to_gpu(const Batch& b, Device dev) {
  return {b.q.to(dev),
          b.k_cache.to(dev),
          b.v_cache.to(dev),
          b.req_to_token.to(dev),
          b.req_pool_indices.to(dev),
          b.seq_lens.to(dev),
          b.qo_indptr.to(dev)};
}

Tensor cpu_reference(const Batch& b, float scale) {
  Tensor want = Tensor::empty(b.q.shape(), b.q.dtype());
  ops::paged_attention(b.q, b.k_cache, b.v_cache, b.req_to_token, b.req_pool_indices, b.seq_lens,
                       b.qo_indptr, scale, want);
  return want;
}

// The CPU twin of paged_decode_attention (one query per sequence; a padding row of zero keys gives
// zeros): the decode kernels' reference.
Tensor cpu_decode(const Batch& b, float scale) {
  Tensor out = Tensor::empty(b.q.shape(), b.q.dtype());
  Tensor none;
  ops::paged_decode_attention(b.q, b.k_cache, b.v_cache, b.req_to_token, b.req_pool_indices,
                              b.seq_lens, scale, 1, none, none, out);
  return out;
}

// paged_decode_attention's split partials and output for g's queries at n_splits, on g's device.
struct DecodeWorkspace {
  Tensor o_part, lse_part, out;
  DecodeWorkspace(const Batch& g, int n_splits) {
    const int64_t n = g.q.size(0), h = g.q.size(1), d = g.q.size(2);
    const Device dev = g.q.device();
    o_part = Tensor::empty({ops::decode_o_part_numel(n, h, d, n_splits)}, DType::kF32, dev);
    lse_part = Tensor::empty({ops::decode_lse_part_numel(n, h, n_splits)}, DType::kF32, dev);
    out = Tensor::empty(g.q.shape(), g.q.dtype(), dev);
  }
};

// Runs paged_decode_attention on the GPU with a workspace sized for n_splits.
Tensor gpu_decode(const Batch& g, float scale, int n_splits) {
  DecodeWorkspace w(g, n_splits);
  ops::paged_decode_attention(g.q, g.k_cache, g.v_cache, g.req_to_token, g.req_pool_indices,
                              g.seq_lens, scale, n_splits, w.o_part, w.lse_part, w.out);
  return w.out;
}

std::vector<int> random_lens(int n, int lo, int hi, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<int> v(static_cast<size_t>(n));
  for (int& x : v) x = dist(gen);
  return v;
}

// One prefill kernel to check: tile_q-row tiles, with the Hopper wgmma kernel forced on (1), off
// (0) or as configured (-1).
struct PrefillKernel {
  int tile_q;
  int wgmma;
  std::string name() const {
    return std::to_string(tile_q) + "-row tiles" +
           (wgmma == 1 ? " (wgmma)" : wgmma == 0 ? " (mma.sync)" : "");
  }
};

// The prefill kernels to check for these operands: f32 the one the op takes; 16-bit the 64-row
// kernel, the 128-row mma.sync kernel at head_dim <= 64 and the 128-row wgmma kernel where it
// runs (head_dim 64 / 128 on sm_90), whatever VELA_PREFILL_TILE / VELA_WGMMA_PREFILL say.
std::vector<PrefillKernel> prefill_kernels(DType dt, int64_t d) {
  if (dt == DType::kF32) return {{ops::prefill_tile_q(dt, d, Device::cuda(0)), -1}};
  std::vector<PrefillKernel> ks = {{ops::kPrefillTileQ, 0}};
  if (d <= ops::kPrefillWideMaxHeadDim) ks.push_back({ops::kPrefillWideTileQ, 0});
  if (test::wgmma_prefill_available(dt, d)) ks.push_back({ops::kPrefillWideTileQ, 1});
  return ks;
}

// Device copies of a host plan of tile_q rows over b's qo_indptr.
struct PrefillPlan {
  Tensor tile_seq_idx, tile_q_start;  // on the GPU
  int64_t n_tiles = 0;
};
PrefillPlan plan_prefill(const Batch& b, int tile_q) {
  const int64_t n_seqs = b.seq_lens.size(0);
  const int64_t cap = ops::prefill_max_tiles(b.q.size(0), n_seqs, std::min(tile_q, ops::kPrefillTileQ));
  std::vector<int32_t> seq_idx(static_cast<size_t>(cap)), q_start(static_cast<size_t>(cap));
  PrefillPlan p;
  p.n_tiles = ops::plan_prefill_tiles(b.qo_indptr.data<int32_t>(), n_seqs, tile_q, seq_idx.data(),
                                      q_start.data(), cap);
  p.tile_seq_idx = Tensor::from_vector(seq_idx).to(Device::cuda(0));
  p.tile_q_start = Tensor::from_vector(q_start).to(Device::cuda(0));
  return p;
}

// paged_prefill_attention on the GPU batch g (host batch b for the plan) with kernel k: through the
// public op when k's tile is the one it takes, else the CUDA kernels directly.
Tensor gpu_prefill(const Batch& b, const Batch& g, float scale, const PrefillKernel& k) {
  test::PrefillWgmmaOverride wgmma(k.wgmma);
  const PrefillPlan p = plan_prefill(b, k.tile_q);
  Tensor out = Tensor::empty(g.q.shape(), g.q.dtype(), Device::cuda(0));
  // NaN bytes first: a kernel that skipped rows must not pass on the last kernel's output left in
  // recycled memory.
  EXPECT_EQ(cudaMemset(out.data_ptr(), 0xFF, out.nbytes()), cudaSuccess);
  if (k.tile_q == ops::prefill_tile_q(g.q.dtype(), g.q.size(2), Device::cuda(0))) {
    ops::paged_prefill_attention(g.q, g.k_cache, g.v_cache, g.req_to_token, g.req_pool_indices,
                                 g.seq_lens, g.qo_indptr, p.tile_seq_idx, p.tile_q_start,
                                 p.n_tiles, k.tile_q, scale, out);
  } else {
    ops::cuda::paged_prefill_attention(g.q, g.k_cache, g.v_cache, g.req_to_token,
                                       g.req_pool_indices, g.seq_lens, g.qo_indptr, p.tile_seq_idx,
                                       p.tile_q_start, p.n_tiles, k.tile_q, scale, out);
  }
  return out;
}

TEST_F(CudaAttentionTest, KvWriteMatchesCpu) {
  for (DType dt : test::kFloatDTypes) {
    for (int64_t d : {16, 48, 64, 80, 128, 256}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " d " + std::to_string(d));
      const int64_t n_tok = 37, n_kv = 3, n_slots = 100;
      // K and V as column slices of a fused [n_tok, 3 * n_kv, d] projection (token stride free).
      Tensor fused = test::random_cpu({n_tok, 3 * n_kv, d}, dt, 11);
      Tensor k = fused.slice(1, n_kv, 2 * n_kv), v = fused.slice(1, 2 * n_kv, 3 * n_kv);
      std::vector<int32_t> slots(n_slots);
      std::iota(slots.begin(), slots.end(), 0);
      std::shuffle(slots.begin(), slots.end(), std::mt19937_64(5));
      slots.resize(n_tok);
      Tensor loc = Tensor::from_vector(slots);
      Tensor kc = test::random_cpu({n_slots, n_kv, d}, dt, 12);
      Tensor vc = test::random_cpu({n_slots, n_kv, d}, dt, 13);
      Tensor dkc = kc.to(gpu()), dvc = vc.to(gpu());
      Tensor dfused = fused.to(gpu());
      ops::kv_write(k, v, loc, kc, vc);
      ops::kv_write(dfused.slice(1, n_kv, 2 * n_kv), dfused.slice(1, 2 * n_kv, 3 * n_kv),
                    loc.to(gpu()), dkc, dvc);
      test::expect_equal(dkc, kc, "k_cache");
      test::expect_equal(dvc, vc, "v_cache");
    }
  }
}

struct DecodeCase {
  std::vector<int> lens;
  int64_t n_heads, n_kv, d;
  int page_size;
  std::vector<int> splits;
};

TEST_F(CudaAttentionTest, DecodeMatchesCpu) {
  std::vector<int> mixed64 = random_lens(64, 1, 2000, 21);
  mixed64[5] = 5000;
  mixed64[9] = 1;
  mixed64[17] = 0;  // a padding row: zero output
  const std::vector<DecodeCase> cases = {
      {{4999}, 4, 4, 64, 16, {1, 7, 64}},            // B=1, MHA
      {{1, 700, 5000}, 12, 2, 128, 1, {1, 16, 64}},  // GQA 6, page 1
      {mixed64, 4, 2, 32, 16, {1, 4, 64}},           // B=64, GQA 2
      {{33, 1, 257}, 6, 1, 16, 1, {1, 2}},           // MQA (GQA 6), head_dim 16
      {{1000, 3}, 24, 4, 64, 16, {5, 33}},           // bench-1b heads
  };
  for (DType dt : test::kFloatDTypes) {
    for (size_t c = 0; c < cases.size(); ++c) {
      const DecodeCase& dc = cases[c];
      std::vector<int> q_lens(dc.lens.size());
      for (size_t s = 0; s < q_lens.size(); ++s) q_lens[s] = dc.lens[s] > 0 ? 1 : 0;
      Batch b = make_batch(dt, dc.lens, q_lens, dc.n_heads, dc.n_kv, dc.d, dc.page_size, 100 + c);
      // The padding row still owns one query (zero output); the CPU twin of decode accepts it.
      b.q = test::random_cpu({static_cast<int64_t>(dc.lens.size()), dc.n_heads, dc.d}, dt, 7);
      const float scale = 1.0f / std::sqrt(static_cast<float>(dc.d));
      const Tensor want = cpu_decode(b, scale);
      Batch g = to_gpu(b, gpu());
      for (int n_splits : dc.splits) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " case " + std::to_string(c) + " splits " +
                     std::to_string(n_splits));
        test::expect_close(gpu_decode(g, scale, n_splits), want, attn_tol(dt), "decode");
      }
      if (std::find(dc.lens.begin(), dc.lens.end(), 0) == dc.lens.end()) {
        // The generic op on a decode-only batch picks its own split count.
        Tensor got = Tensor::empty(b.q.shape(), dt, gpu());
        ops::paged_attention(g.q, g.k_cache, g.v_cache, g.req_to_token, g.req_pool_indices,
                             g.seq_lens, g.qo_indptr, scale, got);
        test::expect_close(got, want, attn_tol(dt), "generic paged_attention (decode)");
      }
    }
  }
}

// The L2 hint (ops/l2_warm.h) the split merge takes with it: the outputs are the same bits with
// and without it, for ranges of any size and alignment (a weight's leading rows, an odd byte
// count at an odd offset, an empty one), eagerly and in a captured graph; a range on another
// device is an error.
TEST_F(CudaAttentionTest, DecodeL2WarmLeavesResultsUnchanged) {
  const DType dt = DType::kBF16;
  Batch b = make_batch(dt, {1000}, {1}, 24, 4, 64, 16, 120);
  Batch g = to_gpu(b, gpu());
  const float scale = 0.125f;
  const int n_splits = 16;
  const Tensor plain = gpu_decode(g, scale, n_splits);
  Tensor weight = test::random_cpu({2 * 700, 256}, dt, 121).to(gpu());
  Tensor bytes = Tensor::zeros({1000003}, DType::kU8, gpu());
  ops::L2Warm warm;
  warm.ranges[0] = weight.slice(0, 0, 300);
  warm.ranges[1] = bytes.slice(0, 7, 1000003);
  warm.ranges[2] = weight.slice(0, 700, 700);  // empty
  DecodeWorkspace w(g, n_splits);
  ops::paged_decode_attention(g.q, g.k_cache, g.v_cache, g.req_to_token, g.req_pool_indices,
                              g.seq_lens, scale, n_splits, w.o_part, w.lse_part, w.out, warm);
  test::expect_equal(w.out, plain, "decode with the L2 hint");
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph;
  {
    cuda::StreamGuard sg(stream);
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    ops::paged_decode_attention(g.q, g.k_cache, g.v_cache, g.req_to_token, g.req_pool_indices,
                                g.seq_lens, scale, n_splits, w.o_part, w.lse_part, w.out, warm);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  }
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaMemset(w.out.data_ptr(), 0xff, w.out.nbytes()), cudaSuccess);  // NaN
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  test::expect_equal(w.out, plain, "graph replay with the L2 hint");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  ops::L2Warm host;
  host.ranges[1] = Tensor::zeros({64}, DType::kU8);
  EXPECT_THROW(
      ops::paged_decode_attention(g.q, g.k_cache, g.v_cache, g.req_to_token, g.req_pool_indices,
                                  g.seq_lens, scale, n_splits, w.o_part, w.lse_part, w.out, host),
      InvalidArgument);
}

// A decode batch of bench-1b's heads (24 q / 4 kv, bf16) at head_dim d for the tensor-core
// kernel: the CPU result, and the batch on the GPU.
struct GqaDecodeCase {
  Tensor want;
  Batch g;
  float scale;
};
GqaDecodeCase gqa_decode_case(const std::vector<int>& lens, int64_t d, uint64_t seed,
                              uint64_t q_seed, Device dev) {
  const DType dt = DType::kBF16;
  const int64_t n_heads = 24, n_kv = 4;
  std::vector<int> q_lens(lens.size(), 1);
  Batch b = make_batch(dt, lens, q_lens, n_heads, n_kv, d, 16, seed);
  b.q = test::random_cpu({static_cast<int64_t>(lens.size()), n_heads, d}, dt, q_seed);
  EXPECT_TRUE(ops::decode_on_tensor_cores(dt, n_heads, n_kv, d));
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  return {cpu_decode(b, scale), to_gpu(b, dev), scale};
}

// The tensor-core decode kernel with 2, 3 and 4 K/V tiles in flight (VELA_DECODE_MMA_STAGES picks
// one per process): long unsplit rows cross several slot windows and many tiles, split rows few.
TEST_F(CudaAttentionTest, DecodeMmaStagesMatchCpu) {
  struct Reset {
    ~Reset() { ops::cuda::decode_mma_set_stages(-1); }
  } reset;
  std::vector<int> lens = random_lens(16, 1, 3000, 31);
  lens[3] = 2500;
  lens[7] = 65;  // one full tile and one key
  const DType dt = DType::kBF16;
  for (int64_t d : {64, 32}) {
    const auto [want, g, scale] = gqa_decode_case(lens, d, 900 + d, 9, gpu());
    Tensor first;
    for (int stages = 2; stages <= 4; ++stages) {
      ops::cuda::decode_mma_set_stages(stages);
      for (int n_splits : {1, 3, 16}) {
        SCOPED_TRACE("d " + std::to_string(d) + " stages " + std::to_string(stages) + " splits " +
                     std::to_string(n_splits));
        Tensor got = gpu_decode(g, scale, n_splits);
        test::expect_close(got, want, attn_tol(dt), "decode");
        if (n_splits != 1) continue;
        // The tiles are summed in the same order whatever the ring's depth: the same bits.
        Tensor host = got.to(Device::cpu());
        if (!first.defined()) {
          first = host;
        } else {
          EXPECT_EQ(std::memcmp(first.data_ptr(), host.data_ptr(), host.nbytes()), 0);
        }
      }
    }
  }
  EXPECT_THROW(ops::cuda::decode_mma_set_stages(5), InvalidArgument);
  EXPECT_THROW(ops::cuda::decode_mma_set_stages(1), InvalidArgument);
}

struct PrefillCase {
  std::vector<int> lens;    // cached tokens after this step
  std::vector<int> q_lens;  // queries (the last q_lens of lens)
  int64_t n_heads, n_kv, d;
  int page_size;
};

TEST_F(CudaAttentionTest, PrefillMatchesCpu) {
  const std::vector<PrefillCase> cases = {
      {{700}, {700}, 4, 4, 64, 16},                                  // one fresh prompt
      {{700, 301, 130, 64, 1}, {700, 1, 65, 64, 1}, 6, 2, 128, 16},  // prefixes + decode rows
      {{129, 500, 77}, {64, 250, 77}, 12, 2, 32, 1},                 // GQA 6, page 1
      {{20, 5, 300}, {20, 1, 111}, 2, 1, 16, 1},                     // head_dim 16, MQA
      {{1200, 2}, {1, 2}, 24, 4, 64, 16},                            // bench-1b heads
      // Around the 64- and 128-row tile edges, with and without cached prefixes (d64, GQA 6).
      {{1, 63, 65, 127, 129, 300}, {1, 63, 65, 127, 129, 300}, 24, 4, 64, 16},
      {{501, 163, 65, 1000, 129, 700}, {1, 63, 65, 127, 129, 300}, 24, 4, 64, 1},
      {{200, 128, 256, 77}, {127, 128, 129, 77}, 8, 8, 32, 16},  // d32, MHA
  };
  for (DType dt : test::kFloatDTypes) {
    for (size_t c = 0; c < cases.size(); ++c) {
      const PrefillCase& pc = cases[c];
      SCOPED_TRACE(std::string(dtype_name(dt)) + " case " + std::to_string(c));
      Batch b =
          make_batch(dt, pc.lens, pc.q_lens, pc.n_heads, pc.n_kv, pc.d, pc.page_size, 200 + c);
      const float scale = 1.0f / std::sqrt(static_cast<float>(pc.d));
      Tensor want = cpu_reference(b, scale);
      Batch g = to_gpu(b, gpu());
      // Through the plan, with every tile size the kernel has for these operands.
      for (const PrefillKernel& k : prefill_kernels(dt, pc.d)) {
        SCOPED_TRACE(k.name());
        test::expect_close(gpu_prefill(b, g, scale, k), want, attn_tol(dt),
                           "paged_prefill_attention");
      }
      // Through the generic op (plans itself).
      Tensor got2 = Tensor::empty(b.q.shape(), dt, gpu());
      ops::paged_attention(g.q, g.k_cache, g.v_cache, g.req_to_token, g.req_pool_indices,
                           g.seq_lens, g.qo_indptr, scale, got2);
      test::expect_close(got2, want, attn_tol(dt), "generic paged_attention");
    }
  }
}

// Every head_dim class on decode and prefill: the exact tiles (fast paths) and the padded ones
// (the next tile width with zero-filled columns). Decode covers MHA (row kernel), GQA 4 (the
// tensor-core kernel for head_dim <= 64, the row kernel above) and GQA 6, 1 and 7 splits; prefill
// a fresh prompt, prefixes with decode rows, and GQA 3 over pages of 1.
const int64_t kHeadDims[] = {48, 80, 96, 128, 256, 64, 8, 24, 136, 200};

TEST_F(CudaAttentionTest, DecodeAnyHeadDimMatchesCpu) {
  struct Shape3 {
    std::vector<int> lens;
    int64_t n_heads, n_kv;
    int page;
  };
  const std::vector<Shape3> shapes = {
      {{1, 300, 1500}, 4, 4, 16}, {{777, 2}, 8, 2, 1}, {{0, 1200}, 12, 2, 16}};
  for (int64_t d : kHeadDims) {
    for (DType dt : test::kFloatDTypes) {
      for (size_t c = 0; c < shapes.size(); ++c) {
        const Shape3& sh = shapes[c];
        std::vector<int> q_lens(sh.lens.size(), 1);
        Batch b = make_batch(dt, sh.lens, q_lens, sh.n_heads, sh.n_kv, d, sh.page,
                             900 + c + static_cast<uint64_t>(d));
        b.q = test::random_cpu({static_cast<int64_t>(sh.lens.size()), sh.n_heads, d}, dt, 9);
        const float scale = 1.0f / std::sqrt(static_cast<float>(d));
        const Tensor want = cpu_decode(b, scale);
        Batch g = to_gpu(b, gpu());
        for (int n_splits : {1, 7}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " d " + std::to_string(d) + " shape " +
                       std::to_string(c) + " splits " + std::to_string(n_splits));
          test::expect_close(gpu_decode(g, scale, n_splits), want, attn_tol(dt), "decode");
        }
      }
    }
  }
}

TEST_F(CudaAttentionTest, PrefillAnyHeadDimMatchesCpu) {
  const std::vector<PrefillCase> cases = {
      {{200}, {200}, 2, 2, 0, 16},                       // one fresh prompt
      {{300, 130, 64, 1}, {1, 65, 64, 1}, 4, 2, 0, 16},  // prefixes + decode rows
      {{129, 77}, {100, 77}, 6, 2, 0, 1},                // GQA 3, page 1
  };
  for (int64_t d : kHeadDims) {
    for (DType dt : test::kFloatDTypes) {
      for (size_t c = 0; c < cases.size(); ++c) {
        const PrefillCase& pc = cases[c];
        SCOPED_TRACE(std::string(dtype_name(dt)) + " d " + std::to_string(d) + " case " +
                     std::to_string(c));
        Batch b = make_batch(dt, pc.lens, pc.q_lens, pc.n_heads, pc.n_kv, d, pc.page_size,
                             950 + c + static_cast<uint64_t>(d));
        const float scale = 1.0f / std::sqrt(static_cast<float>(d));
        Tensor want = cpu_reference(b, scale);
        Batch g = to_gpu(b, gpu());
        Tensor got = Tensor::empty(b.q.shape(), dt, gpu());
        ops::paged_attention(g.q, g.k_cache, g.v_cache, g.req_to_token, g.req_pool_indices,
                             g.seq_lens, g.qo_indptr, scale, got);
        test::expect_close(got, want, attn_tol(dt), "paged_attention");
        for (const PrefillKernel& k : prefill_kernels(dt, d)) {
          SCOPED_TRACE(k.name());
          test::expect_close(gpu_prefill(b, g, scale, k), want, attn_tol(dt),
                             "paged_prefill_attention");
        }
      }
    }
  }
}

TEST_F(CudaAttentionTest, PrefillStridedQuery) {
  // q as a column slice of a fused qkv projection (token stride > n_heads * head_dim).
  const DType dt = DType::kBF16;
  Batch b = make_batch(dt, {90, 40}, {90, 7}, 8, 2, 64, 16, 300);
  Tensor fused = test::random_cpu({97, 12, 64}, dt, 301);
  b.q = fused.slice(1, 0, 8);
  const float scale = 0.125f;
  Tensor want = cpu_reference(b, scale);
  Batch g = to_gpu(b, gpu());
  g.q = fused.to(gpu()).slice(1, 0, 8);
  Tensor got = Tensor::empty({97, 8, 64}, dt, gpu());
  ops::paged_attention(g.q, g.k_cache, g.v_cache, g.req_to_token, g.req_pool_indices, g.seq_lens,
                       g.qo_indptr, scale, got);
  test::expect_close(got, want, attn_tol(dt), "strided q");
  for (const PrefillKernel& k : prefill_kernels(dt, 64)) {
    SCOPED_TRACE(k.name());
    test::expect_close(gpu_prefill(b, g, scale, k), want, attn_tol(dt), "strided q, plan");
  }
}

// A plan cut into other tiles than the kernel takes is an error, never wrong rows.
TEST_F(CudaAttentionTest, PrefillTileMismatchIsAnError) {
  for (int64_t d : {64, 128}) {
    SCOPED_TRACE("head_dim " + std::to_string(d));
    Batch b = make_batch(DType::kBF16, {300}, {300}, 4, 2, d, 16, 610);
    Batch g = to_gpu(b, gpu());
    const int want = ops::prefill_tile_q(DType::kBF16, d, gpu());
    const int wrong = want == ops::kPrefillTileQ ? ops::kPrefillWideTileQ : ops::kPrefillTileQ;
    const PrefillPlan p = plan_prefill(b, wrong);
    Tensor out = Tensor::empty(g.q.shape(), DType::kBF16, gpu());
    EXPECT_THROW(ops::paged_prefill_attention(g.q, g.k_cache, g.v_cache, g.req_to_token,
                                              g.req_pool_indices, g.seq_lens, g.qo_indptr,
                                              p.tile_seq_idx, p.tile_q_start, p.n_tiles, wrong,
                                              0.125f, out),
                 InvalidArgument);
  }
  // The kernels themselves have no 128-row tile at head_dim 96 (above 64, not the wgmma kernel's
  // 64 / 128), nor other sizes.
  Batch b = make_batch(DType::kBF16, {300}, {300}, 4, 2, 96, 16, 611);
  Batch g = to_gpu(b, gpu());
  Tensor out = Tensor::empty(g.q.shape(), DType::kBF16, gpu());
  for (int tile_q : {ops::kPrefillWideTileQ, 32}) {
    const PrefillPlan p = plan_prefill(b, tile_q);
    EXPECT_THROW(ops::cuda::paged_prefill_attention(g.q, g.k_cache, g.v_cache, g.req_to_token,
                                                    g.req_pool_indices, g.seq_lens, g.qo_indptr,
                                                    p.tile_seq_idx, p.tile_q_start, p.n_tiles,
                                                    tile_q, 0.125f, out),
                 InvalidArgument);
  }
}

class CudaDecodeGraphTest : public CudaAttentionTest,
                            public ::testing::WithParamInterface<int64_t> {};

TEST_P(CudaDecodeGraphTest, ReplayAfterGrowth) {
  const DType dt = DType::kBF16;
  const int64_t n_heads = 24, n_kv = 4, d = GetParam();
  const std::vector<int> lens0 = {1, 300, 2000};
  const int spare = 3000;
  Batch b = make_batch(dt, lens0, {1, 1, 1}, n_heads, n_kv, d, 16, 400, spare);
  // Slots for the spare positions must hold finite values: refill the whole cache.
  b.k_cache = test::random_cpu(b.k_cache.shape(), dt, 401);
  b.v_cache = test::random_cpu(b.v_cache.shape(), dt, 402);
  Batch g = to_gpu(b, gpu());
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int max_len = 2000 + spare;
  const int n_splits =
      ops::decode_num_splits(3, n_kv, max_len, cuda::device_properties().multiProcessorCount,
                             ops::decode_on_tensor_cores(dt, n_heads, n_kv, d));
  Tensor o_part =
      Tensor::empty({ops::decode_o_part_numel(3, n_heads, d, n_splits)}, DType::kF32, gpu());
  Tensor lse_part =
      Tensor::empty({ops::decode_lse_part_numel(3, n_heads, n_splits)}, DType::kF32, gpu());
  Tensor graph_out = Tensor::empty(b.q.shape(), dt, gpu());

  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  {
    cuda::StreamGuard sg(stream);
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    ops::paged_decode_attention(g.q, g.k_cache, g.v_cache, g.req_to_token, g.req_pool_indices,
                                g.seq_lens, scale, n_splits, o_part, lse_part, graph_out);
    cudaGraph_t graph;
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    cudaGraphDestroy(graph);
  }
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::vector<int> grow = {round * 1000 + 7, round * 37 + 1, round * 450};
    std::vector<int32_t> lens;
    for (size_t s = 0; s < 3; ++s) lens.push_back(lens0[s] + grow[s]);
    Tensor lens_h = Tensor::from_vector(lens);
    g.seq_lens.copy_(lens_h);
    g.q.copy_(test::random_cpu(b.q.shape(), dt, 500 + round));
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    Tensor eager = Tensor::empty(b.q.shape(), dt, gpu());
    ops::paged_decode_attention(g.q, g.k_cache, g.v_cache, g.req_to_token, g.req_pool_indices,
                                g.seq_lens, scale, n_splits, o_part, lse_part, eager);
    test::expect_equal(graph_out, eager, "graph replay vs eager");
    Batch h = b;
    h.q = g.q.to(Device::cpu());
    h.seq_lens = lens_h;
    h.qo_indptr = Tensor::from_vector(std::vector<int32_t>{0, 1, 2, 3});
    test::expect_close(graph_out, cpu_reference(h, scale), attn_tol(dt), "graph vs cpu");
  }
  cudaGraphExecDestroy(exec);
  cudaStreamDestroy(stream);
}

// d 64: the GQA tensor-core kernel; 80: a padded row-kernel tile; 256: the widest exact tile.
INSTANTIATE_TEST_SUITE_P(HeadDims, CudaDecodeGraphTest, ::testing::Values(64, 80, 256));

TEST_F(CudaAttentionTest, BadInputIsAnError) {
  Tensor none;
  for (int64_t d : {12, 264}) {  // not a multiple of 8; above 256
    SCOPED_TRACE("head_dim " + std::to_string(d));
    Batch b = make_batch(DType::kBF16, {10}, {1}, 4, 2, d, 16, 600);
    Batch g = to_gpu(b, gpu());
    Tensor out = Tensor::empty(g.q.shape(), DType::kBF16, gpu());
    EXPECT_THROW(
        ops::paged_decode_attention(g.q, g.k_cache, g.v_cache, g.req_to_token, g.req_pool_indices,
                                    g.seq_lens, 1.0f, 1, none, none, out),
        Unsupported);
    EXPECT_THROW(ops::paged_attention(g.q, g.k_cache, g.v_cache, g.req_to_token, g.req_pool_indices,
                                      g.seq_lens, g.qo_indptr, 1.0f, out),
                 Unsupported);
  }
  Batch b2 = make_batch(DType::kBF16, {10}, {1}, 4, 2, 64, 16, 601);
  Batch g2 = to_gpu(b2, gpu());
  Tensor out2 = Tensor::empty(g2.q.shape(), DType::kBF16, gpu());
  EXPECT_THROW(
      ops::paged_decode_attention(g2.q, g2.k_cache, g2.v_cache, g2.req_to_token,
                                  g2.req_pool_indices, g2.seq_lens, 1.0f, 0, none, none, out2),
      InvalidArgument);  // n_splits 0
  EXPECT_THROW(
      ops::paged_decode_attention(g2.q, g2.k_cache, g2.v_cache, g2.req_to_token,
                                  g2.req_pool_indices, g2.seq_lens, 1.0f, 8, none, none, out2),
      InvalidArgument);  // no workspace
  EXPECT_THROW(
      ops::paged_decode_attention(g2.q, b2.k_cache, g2.v_cache, g2.req_to_token,
                                  g2.req_pool_indices, g2.seq_lens, 1.0f, 1, none, none, out2),
      InvalidArgument);  // cache on the host
  Tensor bad_qo = Tensor::from_vector(std::vector<int32_t>{0, 5}).to(gpu());
  EXPECT_THROW(ops::paged_attention(g2.q, g2.k_cache, g2.v_cache, g2.req_to_token,
                                    g2.req_pool_indices, g2.seq_lens, bad_qo, 1.0f, out2),
               InvalidArgument);  // qo_indptr does not end at n_tokens
}

// ---- benchmarks (opt-in) ----

// Milliseconds per call of fn, timed as a CUDA graph of `per_graph` calls replayed `reps` times.
template <typename F>
double time_ms(F&& fn, int per_graph = 20, int reps = 10) {
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  cuda::StreamGuard sg(stream);
  fn();  // warm up (and lazy attribute setup) outside the capture
  cudaStreamSynchronize(stream);
  const double us = test::graph_us(stream, per_graph, reps, [&](int) { fn(); });
  cudaStreamDestroy(stream);
  return us / 1e3;
}

// The benchmarks' bandwidth reference: this device's measured copy bandwidth (GB/s), once.
double copy_gbps() {
  static const double gbps = ops::cuda::bench_copy_gbps(size_t{1} << 30);
  return gbps;
}

// Device copies of a batch's K/V caches, enough that together they are >= 256 MB (several times the
// H200's L2), so a graph of decode calls each on the next copy reads its keys from HBM as the
// engine does (24 layers of KV never stay in L2). One copy timed 20 times over read a B = 64 x 512
// cache of 34 MB from L2: 9.3 us there against 18-20 us per layer in the engine (ncu, session 41).
struct KvCopies {
  std::vector<Tensor> k, v;
  KvCopies(const Batch& host, Device dev) {
    const int64_t bytes = host.k_cache.nbytes() + host.v_cache.nbytes();
    const int64_t n =
        std::clamp<int64_t>((int64_t{256} << 20) / std::max<int64_t>(bytes, 1) + 1, 1, 512);
    for (int64_t i = 0; i < n; ++i) {
      k.push_back(host.k_cache.to(dev));
      v.push_back(host.v_cache.to(dev));
    }
  }
  size_t size() const { return k.size(); }
  // Calls per graph: every copy at least once.
  int per_graph() const { return std::max(20, static_cast<int>(k.size())); }
};

// time_ms with the call's index: fn(i) for the i-th call of the graph.
template <typename F>
double time_ms_indexed(F&& fn, int per_graph = 20, int reps = 10) {
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  cuda::StreamGuard sg(stream);
  fn(0);
  cudaStreamSynchronize(stream);
  const double us = test::graph_us(stream, per_graph, reps, fn);
  cudaStreamDestroy(stream);
  return us / 1e3;
}

// One layer's decode attention over g's metadata at n_splits, each call of the timing graph on the
// next of kv's cache copies (keys from HBM): ms per call.
double decode_ms(const Batch& g, const KvCopies& kv, float scale, int n_splits) {
  DecodeWorkspace w(g, n_splits);
  return time_ms_indexed(
      [&](int i) {
        const size_t c = static_cast<size_t>(i) % kv.size();
        ops::paged_decode_attention(g.q, kv.k[c], kv.v[c], g.req_to_token, g.req_pool_indices,
                                    g.seq_lens, scale, n_splits, w.o_part, w.lse_part, w.out);
      },
      kv.per_graph());
}

TEST_F(CudaAttentionTest, DISABLED_BenchDecode) {
  const int64_t n_heads = 24, n_kv = 4, d = 64;
  const DType dt = DType::kBF16;
  const int sms = cuda::device_properties().multiProcessorCount;
  struct Shape2 {
    int b, ctx;
  };
  for (Shape2 sh :
       {Shape2{1, 1024}, Shape2{1, 8192}, Shape2{1, 32768}, Shape2{64, 512}, Shape2{64, 4096}}) {
    for (int page : {16, 1}) {
      std::vector<int> lens(static_cast<size_t>(sh.b), sh.ctx), q_lens(lens.size(), 1);
      Batch b = make_batch(dt, lens, q_lens, n_heads, n_kv, d, page, 700);
      Batch g = to_gpu(b, gpu());
      const int n_splits = ops::decode_num_splits(
          sh.b, n_kv, sh.ctx, sms, ops::decode_on_tensor_cores(dt, n_heads, n_kv, d));
      const double ms = decode_ms(g, KvCopies(b, gpu()), 0.125f, n_splits);
      const double bytes = 2.0 * sh.b * sh.ctx * n_kv * d * 2;
      const double gbps = bytes / (ms * 1e-3) / 1e9;
      std::printf(
          "decode bf16 B=%d ctx=%d page=%d (24q/4kv/d64, one layer): splits %d, %.2f us, "
          "%.0f GB/s = %.1f%% of %.0f GB/s (copy); x24 layers %.3f ms\n",
          sh.b, sh.ctx, page, n_splits, ms * 1e3, gbps, 100.0 * gbps / copy_gbps(), copy_gbps(),
          24 * ms);
    }
  }
}

// Split count vs time for batched decode (which split policy fills the H200 best): bench-1b's
// heads (24q/4kv/d64) and Qwen3-1.7B's (16q/8kv/d128), page 16; the row marked * is the policy.
// Keys come from HBM (KvCopies), as in the engine.
TEST_F(CudaAttentionTest, DISABLED_BenchDecodeSplits) {
  const DType dt = DType::kBF16;
  const int sms = cuda::device_properties().multiProcessorCount;
  struct Cfg {
    int64_t n_heads, n_kv, d;
    int b, ctx;
  };
  for (Cfg c : {Cfg{24, 4, 64, 64, 512}, Cfg{24, 4, 64, 64, 1024}, Cfg{24, 4, 64, 32, 512},
                Cfg{24, 4, 64, 128, 512}, Cfg{24, 4, 64, 64, 4096}, Cfg{16, 8, 128, 64, 512},
                Cfg{16, 8, 128, 64, 2048}, Cfg{24, 4, 64, 1, 1024}, Cfg{24, 4, 64, 4, 1024},
                Cfg{16, 8, 128, 1, 1024}, Cfg{16, 8, 128, 16, 1024}}) {
    std::vector<int> lens(static_cast<size_t>(c.b), c.ctx), q_lens(lens.size(), 1);
    Batch b = make_batch(dt, lens, q_lens, c.n_heads, c.n_kv, c.d, 16, 710);
    Batch g = to_gpu(b, gpu());
    const int policy = ops::decode_num_splits(
        c.b, c.n_kv, c.ctx, sms, ops::decode_on_tensor_cores(dt, c.n_heads, c.n_kv, c.d));
    KvCopies kv(b, gpu());
    const double bytes = 2.0 * c.b * c.ctx * c.n_kv * c.d * 2;
    for (int n_splits : {1, 2, 3, 4, 6, 8, 16, 32}) {
      const double ms = decode_ms(g, kv, 0.125f, n_splits);
      const double gbps = bytes / (ms * 1e-3) / 1e9;
      std::printf(
          "splits %lldq/%lldkv/d%lld B=%d ctx=%d: splits %2d%s %7.2f us, %5.0f GB/s = "
          "%.1f%% of %.0f (copy)\n",
          static_cast<long long>(c.n_heads), static_cast<long long>(c.n_kv),
          static_cast<long long>(c.d), c.b, c.ctx, n_splits, n_splits == policy ? "*" : " ",
          ms * 1e3, gbps, 100.0 * gbps / copy_gbps(), copy_gbps());
    }
  }
}

// Prefill TFLOP/s per kernel the shape has (64-row, 128-row mma.sync at head_dim 64, 128-row wgmma
// at head_dim 64 / 128 on sm_90).
TEST_F(CudaAttentionTest, DISABLED_BenchPrefill) {
  const DType dt = DType::kBF16;
  struct Cfg {
    int64_t n_heads, n_kv, d;
    int n;
  };
  for (Cfg c : {Cfg{24, 4, 64, 8192}, Cfg{32, 8, 128, 8192}, Cfg{16, 8, 128, 8192},
                Cfg{24, 4, 64, 2048}}) {
    Batch b = make_batch(dt, {c.n}, {c.n}, c.n_heads, c.n_kv, c.d, 16, 800);
    Batch g = to_gpu(b, gpu());
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    for (const PrefillKernel& k : prefill_kernels(dt, c.d)) {
      test::PrefillWgmmaOverride wgmma(k.wgmma);
      const PrefillPlan p = plan_prefill(b, k.tile_q);
      Tensor out = Tensor::empty(g.q.shape(), dt, gpu());
      const double ms = time_ms(
          [&] {
            ops::cuda::paged_prefill_attention(g.q, g.k_cache, g.v_cache, g.req_to_token,
                                               g.req_pool_indices, g.seq_lens, g.qo_indptr,
                                               p.tile_seq_idx, p.tile_q_start, p.n_tiles,
                                               k.tile_q, scale, out);
          },
          5, 4);
      const double flops = 4.0 * c.n_heads * c.d * (static_cast<double>(c.n) * (c.n + 1) / 2);
      const double tflops = flops / (ms * 1e-3) / 1e12;
      std::printf(
          "prefill bf16 causal n=%d (%lldq/%lldkv/d%lld, one layer), %s: %.3f ms, %.1f TFLOP/s; "
          "x24 layers %.2f ms\n",
          c.n, static_cast<long long>(c.n_heads), static_cast<long long>(c.n_kv),
          static_cast<long long>(c.d), k.name().c_str(), ms, tflops, 24 * ms);
    }
  }
}

// Decode and prefill per head size at a fixed width n_heads * head_dim = 2048 (GQA 4): exact
// tiles 64 / 128 / 256 and the padded 80 / 96 (the tile-128 kernels at head_dim < 128).
TEST_F(CudaAttentionTest, DISABLED_BenchHeadDims) {
  const DType dt = DType::kBF16;
  const int sms = cuda::device_properties().multiProcessorCount;
  for (int64_t d : {64, 128, 256, 80, 96}) {
    const int64_t n_heads = (2048 + d - 1) / d / 4 * 4, n_kv = n_heads / 4;
    struct Shape2 {
      int b, ctx;
    };
    for (Shape2 sh : {Shape2{1, 8192}, Shape2{1, 32768}, Shape2{64, 1024}}) {
      std::vector<int> lens(static_cast<size_t>(sh.b), sh.ctx), q_lens(lens.size(), 1);
      Batch b = make_batch(dt, lens, q_lens, n_heads, n_kv, d, 16, 710);
      Batch g = to_gpu(b, gpu());
      const int n_splits = ops::decode_num_splits(
          sh.b, n_kv, sh.ctx, sms, ops::decode_on_tensor_cores(dt, n_heads, n_kv, d));
      const double ms =
          decode_ms(g, KvCopies(b, gpu()), 1.0f / std::sqrt(static_cast<float>(d)), n_splits);
      const double gbps = 2.0 * sh.b * sh.ctx * n_kv * d * 2 / (ms * 1e-3) / 1e9;
      std::printf(
          "headdim decode bf16 d=%lld (%lldq/%lldkv) B=%d ctx=%d: splits %d, %.2f us, %.0f GB/s "
          "= %.1f%% of %.0f GB/s (copy)\n",
          static_cast<long long>(d), static_cast<long long>(n_heads), static_cast<long long>(n_kv),
          sh.b, sh.ctx, n_splits, ms * 1e3, gbps, 100.0 * gbps / copy_gbps(), copy_gbps());
    }
    const int n = 8192;
    Batch b = make_batch(dt, {n}, {n}, n_heads, n_kv, d, 16, 810);
    Batch g = to_gpu(b, gpu());
    const int tile_q = ops::prefill_tile_q(dt, d, gpu());
    const PrefillPlan p = plan_prefill(b, tile_q);
    Tensor out = Tensor::empty(g.q.shape(), dt, gpu());
    const double ms = time_ms(
        [&] {
          ops::paged_prefill_attention(g.q, g.k_cache, g.v_cache, g.req_to_token,
                                       g.req_pool_indices, g.seq_lens, g.qo_indptr, p.tile_seq_idx,
                                       p.tile_q_start, p.n_tiles, tile_q,
                                       1.0f / std::sqrt(static_cast<float>(d)), out);
        },
        5, 4);
    const double flops = 4.0 * n_heads * d * (static_cast<double>(n) * (n + 1) / 2);
    std::printf("headdim prefill bf16 d=%lld (%lldq/%lldkv) causal n=%d: %.3f ms, %.1f TFLOP/s\n",
                static_cast<long long>(d), static_cast<long long>(n_heads),
                static_cast<long long>(n_kv), n, ms, flops / (ms * 1e-3) / 1e12);
  }
}

}  // namespace
}  // namespace vela
