// Host side of the graph-friendly attention ops: the prefill tile planner (coverage, order, bad
// input), the decode split heuristic, and the CPU twins of paged_decode_attention /
// paged_prefill_attention (same results as paged_attention, metadata validated).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "core/error.h"
#include "ops/attention.h"
#if defined(VELA_HAS_SM90A)
#include "core/cuda/cuda_api.h"
#include "ops/cuda/cuda_ops.h"
#endif
#include "ops/op_test_util.h"

namespace vela {
namespace {

TEST(AttentionPlan, TilesCoverEveryQueryRowOnce) {
  const std::vector<int32_t> qo = {0, 700, 701, 701, 766, 830};  // 700, 1, 0, 65, 64 rows
  const int64_t n_seqs = 5, cap = ops::prefill_max_tiles(830, n_seqs);
  std::vector<int32_t> seq(static_cast<size_t>(cap)), start(static_cast<size_t>(cap));
  const int64_t n = ops::plan_prefill_tiles(qo.data(), n_seqs, 64, seq.data(), start.data(), cap);
  EXPECT_EQ(n, 11 + 1 + 0 + 2 + 1);
  std::set<std::pair<int32_t, int32_t>> rows;
  for (int64_t t = 0; t < n; ++t) {
    const int32_t q_len = qo[seq[t] + 1] - qo[seq[t]];
    ASSERT_LT(start[t], q_len);
    ASSERT_EQ(start[t] % 64, 0);
    for (int32_t r = start[t]; r < std::min(start[t] + 64, q_len); ++r)
      EXPECT_TRUE(rows.insert({seq[t], r}).second) << "row covered twice";
  }
  EXPECT_EQ(rows.size(), 830u);
  // Later (costlier) tiles of a sequence come first.
  EXPECT_EQ(seq[0], 0);
  EXPECT_EQ(start[0], 640);
  EXPECT_EQ(start[10], 0);
}

TEST(AttentionPlan, BadInput) {
  std::vector<int32_t> seq(4), start(4);
  const std::vector<int32_t> qo = {0, 300};
  EXPECT_THROW(ops::plan_prefill_tiles(qo.data(), 1, 64, seq.data(), start.data(), 4),
               InvalidArgument);  // needs 5 tiles
  const std::vector<int32_t> down = {0, 5, 3};
  EXPECT_THROW(ops::plan_prefill_tiles(down.data(), 2, 64, seq.data(), start.data(), 4),
               InvalidArgument);
  const std::vector<int32_t> off = {1, 5};
  EXPECT_THROW(ops::plan_prefill_tiles(off.data(), 1, 64, seq.data(), start.data(), 4),
               InvalidArgument);
  EXPECT_THROW(ops::plan_prefill_tiles(qo.data(), 1, 0, seq.data(), start.data(), 4),
               InvalidArgument);
}

TEST(AttentionPlan, DecodeSplits) {
  auto splits = [](int64_t n_seqs, int64_t n_kv, int64_t max_len) {
    return ops::decode_num_splits(n_seqs, n_kv, max_len, 132, /*tensor_core=*/true);
  };
  EXPECT_EQ(splits(1, 4, 60), 1);  // short: no split
  EXPECT_EQ(splits(1, 4, 100), 2);
  EXPECT_EQ(splits(1, 4, 32768), 128);  // fill the device, capped
  EXPECT_EQ(splits(1, 4, 1024), 16);    // >= 64 keys per split
  EXPECT_EQ(splits(64, 4, 512), 1);     // 256 blocks already: no split
  EXPECT_EQ(splits(32, 4, 512), 1);     // 128 blocks >= 3/4 of the SMs
  EXPECT_EQ(splits(64, 4, 2048), 2);    // one split per 1024 keys
  EXPECT_EQ(splits(64, 4, 4096), 3);    // ... up to the fill count
  EXPECT_EQ(splits(16, 4, 512), 8);     // 64 blocks: split to fill
  EXPECT_EQ(splits(1024, 8, 4096), 1);
  EXPECT_EQ(splits(0, 4, 0), 1);
  EXPECT_THROW(splits(1, 0, 10), InvalidArgument);
}

TEST(AttentionPlan, RowKernelDecodeSplitsCoverAtThreeTimesTheSms) {
  auto splits = [](int64_t n_seqs, int64_t n_kv, int64_t max_len) {
    return ops::decode_num_splits(n_seqs, n_kv, max_len, 132, /*tensor_core=*/false);
  };
  // Qwen3-1.7B heads (8 KV heads): 128 blocks at batch 16 still split to fill 4 x 132 ...
  EXPECT_EQ(splits(16, 8, 1024), 5);
  EXPECT_EQ(splits(32, 8, 1024), 3);
  // ... and 512 blocks at batch 64 cover 3 x 132: one split per 1024 keys.
  EXPECT_EQ(splits(64, 8, 512), 1);
  EXPECT_EQ(splits(64, 8, 2048), 2);
  EXPECT_EQ(splits(1, 4, 1024), 16);  // single sequences as on the tensor-core kernel
}

TEST(AttentionPlan, DecodeKernelChoice) {
  EXPECT_TRUE(ops::decode_on_tensor_cores(DType::kBF16, 24, 4, 64));  // bench-1b
  EXPECT_TRUE(ops::decode_on_tensor_cores(DType::kF16, 32, 2, 48));
  EXPECT_FALSE(ops::decode_on_tensor_cores(DType::kBF16, 16, 8, 128));  // Qwen3-1.7B: d128
  EXPECT_FALSE(ops::decode_on_tensor_cores(DType::kF32, 24, 4, 64));    // f32 caches
  EXPECT_FALSE(ops::decode_on_tensor_cores(DType::kBF16, 8, 8, 64));    // MHA: group 1
  EXPECT_FALSE(ops::decode_on_tensor_cores(DType::kBF16, 64, 2, 64));   // group 32
}

// A small paged batch: 3 sequences of lengths 9, 1, 20 whose slots are reversed positions.
struct Small {
  Tensor q, k_cache, v_cache, r2t, rows, lens, qo;
};
Small small_batch(DType dt, const std::vector<int32_t>& q_lens) {
  Small b;
  const std::vector<int32_t> lens = {9, 1, 20};
  std::vector<int32_t> r2t(3 * 20, 0), qo = {0};
  int32_t next = 0;
  for (int s = 0; s < 3; ++s) {
    for (int p = lens[s] - 1; p >= 0; --p) r2t[s * 20 + p] = next++;
    qo.push_back(qo.back() + q_lens[s]);
  }
  b.k_cache = test::random_tensor({next, 2, 16}, dt, 1);
  b.v_cache = test::random_tensor({next, 2, 16}, dt, 2);
  b.q = test::random_tensor({qo.back(), 6, 16}, dt, 3);
  b.r2t = Tensor::from_vector(r2t, {3, 20});
  b.rows = Tensor::from_vector(std::vector<int32_t>{0, 1, 2});
  b.lens = Tensor::from_vector(lens);
  b.qo = Tensor::from_vector(qo);
  return b;
}

TEST(AttentionPlan, CpuTwinsMatchPagedAttention) {
  for (DType dt : test::kFloatDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    // Decode: one query per sequence.
    Small d = small_batch(dt, {1, 1, 1});
    Tensor want = Tensor::empty(d.q.shape(), dt), got = Tensor::empty(d.q.shape(), dt);
    ops::paged_attention(d.q, d.k_cache, d.v_cache, d.r2t, d.rows, d.lens, d.qo, 0.25f, want);
    Tensor o_part = Tensor::empty({ops::decode_o_part_numel(3, 6, 16, 4)}, DType::kF32);
    Tensor lse_part = Tensor::empty({ops::decode_lse_part_numel(3, 6, 4)}, DType::kF32);
    ops::paged_decode_attention(d.q, d.k_cache, d.v_cache, d.r2t, d.rows, d.lens, 0.25f, 4, o_part,
                                lse_part, got);
    test::expect_close(test::to_doubles(got), test::to_doubles(want), 0.0, 0.0, "decode twin");
    // Prefill: ragged.
    Small p = small_batch(dt, {9, 1, 7});
    want = Tensor::empty(p.q.shape(), dt);
    got = Tensor::empty(p.q.shape(), dt);
    ops::paged_attention(p.q, p.k_cache, p.v_cache, p.r2t, p.rows, p.lens, p.qo, 0.25f, want);
    std::vector<int32_t> seq(8), start(8);
    const int tile_q = ops::prefill_tile_q(dt, 16, Device::cpu());
    const int64_t n =
        ops::plan_prefill_tiles(p.qo.data<int32_t>(), 3, tile_q, seq.data(), start.data(), 8);
    ops::paged_prefill_attention(p.q, p.k_cache, p.v_cache, p.r2t, p.rows, p.lens, p.qo,
                                 Tensor::from_vector(seq), Tensor::from_vector(start), n, tile_q,
                                 0.25f, got);
    test::expect_close(test::to_doubles(got), test::to_doubles(want), 0.0, 0.0, "prefill twin");
  }
}

// A mixed step: the leading one-query sequences (decode rows) on the decode twin, the tiles
// planned from first_seq on for the rest; together they equal paged_attention over all rows.
TEST(AttentionPlan, MixedStepDecodeRowsAndTilesMatchPagedAttention) {
  for (DType dt : test::kFloatDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Small p = small_batch(dt, {1, 1, 7});  // two decode rows, then 7 of 20 keys' queries
    Tensor want = Tensor::empty(p.q.shape(), dt), got = Tensor::empty(p.q.shape(), dt);
    ops::paged_attention(p.q, p.k_cache, p.v_cache, p.r2t, p.rows, p.lens, p.qo, 0.25f, want);
    Tensor o_part = Tensor::empty({ops::decode_o_part_numel(2, 6, 16, 2)}, DType::kF32);
    Tensor lse_part = Tensor::empty({ops::decode_lse_part_numel(2, 6, 2)}, DType::kF32);
    Tensor head = got.slice(0, 0, 2);
    ops::paged_decode_attention(p.q.slice(0, 0, 2), p.k_cache, p.v_cache, p.r2t,
                                p.rows.slice(0, 0, 2), p.lens.slice(0, 0, 2), 0.25f, 2, o_part,
                                lse_part, head);
    std::vector<int32_t> seq(8), start(8);
    const int tile_q = 4;
    const int64_t n = ops::plan_prefill_tiles(p.qo.data<int32_t>(), 3, tile_q, seq.data(),
                                              start.data(), 8, /*first_seq=*/2);
    ASSERT_EQ(n, 2);  // 7 rows in tiles of 4; none for the decode rows
    for (int64_t t = 0; t < n; ++t) EXPECT_GE(seq[static_cast<size_t>(t)], 2);
    ops::paged_prefill_attention(p.q, p.k_cache, p.v_cache, p.r2t, p.rows, p.lens, p.qo,
                                 Tensor::from_vector(seq), Tensor::from_vector(start), n, tile_q,
                                 0.25f, got);
    test::expect_close(test::to_doubles(got), test::to_doubles(want), 0.0, 0.0, "mixed step");
  }
  std::vector<int32_t> seq(4), start(4);
  const std::vector<int32_t> qo = {0, 1, 2};
  EXPECT_THROW(ops::plan_prefill_tiles(qo.data(), 2, 64, seq.data(), start.data(), 4, 3),
               InvalidArgument);  // first_seq past the sequences
}

TEST(AttentionPlan, CpuTwinsRejectBadInput) {
  Small d = small_batch(DType::kF32, {1, 1, 1});
  Tensor out = Tensor::empty(d.q.shape(), DType::kF32), none;
  EXPECT_THROW(ops::paged_decode_attention(d.q, d.k_cache, d.v_cache, d.r2t, d.rows, d.lens, 1.0f,
                                           ops::kMaxDecodeSplits + 1, none, none, out),
               InvalidArgument);  // too many splits
  EXPECT_THROW(ops::paged_decode_attention(d.q, d.k_cache, d.v_cache, d.r2t, d.rows, d.lens, 1.0f,
                                           2, none, none, out),
               InvalidArgument);  // splits without a workspace
  Tensor long_lens = Tensor::from_vector(std::vector<int32_t>{9, 1, 21});
  EXPECT_THROW(ops::paged_decode_attention(d.q, d.k_cache, d.v_cache, d.r2t, d.rows, long_lens,
                                           1.0f, 1, none, none, out),
               InvalidArgument);  // longer than req_to_token
  Tensor q2 = Tensor::empty({2, 6, 16}, DType::kF32), out2 = Tensor::empty({2, 6, 16}, DType::kF32);
  EXPECT_THROW(ops::paged_decode_attention(q2, d.k_cache, d.v_cache, d.r2t, d.rows, d.lens, 1.0f, 1,
                                           none, none, out2),
               InvalidArgument);  // two queries for three sequences
  std::vector<int32_t> seq(1), start(1);
  EXPECT_THROW(ops::paged_prefill_attention(d.q, d.k_cache, d.v_cache, d.r2t, d.rows, d.lens, d.qo,
                                            Tensor::from_vector(seq), Tensor::from_vector(start), 3,
                                            ops::kPrefillTileQ, 1.0f, out),
               InvalidArgument);  // 3 tiles in arrays of 1
  EXPECT_THROW(ops::paged_prefill_attention(d.q, d.k_cache, d.v_cache, d.r2t, d.rows, d.lens, d.qo,
                                            Tensor::from_vector(seq), Tensor::from_vector(start), 1,
                                            0, 1.0f, out),
               InvalidArgument);  // tile_q must be positive
}

// The tile each prefill kernel takes: 128 rows for 16-bit CUDA operands up to head_dim 64, 64
// otherwise (VELA_PREFILL_TILE=64 forces 64 everywhere).
TEST(AttentionPlan, PrefillTileQ) {
  const Device gpu = Device::cuda(0);
  const bool forced = ops::prefill_tile_q(DType::kBF16, 64, gpu) == ops::kPrefillTileQ;
  const int wide = forced ? ops::kPrefillTileQ : ops::kPrefillWideTileQ;
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (int64_t d : {8, 16, 24, 32, 48, 56, 64}) EXPECT_EQ(ops::prefill_tile_q(dt, d, gpu), wide);
    for (int64_t d : {72, 80, 256}) EXPECT_EQ(ops::prefill_tile_q(dt, d, gpu), 64);
    // head_dim 128: 128-row tiles where the Hopper wgmma kernel runs them (an sm_90 GPU).
    bool wgmma = false;
#if defined(VELA_HAS_SM90A)
    if (!forced && cuda::available()) wgmma = ops::cuda::prefill_wgmma_takes(dt, 128);
#endif
    EXPECT_EQ(ops::prefill_tile_q(dt, 128, gpu), wgmma ? ops::kPrefillWideTileQ : 64);
    EXPECT_EQ(ops::prefill_tile_q(dt, 64, Device::cpu()), 64);
  }
  EXPECT_EQ(ops::prefill_tile_q(DType::kF32, 64, gpu), 64);
  EXPECT_EQ(ops::prefill_tile_q(DType::kF32, 64, Device::cpu()), 64);
  // prefill_max_tiles at the default (smallest) tile bounds the 128-row plan too.
  const std::vector<int32_t> qo = {0, 1, 128, 129, 429};  // 1, 127, 1, 300 rows
  const int64_t cap = ops::prefill_max_tiles(429, 4);
  std::vector<int32_t> seq(static_cast<size_t>(cap)), start(static_cast<size_t>(cap));
  EXPECT_EQ(ops::plan_prefill_tiles(qo.data(), 4, 128, seq.data(), start.data(), cap), 1 + 1 + 1 + 3);
}

}  // namespace
}  // namespace vela
