// The KV cache with CUDA storage, request table and workspace: the same scenario on a CPU stack
// and a CUDA stack must bind identical metadata (device copies kept in sync by bind), keep the
// workspace addresses fixed, and fork must copy a partial page's K/V on the device. Skipped when no
// CUDA device is usable (CPU-only builds included).
#include <gtest/gtest.h>

#include "cache_test_util.h"
#include "core/cuda/cuda_api.h"

namespace vela {
namespace {

using test::CacheStack;
using test::token_range;

class CacheCuda : public ::testing::TestWithParam<int32_t> {
 protected:
  void SetUp() override {
    if (!cuda::available()) GTEST_SKIP() << "no usable CUDA device";
  }
};

void expect_same(const BoundBatch& cpu, const BoundBatch& gpu) {
  auto v = [](const Tensor& t) { return t.to_vector<int32_t>(); };
  EXPECT_TRUE(gpu.positions.is_cuda());
  EXPECT_TRUE(gpu.kv.req_to_token.is_cuda());
  EXPECT_EQ(v(cpu.input_ids), v(gpu.input_ids));
  EXPECT_EQ(v(cpu.positions), v(gpu.positions));
  EXPECT_EQ(v(cpu.logits_indices), v(gpu.logits_indices));
  EXPECT_EQ(v(cpu.kv.out_cache_loc), v(gpu.kv.out_cache_loc));
  EXPECT_EQ(v(cpu.kv.req_pool_indices), v(gpu.kv.req_pool_indices));
  EXPECT_EQ(v(cpu.kv.seq_lens), v(gpu.kv.seq_lens));
  EXPECT_EQ(v(cpu.kv.qo_indptr), v(gpu.kv.qo_indptr));
  EXPECT_EQ(v(cpu.kv.kv_indptr), v(gpu.kv.kv_indptr));
  EXPECT_EQ(v(cpu.kv.req_to_token), v(gpu.kv.req_to_token));
  EXPECT_EQ(cpu.kv.max_len, gpu.kv.max_len);
}

TEST_P(CacheCuda, BindMatchesTheCpuStack) {
  const int32_t ps = GetParam();
  CacheStack cpu(ps, 3, 32, ps == 0 ? 0 : 96);
  CacheStack gpu(ps, 3, 32, ps == 0 ? 0 : 96, 2, 1, 4, 64, 8, Device::cuda(0));
  std::vector<int32_t> pa = token_range(9, 1), pb = token_range(4, 50);
  void* positions = gpu.ws.positions.data_ptr();
  for (CacheStack* c : {&cpu, &gpu}) {
    c->mgr.alloc(1, pa);
    c->mgr.alloc(2, pb);
    ASSERT_TRUE(c->mgr.extend(1, 9));
    ASSERT_TRUE(c->mgr.extend(2, 4));
  }
  expect_same(cpu.mgr.bind({{1, 9, pa.data()}, {2, 4, pb.data()}}),
              gpu.mgr.bind({{1, 9, pa.data()}, {2, 4, pb.data()}}));
  for (int step = 0; step < 3; ++step) {
    int32_t ids[2] = {7, 8};
    for (CacheStack* c : {&cpu, &gpu}) {
      ASSERT_TRUE(c->mgr.extend(1, 1));
      ASSERT_TRUE(c->mgr.extend(2, 1));
    }
    BoundBatch g = gpu.mgr.bind({{1, 1, ids}, {2, 1, ids + 1}});
    expect_same(cpu.mgr.bind({{1, 1, ids}, {2, 1, ids + 1}}), g);
    EXPECT_EQ(g.positions.data_ptr(), positions);
  }
  // A recycled row is wiped on the device too, and the next task's mapping reaches it.
  std::vector<int32_t> done = pa;
  done.push_back(3);
  for (CacheStack* c : {&cpu, &gpu}) {
    c->mgr.free(1, done, true);
    c->mgr.alloc(3, done);
    ASSERT_TRUE(c->mgr.extend(3, 2));
  }
  int32_t n3 = 10 - cpu.mgr.state(3)->cached_len;
  for (CacheStack* c : {&cpu, &gpu}) ASSERT_TRUE(c->mgr.extend(3, n3));
  expect_same(cpu.mgr.bind({{3, n3, done.data() + (10 - n3)}}),
              gpu.mgr.bind({{3, n3, done.data() + (10 - n3)}}));
  gpu.mgr.check_integrity();
  for (int64_t id : {2, 3}) gpu.mgr.rollback(id);
  gpu.mgr.invalidate_prefix_cache();
  EXPECT_EQ(gpu.mgr.stats().pages_free, gpu.mgr.stats().pages_total);
  gpu.mgr.check_integrity();
}

TEST_P(CacheCuda, ForkCopiesThePartialPageOnTheDevice) {
  const int32_t ps = GetParam();
  CacheStack gpu(ps, 2, 32, ps == 0 ? 0 : 64, 3, 2, 8, 64, 8, Device::cuda(0));
  const int32_t n = ps > 1 ? ps + ps / 2 : 5;
  gpu.mgr.alloc(1, token_range(n, 0));
  ASSERT_TRUE(gpu.mgr.extend(1, n));
  gpu.mgr.bind({{1, n}});
  // Fill the whole storage with slot-dependent values.
  KVStorage& st = gpu.storage;
  std::vector<float> host(static_cast<size_t>(st.k.numel()));
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i);
  st.k.copy_(Tensor::from_vector(host, st.k.shape()));
  for (float& x : host) x = -x;
  st.v.copy_(Tensor::from_vector(host, st.v.shape()));
  ASSERT_EQ(gpu.mgr.fork(1, 2), n);
  gpu.mgr.check_integrity();
  std::vector<float> k = st.k.to_vector<float>(), v = st.v.to_vector<float>();
  const int32_t* ra = gpu.req_pool.row(gpu.mgr.state(1)->req_row);
  const int32_t* rf = gpu.req_pool.row(gpu.mgr.state(2)->req_row);
  const int64_t per_slot = st.n_kv_heads() * st.head_dim(), per_layer = st.n_slots() * per_slot;
  for (int64_t layer = 0; layer < st.n_layers(); ++layer)
    for (int32_t p = 0; p < n; ++p)
      for (int64_t e = 0; e < per_slot; ++e) {
        size_t a = static_cast<size_t>(layer * per_layer + ra[p] * per_slot + e);
        size_t f = static_cast<size_t>(layer * per_layer + rf[p] * per_slot + e);
        ASSERT_EQ(k[f], k[a]) << "layer " << layer << " position " << p;
        ASSERT_EQ(v[f], v[a]) << "layer " << layer << " position " << p;
      }
  gpu.mgr.rollback(1);
  gpu.mgr.rollback(2);
  EXPECT_EQ(gpu.mgr.stats().pages_free, gpu.mgr.stats().pages_total);
  gpu.mgr.check_integrity();
}

INSTANTIATE_TEST_SUITE_P(Strategies, CacheCuda, ::testing::Values(0, 1, 16),
                         [](const auto& info) { return test::strategy_label(info.param); });

}  // namespace
}  // namespace vela
