// TaskCacheManager scenarios over every strategy (contiguous, paged 1 / 4 / 16), with
// check_integrity() after every step: the lifecycle and bind metadata, prefix reuse and the
// rebuilt request row, recycled rows, out of pages, eviction, rollback,
// fork, invalidation, and no leaked pages at the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "cache_test_util.h"
#include "core/error.h"

namespace vela {
namespace {

using test::CacheStack;
using test::row_slots;
using test::token_range;

std::vector<int32_t> vec(const Tensor& t) { return t.to_vector<int32_t>(); }

class CacheManagerAllStrategies : public ::testing::TestWithParam<int32_t> {};

TEST_P(CacheManagerAllStrategies, LifecycleAndBindMetadata) {
  CacheStack c(GetParam(), 4, 32, GetParam() == 0 ? 0 : 128);
  TaskCacheManager& m = c.mgr;
  std::vector<int32_t> pa = token_range(5, 10), pb = token_range(3, 50);
  ASSERT_EQ(m.alloc(1, pa), 0);
  ASSERT_EQ(m.alloc(2, pb), 0);
  m.check_integrity();
  ASSERT_TRUE(m.extend(1, 5));
  ASSERT_TRUE(m.extend(2, 3));
  ASSERT_TRUE(m.extend(2, 3));  // idempotent
  EXPECT_EQ(m.state(2)->reserved_len, 3);
  m.check_integrity();

  std::vector<int32_t> ids(pa);
  ids.insert(ids.end(), pb.begin(), pb.end());
  BoundBatch b = m.bind({{1, 5, pa.data()}, {2, 3, pb.data()}});
  m.check_integrity();
  EXPECT_EQ(b.n_tokens, 8);
  EXPECT_EQ(b.n_seqs, 2);
  EXPECT_EQ(vec(b.input_ids), ids);
  EXPECT_EQ(vec(b.positions), (std::vector<int32_t>{0, 1, 2, 3, 4, 0, 1, 2}));
  EXPECT_EQ(vec(b.kv.seq_lens), (std::vector<int32_t>{5, 3}));
  EXPECT_EQ(vec(b.kv.qo_indptr), (std::vector<int32_t>{0, 5, 8}));
  EXPECT_EQ(vec(b.kv.kv_indptr), (std::vector<int32_t>{0, 5, 8}));
  EXPECT_EQ(vec(b.logits_indices), (std::vector<int32_t>{4, 7}));
  EXPECT_EQ(b.kv.max_len, 5);
  std::vector<int32_t> rows = vec(b.kv.req_pool_indices);
  EXPECT_EQ(rows[0], m.state(1)->req_row);
  EXPECT_EQ(rows[1], m.state(2)->req_row);
  EXPECT_NE(rows[0], rows[1]);
  std::vector<int32_t> loc = vec(b.kv.out_cache_loc);
  std::vector<int32_t> want = row_slots(m, c.req_pool, 1, 5), wb = row_slots(m, c.req_pool, 2, 3);
  want.insert(want.end(), wb.begin(), wb.end());
  EXPECT_EQ(loc, want);
  EXPECT_EQ(std::set<int32_t>(loc.begin(), loc.end()).size(), loc.size());  // no slot twice
  EXPECT_EQ(b.kv.k_cache.data_ptr(), c.storage.k.data_ptr());
  EXPECT_EQ(b.kv.req_to_token.data_ptr(), c.req_pool.table().data_ptr());

  // One decode step each.
  ASSERT_TRUE(m.extend(1, 1));
  ASSERT_TRUE(m.extend(2, 1));
  b = m.bind({{1, 1}, {2, 1}});
  EXPECT_EQ(vec(b.positions), (std::vector<int32_t>{5, 3}));
  EXPECT_EQ(vec(b.kv.seq_lens), (std::vector<int32_t>{6, 4}));
  EXPECT_EQ(vec(b.kv.kv_indptr), (std::vector<int32_t>{0, 6, 10}));
  EXPECT_EQ(vec(b.logits_indices), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(vec(b.kv.out_cache_loc),
            (std::vector<int32_t>{c.req_pool.row(rows[0])[5], c.req_pool.row(rows[1])[3]}));
  m.check_integrity();

  std::vector<int32_t> done = pa;
  done.push_back(7);
  m.free(1, done, true);
  m.check_integrity();
  m.free(2, pb, false);
  m.check_integrity();
  m.invalidate_prefix_cache();
  TaskCacheManager::Stats s = m.stats();
  EXPECT_EQ(s.n_tasks, 0);
  EXPECT_EQ(s.pages_free, s.pages_total);
  EXPECT_EQ(s.pages_used, 0);
  EXPECT_EQ(m.n_free_rows(), 4);
  m.check_integrity();
}

TEST_P(CacheManagerAllStrategies, BindRejectsMisuseWithoutChangingState) {
  CacheStack c(GetParam(), 2, 16);
  TaskCacheManager& m = c.mgr;
  ASSERT_EQ(m.alloc(1, token_range(4, 0)), 0);
  EXPECT_THROW(m.alloc(1, token_range(4, 0)), InvalidArgument);   // id in use
  EXPECT_THROW(m.alloc(2, {}), InvalidArgument);                  // empty prompt
  EXPECT_THROW(m.alloc(2, token_range(17, 0)), InvalidArgument);  // longer than max_ctx
  EXPECT_THROW(m.bind({{1, 4}}), InvalidArgument);                // not reserved
  ASSERT_TRUE(m.extend(1, 4));
  EXPECT_THROW(m.bind({{1, 2}, {1, 2}}), InvalidArgument);  // twice in one step
  EXPECT_THROW(m.bind({{1, 0}}), InvalidArgument);
  EXPECT_THROW(m.bind({{9, 1}}), InvalidArgument);  // unknown task
  EXPECT_THROW(m.bind({}), InvalidArgument);
  EXPECT_THROW(m.extend(1, 17), InvalidArgument);  // past max_ctx
  EXPECT_EQ(m.state(1)->kv_len, 0);
  m.check_integrity();
  BoundBatch b = m.bind({{1, 4}});
  EXPECT_EQ(vec(b.positions), (std::vector<int32_t>{0, 1, 2, 3}));
  m.rollback(1);
  m.rollback(1);  // idempotent
  m.check_integrity();
}

TEST_P(CacheManagerAllStrategies, RecycledRowNeverExposesThePreviousTask) {
  CacheStack c(GetParam(), 2, 32, GetParam() == 0 ? 0 : 64);
  TaskCacheManager& m = c.mgr;
  std::vector<int32_t> pa = token_range(20, 0);
  m.alloc(1, pa);
  ASSERT_TRUE(m.extend(1, 20));
  m.bind({{1, 20}});
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(m.extend(1, 1));
    m.bind({{1, 1}});
  }
  int32_t row_a = m.state(1)->req_row;
  std::vector<int32_t> done = pa;
  for (int i = 0; i < 4; ++i) done.push_back(100 + i);
  m.free(1, done, true);
  m.check_integrity();
  // The next task gets the same row and shares no prefix with the old one.
  std::vector<int32_t> pb = token_range(3, 500);
  ASSERT_EQ(m.alloc(2, pb), 0);
  EXPECT_EQ(m.state(2)->req_row, row_a);
  const int32_t* row = c.req_pool.row(row_a);
  for (int32_t p = 0; p < c.req_pool.max_ctx(); ++p) EXPECT_EQ(row[p], ReqToTokenPool::kNoSlot);
  ASSERT_TRUE(m.extend(2, 3));
  BoundBatch b = m.bind({{2, 3, pb.data()}});
  m.check_integrity();
  EXPECT_EQ(vec(b.positions), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(vec(b.kv.seq_lens), std::vector<int32_t>{3});
  EXPECT_EQ(vec(b.input_ids), pb);
  for (int32_t p = m.strategy().capacity(*m.state(2)); p < c.req_pool.max_ctx(); ++p)
    EXPECT_EQ(row[p], ReqToTokenPool::kNoSlot) << p;
  if (GetParam() > 0) {
    // Paged: task 1's pages are cached in the radix; the new task must not see any of them.
    const RadixCache& radix = c.paged().radix();
    std::set<int32_t> cached_pages;
    for (int32_t node : radix.live_nodes()) cached_pages.insert(radix.page_of(node));
    EXPECT_EQ(static_cast<int32_t>(cached_pages.size()), 23 / GetParam());
    for (int32_t page : cached_pages) EXPECT_EQ(c.paged().pool().ref_count(page), 1);
    for (int32_t s : vec(b.kv.out_cache_loc))
      EXPECT_EQ(cached_pages.count(s / GetParam()), 0u)
          << "slot " << s << " of a cached page handed to a new task";
  }
  m.free(2, pb, false);
  m.invalidate_prefix_cache();
  EXPECT_EQ(m.stats().pages_free, m.stats().pages_total);
  m.check_integrity();
}

TEST_P(CacheManagerAllStrategies, WorkspaceAddressesStayFixedAcrossBinds) {
  CacheStack c(GetParam(), 4, 32, GetParam() == 0 ? 0 : 128);
  TaskCacheManager& m = c.mgr;
  InferenceWorkspace& ws = c.ws;
  m.alloc(1, token_range(6, 0));
  m.alloc(2, token_range(3, 9));
  ASSERT_TRUE(m.extend(1, 6));
  ASSERT_TRUE(m.extend(2, 3));
  std::vector<BoundBatch> bs;
  bs.push_back(m.bind({{1, 6}, {2, 3}}));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(m.extend(1, 1));
    ASSERT_TRUE(m.extend(2, 1));
    bs.push_back(m.bind({{1, 1}, {2, 1}}));
  }
  for (const BoundBatch& b : bs) {
    EXPECT_EQ(b.input_ids.data_ptr(), ws.input_ids.data_ptr());
    EXPECT_EQ(b.positions.data_ptr(), ws.positions.data_ptr());
    EXPECT_EQ(b.logits_indices.data_ptr(), ws.logits_indices.data_ptr());
    EXPECT_EQ(b.kv.out_cache_loc.data_ptr(), ws.out_cache_loc.data_ptr());
    EXPECT_EQ(b.kv.req_pool_indices.data_ptr(), ws.req_pool_indices.data_ptr());
    EXPECT_EQ(b.kv.seq_lens.data_ptr(), ws.seq_lens.data_ptr());
    EXPECT_EQ(b.kv.qo_indptr.data_ptr(), ws.qo_indptr.data_ptr());
    EXPECT_EQ(b.kv.kv_indptr.data_ptr(), ws.kv_indptr.data_ptr());
    EXPECT_EQ(b.kv.req_to_token.data_ptr(), c.req_pool.table().data_ptr());
  }
  // Every bind rewrites every entry (no stale positions from the first step).
  const BoundBatch& last = bs.back();
  EXPECT_EQ(vec(last.positions), (std::vector<int32_t>{8, 5}));
  EXPECT_EQ(vec(last.kv.seq_lens), (std::vector<int32_t>{9, 6}));
  m.check_integrity();
}

TEST_P(CacheManagerAllStrategies, RollbackThenAllocAgainReproducesTheState) {
  CacheStack c(GetParam(), 2, 32, GetParam() == 0 ? 0 : 64);
  TaskCacheManager& m = c.mgr;
  std::vector<int32_t> p = token_range(18, 3);
  m.alloc(1, p);
  ASSERT_TRUE(m.extend(1, 18));
  m.bind({{1, 18}});
  std::vector<int32_t> done = p;
  done.push_back(1);
  m.free(1, done, true);  // leaves a cached prefix behind (paged)
  std::optional<int32_t> cached = m.alloc(2, p);
  ASSERT_TRUE(cached.has_value());
  TaskCacheState fresh = *m.state(2);
  std::vector<int32_t> fresh_row = row_slots(m, c.req_pool, 2, c.req_pool.max_ctx());
  ASSERT_TRUE(m.extend(2, 18 - *cached));
  m.bind({{2, 18 - *cached}});
  ASSERT_TRUE(m.extend(2, 1));
  m.bind({{2, 1}});
  m.check_integrity();
  m.rollback(2);  // preempted
  m.check_integrity();
  EXPECT_EQ(m.state(2), nullptr);
  ASSERT_EQ(m.alloc(2, p), cached);
  const TaskCacheState& again = *m.state(2);
  EXPECT_EQ(again.req_row, fresh.req_row);
  EXPECT_EQ(again.kv_len, fresh.kv_len);
  EXPECT_EQ(again.reserved_len, fresh.reserved_len);
  EXPECT_EQ(again.cached_len, fresh.cached_len);
  EXPECT_EQ(again.pages, fresh.pages);
  EXPECT_EQ(again.page_hashes, fresh.page_hashes);
  EXPECT_NE(again.uid, fresh.uid);
  EXPECT_EQ(row_slots(m, c.req_pool, 2, c.req_pool.max_ctx()), fresh_row);
  m.check_integrity();
  m.rollback(2);
  m.invalidate_prefix_cache();
  EXPECT_EQ(m.stats().pages_free, m.stats().pages_total);
  m.check_integrity();
}

INSTANTIATE_TEST_SUITE_P(Strategies, CacheManagerAllStrategies, ::testing::Values(0, 1, 4, 16),
                         [](const auto& info) { return test::strategy_label(info.param); });

// ---- paged-only scenarios ----

class CacheManagerPaged : public ::testing::TestWithParam<int32_t> {};

TEST_P(CacheManagerPaged, PrefixReuseRebuildsTheRequestRow) {
  const int32_t ps = GetParam();
  CacheStack c(ps, 4, 64, 256);
  TaskCacheManager& m = c.mgr;
  std::vector<int32_t> pa = token_range(37, 1);
  ASSERT_EQ(m.alloc(1, pa), 0);
  ASSERT_TRUE(m.extend(1, 37));
  m.bind({{1, 37}});
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(m.extend(1, 1));
    m.bind({{1, 1}});
  }
  std::vector<int32_t> done = pa;
  for (int i = 0; i < 4; ++i) done.push_back(200 + i);  // 40 KV tokens + the last sample
  std::vector<int32_t> pages_a = m.state(1)->pages;
  m.free(1, done, true);
  m.check_integrity();
  EXPECT_EQ(m.stats().pages_cached, 40 / ps);

  // A longer prompt that extends the first task's tokens: reuses the whole cached pages.
  std::vector<int32_t> pb(done.begin(), done.begin() + 40);
  pb.push_back(999);
  pb.push_back(998);
  std::optional<int32_t> cached = m.alloc(2, pb);
  ASSERT_TRUE(cached.has_value());
  EXPECT_EQ(*cached, 40 / ps * ps);
  EXPECT_LT(*cached, static_cast<int32_t>(pb.size()));
  const TaskCacheState& sb = *m.state(2);
  EXPECT_EQ(sb.cached_len, *cached);
  EXPECT_EQ(sb.kv_len, *cached);
  std::vector<int32_t> want_pages(pages_a.begin(), pages_a.begin() + *cached / ps);
  EXPECT_EQ(sb.pages, want_pages);
  // The new request's row maps the cached positions to the cached pages' slots.
  std::vector<int32_t> row = row_slots(m, c.req_pool, 2, *cached);
  for (int32_t p = 0; p < *cached; ++p)
    EXPECT_EQ(row[p], want_pages[p / ps] * ps + p % ps) << "position " << p;
  m.check_integrity();
  // Prefill resumes after the hit.
  int32_t rest = static_cast<int32_t>(pb.size()) - *cached;
  ASSERT_TRUE(m.extend(2, rest));
  BoundBatch b = m.bind({{2, rest}});
  EXPECT_EQ(vec(b.positions).front(), *cached);
  EXPECT_EQ(vec(b.kv.seq_lens), std::vector<int32_t>{static_cast<int32_t>(pb.size())});
  m.check_integrity();

  // Never the whole prompt: a prompt equal to a cached prefix recomputes at least one token.
  std::vector<int32_t> pc(done.begin(), done.begin() + 32);
  std::optional<int32_t> cached_c = m.alloc(3, pc);
  ASSERT_TRUE(cached_c.has_value());
  EXPECT_EQ(*cached_c, 31 / ps * ps);
  EXPECT_EQ(m.peek_prefix(pc), *cached_c);
  // A prompt diverging inside the first page reuses nothing.
  std::vector<int32_t> pd = pa;
  pd[0] = 5000;
  EXPECT_EQ(m.alloc(4, pd), 0);
  EXPECT_EQ(m.stats().prefix_hit_tokens, *cached + *cached_c);
  m.check_integrity();
  for (int64_t id : {2, 3, 4}) m.rollback(id);
  m.invalidate_prefix_cache();
  EXPECT_EQ(m.stats().pages_free, m.stats().pages_total);
  m.check_integrity();
}

TEST_P(CacheManagerPaged, OutOfPagesChangesNothing) {
  const int32_t ps = GetParam();
  CacheStack c(ps, 4, 64, 4 * ps);  // 4 pages
  TaskCacheManager& m = c.mgr;
  m.alloc(1, token_range(3 * ps, 0));
  ASSERT_TRUE(m.extend(1, 3 * ps));
  m.alloc(2, token_range(2 * ps, 100));
  TaskCacheState before = *m.state(2);
  std::vector<int32_t> row_before = row_slots(m, c.req_pool, 2, 64);
  TaskCacheManager::Stats s_before = m.stats();
  EXPECT_FALSE(m.extend(2, 2 * ps));
  const TaskCacheState& after = *m.state(2);
  EXPECT_EQ(after.pages, before.pages);
  EXPECT_EQ(after.reserved_len, before.reserved_len);
  EXPECT_EQ(row_slots(m, c.req_pool, 2, 64), row_before);
  EXPECT_EQ(m.stats().pages_free, s_before.pages_free);
  m.check_integrity();
  EXPECT_TRUE(m.extend(2, ps));  // one page is still there
  EXPECT_FALSE(m.extend(2, ps + 1));
  m.check_integrity();
  // Preempting task 1 makes room.
  m.rollback(1);
  EXPECT_TRUE(m.extend(2, 2 * ps));
  m.check_integrity();
  m.rollback(2);
  EXPECT_EQ(m.stats().pages_free, 4);
  m.check_integrity();
}

TEST_P(CacheManagerPaged, ExtendEvictsUnreferencedCachedPagesFirst) {
  const int32_t ps = GetParam();
  CacheStack c(ps, 4, 64, 4 * ps);
  TaskCacheManager& m = c.mgr;
  const int32_t n_a = ps > 1 ? 2 * ps + 1 : 2;
  std::vector<int32_t> pa = token_range(n_a, 0);
  m.alloc(1, pa);
  ASSERT_TRUE(m.extend(1, n_a));
  m.bind({{1, n_a}});
  m.free(1, pa, true);  // 2 pages cached, 2 free
  EXPECT_EQ(m.stats().pages_cached, 2);
  EXPECT_EQ(m.stats().pages_free, 2);
  EXPECT_EQ(m.n_available_tokens(), 4 * ps);
  m.alloc(2, token_range(3 * ps, 500));
  ASSERT_TRUE(m.extend(2, 3 * ps));  // evicts one cached leaf
  EXPECT_EQ(m.stats().pages_cached, 1);
  EXPECT_EQ(m.stats().pages_free, 0);
  m.check_integrity();
  // A task reusing the remaining cached page keeps it from eviction.
  std::vector<int32_t> pc(pa.begin(), pa.begin() + ps + 1);
  ASSERT_EQ(m.alloc(3, pc), ps);
  EXPECT_FALSE(m.extend(3, 1 + ps));  // would need a page: none free, the cached one is in use
  EXPECT_TRUE(m.extend(3, 0));
  m.check_integrity();
  m.rollback(2);
  EXPECT_TRUE(m.extend(3, 1));
  m.check_integrity();
  m.rollback(3);
  m.invalidate_prefix_cache();
  EXPECT_EQ(m.stats().pages_free, 4);
  m.check_integrity();
}

TEST_P(CacheManagerPaged, InvalidatePrefixCacheFreesRadixPagesAndStopsRecording) {
  const int32_t ps = GetParam();
  CacheStack c(ps, 4, 64, 256);
  TaskCacheManager& m = c.mgr;
  std::vector<int32_t> pa = token_range(3 * ps + 2, 7);
  m.alloc(1, pa);
  ASSERT_TRUE(m.extend(1, static_cast<int32_t>(pa.size())));
  m.bind({{1, static_cast<int32_t>(pa.size())}});
  m.free(1, pa, true);
  const int32_t n_pa = static_cast<int32_t>(pa.size());
  EXPECT_EQ(m.stats().pages_cached, n_pa / ps);
  // Task 2 runs on a cached prefix across the invalidation.
  ASSERT_EQ(m.alloc(2, pa), (n_pa - 1) / ps * ps);
  ASSERT_TRUE(m.extend(2, 2));
  m.bind({{2, 2}});
  m.invalidate_prefix_cache();
  TaskCacheManager::Stats s = m.stats();
  EXPECT_EQ(s.pages_cached, 0);
  EXPECT_EQ(s.pages_used, static_cast<int64_t>(m.state(2)->pages.size()));  // task 2 keeps its own
  m.check_integrity();
  EXPECT_EQ(m.alloc(3, pa), 0);  // nothing to reuse after a weight update
  m.free(2, pa, true);           // started under the old weights: not recorded
  EXPECT_EQ(m.stats().pages_cached, 0);
  m.check_integrity();
  m.rollback(3);
  EXPECT_EQ(m.stats().pages_free, m.stats().pages_total);
  m.check_integrity();
}

TEST_P(CacheManagerPaged, FreeRejectsTokensThatAreNotThePrompt) {
  const int32_t ps = GetParam();
  CacheStack c(ps, 2, 64, 128);
  TaskCacheManager& m = c.mgr;
  std::vector<int32_t> pa = token_range(2 * ps + 1, 0);
  m.alloc(1, pa);
  ASSERT_TRUE(m.extend(1, 2 * ps + 1));
  m.bind({{1, 2 * ps + 1}});
  std::vector<int32_t> wrong = pa;
  wrong[0] = 1234;
  EXPECT_THROW(m.free(1, wrong, true), InvalidArgument);
  ASSERT_NE(m.state(1), nullptr);  // nothing changed
  m.check_integrity();
  // Tokens beyond kv_len are ignored (the last sampled token has no KV yet).
  std::vector<int32_t> longer = pa;
  for (int i = 0; i < 3 * ps; ++i) longer.push_back(9);
  m.free(1, longer, true);
  EXPECT_EQ(m.stats().pages_cached, (2 * ps + 1) / ps);
  m.invalidate_prefix_cache();
  m.check_integrity();
}

TEST_P(CacheManagerPaged, ForkSharesWholePagesAndCopiesTheTail) {
  const int32_t ps = GetParam();
  CacheStack c(ps, 4, 64, 256);
  TaskCacheManager& m = c.mgr;
  const int32_t n = 2 * ps + (ps > 1 ? ps / 2 : 0);
  std::vector<int32_t> pa = token_range(n, 3);
  m.alloc(1, pa);
  ASSERT_TRUE(m.extend(1, n));
  BoundBatch b = m.bind({{1, n, pa.data()}});
  // Stand-in for the forward: write recognisable K/V into the bound slots.
  std::vector<int32_t> loc = vec(b.kv.out_cache_loc);
  float* k = c.storage.k.data<float>();
  float* v = c.storage.v.data<float>();
  const int64_t per_slot = c.storage.n_kv_heads() * c.storage.head_dim();
  const int64_t per_layer = c.storage.n_slots() * per_slot;
  for (int64_t layer = 0; layer < c.storage.n_layers(); ++layer)
    for (int32_t t = 0; t < n; ++t)
      for (int64_t e = 0; e < per_slot; ++e) {
        k[layer * per_layer + loc[t] * per_slot + e] = static_cast<float>(1000 * layer + t);
        v[layer * per_layer + loc[t] * per_slot + e] = static_cast<float>(-1000 * layer - t);
      }
  std::optional<int32_t> len = m.fork(1, 2);
  ASSERT_EQ(len, n);
  m.check_integrity();
  const TaskCacheState& a = *m.state(1);
  const TaskCacheState& f = *m.state(2);
  EXPECT_NE(f.req_row, a.req_row);
  EXPECT_EQ(f.kv_len, n);
  for (int32_t i = 0; i < n / ps; ++i) EXPECT_EQ(f.pages[i], a.pages[i]);
  if (n % ps != 0) {
    EXPECT_NE(f.pages.back(), a.pages[n / ps]);
  }
  std::vector<int32_t> frow = row_slots(m, c.req_pool, 2, n);
  for (int64_t layer = 0; layer < c.storage.n_layers(); ++layer)
    for (int32_t t = 0; t < n; ++t) {
      EXPECT_EQ(k[layer * per_layer + frow[t] * per_slot], static_cast<float>(1000 * layer + t));
      EXPECT_EQ(v[layer * per_layer + frow[t] * per_slot], static_cast<float>(-1000 * layer - t));
    }
  // Both continue on their own slots.
  ASSERT_TRUE(m.extend(1, 1));
  ASSERT_TRUE(m.extend(2, 1));
  std::vector<int32_t> l2 = vec(m.bind({{1, 1}, {2, 1}}).kv.out_cache_loc);
  EXPECT_NE(l2[0], l2[1]);
  m.check_integrity();
  std::vector<int32_t> da = pa, db = pa;
  da.push_back(1);
  db.push_back(2);
  m.free(1, da, true);
  m.check_integrity();
  m.free(2, db, true);
  m.check_integrity();
  m.invalidate_prefix_cache();
  EXPECT_EQ(m.stats().pages_free, m.stats().pages_total);
  m.check_integrity();
}

TEST_P(CacheManagerPaged, IntegrityCheckCatchesACorruptRow) {
  CacheStack c(GetParam(), 2, 32, 64);
  TaskCacheManager& m = c.mgr;
  m.alloc(1, token_range(5, 0));
  ASSERT_TRUE(m.extend(1, 5));
  m.check_integrity();
  int32_t bogus = 63;
  c.req_pool.set(m.state(1)->req_row, 2, &bogus, 1);
  EXPECT_THROW(m.check_integrity(), InternalError);
}

INSTANTIATE_TEST_SUITE_P(PageSizes, CacheManagerPaged, ::testing::Values(1, 4, 16),
                         [](const auto& info) { return test::strategy_label(info.param); });

TEST(CacheManagerContiguous, RowsOwnFixedSlotRanges) {
  CacheStack c(0, 3, 16);
  TaskCacheManager& m = c.mgr;
  EXPECT_EQ(m.alloc(1, token_range(4, 0)), 0);
  EXPECT_EQ(m.alloc(2, token_range(4, 0)), 0);  // no prefix reuse
  ASSERT_TRUE(m.extend(2, 4));
  BoundBatch b = m.bind({{2, 4}});
  int32_t r = m.state(2)->req_row;
  EXPECT_EQ(vec(b.kv.out_cache_loc),
            (std::vector<int32_t>{r * 16, r * 16 + 1, r * 16 + 2, r * 16 + 3}));
  EXPECT_EQ(m.alloc(3, token_range(2, 0)), 0);
  EXPECT_FALSE(m.alloc(4, token_range(2, 0)).has_value());  // out of rows
  EXPECT_EQ(m.stats().pages_free, 0);
  m.check_integrity();
  EXPECT_THROW(CacheStack(0, 3, 16, 47), InvalidArgument);  // storage too small for the rows
}

}  // namespace
}  // namespace vela
