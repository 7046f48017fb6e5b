// RadixCache: exact whole-page prefix matching, divergent branches, locks, LRU eviction of
// unreferenced leaves, and reset. Pages are taken from a PagePool the way a finished task hands
// them over: the task allocates, the radix adopts (one more reference), the task releases.
#include <gtest/gtest.h>

#include <numeric>

#include "core/error.h"
#include "engine/cache/radix_cache.h"

namespace vela {
namespace {

// Allocates pages for tokens (one per page started), records them, drops the "task" reference.
std::vector<int32_t> record(PagePool& pool, RadixCache& radix, const std::vector<int32_t>& tokens) {
  int32_t ps = pool.page_size();
  int32_t n_pages = (static_cast<int32_t>(tokens.size()) + ps - 1) / ps;
  std::vector<int32_t> pages = *pool.alloc(n_pages);
  radix.insert(tokens, pages);
  for (int32_t p : pages) pool.release(p);
  return pages;
}

std::vector<int32_t> iota(int32_t n, int32_t start) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(CacheRadix, InsertAndMatchWholePagesOnly) {
  PagePool pool(16, 4);
  RadixCache radix(pool);
  std::vector<int32_t> a = iota(10, 100);  // 2 whole pages + 2 tokens
  std::vector<int32_t> pages = record(pool, radix, a);
  EXPECT_EQ(radix.n_cached_pages(), 2);  // the partial page is not cached
  EXPECT_EQ(pool.n_free(), 14);          // ... and went back to the pool
  RadixMatch m = radix.match_prefix(a);
  EXPECT_EQ(m.n_tokens, 8);
  EXPECT_EQ(m.pages, (std::vector<int32_t>{pages[0], pages[1]}));
  EXPECT_EQ(radix.path_pages(m.last_node), m.pages);
  // A query shorter than two pages matches one; shorter than one matches nothing.
  EXPECT_EQ(radix.match_prefix(a.data(), 7).n_tokens, 4);
  EXPECT_EQ(radix.match_prefix(a.data(), 3).n_tokens, 0);
  EXPECT_EQ(radix.match_prefix(a.data(), 3).last_node, RadixCache::kRoot);
  EXPECT_EQ(radix.peek_prefix(a.data(), 10), 8);
  radix.check_integrity();
  pool.check_integrity();
}

TEST(CacheRadix, ExactMatchOnly) {
  PagePool pool(16, 4);
  RadixCache radix(pool);
  std::vector<int32_t> a = iota(12, 0);
  record(pool, radix, a);
  std::vector<int32_t> b = a;
  b[7] = 999;  // second page differs in its last token
  EXPECT_EQ(radix.match_prefix(b).n_tokens, 4);
  b[0] = 999;  // first page differs
  EXPECT_EQ(radix.match_prefix(b).n_tokens, 0);
  std::vector<int32_t> shifted(a.begin() + 1, a.end());
  EXPECT_EQ(radix.match_prefix(shifted).n_tokens, 0);  // prefixes, not substrings
  radix.check_integrity();
}

TEST(CacheRadix, DivergentBranchesShareTheirCommonPages) {
  PagePool pool(16, 4);
  RadixCache radix(pool);
  std::vector<int32_t> a = iota(8, 0);
  std::vector<int32_t> b = a;
  b[5] = 77;  // same first page, different second page
  std::vector<int32_t> pa = record(pool, radix, a);
  std::vector<int32_t> pb = *pool.alloc(2);
  EXPECT_EQ(radix.insert(b, pb), 1);  // only b's second page is new
  for (int32_t p : pb) pool.release(p);
  EXPECT_TRUE(pool.is_free(pb[0]));  // the duplicate first page was not adopted
  EXPECT_EQ(radix.n_cached_pages(), 3);
  EXPECT_EQ(radix.match_prefix(a).pages, pa);
  EXPECT_EQ(radix.match_prefix(b).pages, (std::vector<int32_t>{pa[0], pb[1]}));
  // Re-inserting a cached prefix adopts nothing.
  std::vector<int32_t> again = *pool.alloc(2);
  EXPECT_EQ(radix.insert(a, again), 0);
  for (int32_t p : again) pool.release(p);
  radix.check_integrity();
  pool.check_integrity();
}

TEST(CacheRadix, LockPreventsEviction) {
  PagePool pool(16, 4);
  RadixCache radix(pool);
  std::vector<int32_t> a = iota(8, 0), b = iota(8, 0);
  b[4] = 50;
  record(pool, radix, a);
  record(pool, radix, b);
  RadixMatch m = radix.match_prefix(a);
  radix.lock(m.last_node);
  EXPECT_EQ(radix.lock_count(m.last_node), 1);
  EXPECT_EQ(radix.n_unlocked_pages(), 1);  // b's leaf only
  radix.check_integrity();
  EXPECT_EQ(radix.evict(10), 1);  // b's leaf; a's path and the shared page stay
  EXPECT_EQ(radix.match_prefix(a).n_tokens, 8);
  EXPECT_EQ(radix.match_prefix(b).n_tokens, 4);
  radix.unlock(m.last_node);
  radix.check_integrity();
  EXPECT_EQ(radix.evict(10), 2);
  EXPECT_EQ(radix.n_cached_pages(), 0);
  EXPECT_EQ(pool.n_free(), 16);
  EXPECT_THROW(radix.unlock(m.last_node), InternalError);  // stale handle
  pool.check_integrity();
}

TEST(CacheRadix, EvictsLeastRecentlyUsedLeafFirst) {
  PagePool pool(16, 2);
  RadixCache radix(pool);
  std::vector<int32_t> a = {1, 2, 3, 4}, b = {5, 6, 7, 8}, c = {1, 2, 9, 9};
  std::vector<int32_t> pa = record(pool, radix, a);
  std::vector<int32_t> pb = record(pool, radix, b);
  std::vector<int32_t> pc = record(pool, radix, c);  // shares a's first page
  radix.match_prefix(a);                             // a is now the most recent
  int32_t n_free = pool.n_free();
  // Leaves by age: b's second page, c's second page, a's second page.
  EXPECT_EQ(radix.evict(1), 1);
  EXPECT_TRUE(pool.is_free(pb[1]));
  EXPECT_EQ(radix.evict(1), 1);  // b's first page is a leaf now and older than c's leaf
  EXPECT_TRUE(pool.is_free(pb[0]));
  EXPECT_EQ(radix.evict(1), 1);
  EXPECT_TRUE(pool.is_free(pc[1]));
  EXPECT_EQ(radix.match_prefix(a).n_tokens, 4);
  EXPECT_EQ(pool.n_free(), n_free + 3);  // evicted pages went back to the pool
  radix.check_integrity();
  pool.check_integrity();
}

TEST(CacheRadix, SharedPageIsNotEvictedWhileAnotherHolderHasIt) {
  PagePool pool(8, 2);
  RadixCache radix(pool);
  std::vector<int32_t> a = {1, 2, 3, 4};
  std::vector<int32_t> pages = *pool.alloc(2);
  radix.insert(a, pages);
  pool.release(pages[0]);        // the "task" keeps pages[1] (e.g. a forked sibling still runs)
  EXPECT_EQ(radix.evict(4), 0);  // the only leaf is still referenced
  pool.release(pages[1]);
  EXPECT_EQ(radix.evict(4), 2);
  EXPECT_EQ(pool.n_free(), 8);
  radix.check_integrity();
  pool.check_integrity();
}

TEST(CacheRadix, ResetDropsEverythingAndInvalidatesHandles) {
  PagePool pool(8, 2);
  RadixCache radix(pool);
  std::vector<int32_t> a = {1, 2, 3, 4, 5};
  record(pool, radix, a);
  RadixMatch m = radix.match_prefix(a);
  uint64_t epoch = radix.epoch();
  radix.reset();
  EXPECT_NE(radix.epoch(), epoch);
  EXPECT_FALSE(radix.is_live(m.last_node));
  EXPECT_EQ(radix.n_cached_pages(), 0);
  EXPECT_EQ(pool.n_free(), 8);
  EXPECT_EQ(radix.match_prefix(a).n_tokens, 0);
  radix.check_integrity();
  pool.check_integrity();
}

TEST(CacheRadix, PageSizeOneIsPerToken) {
  PagePool pool(16, 1);
  RadixCache radix(pool);
  std::vector<int32_t> a = {4, 5, 6, 7, 8};
  std::vector<int32_t> pa = record(pool, radix, a);
  EXPECT_EQ(radix.n_cached_pages(), 5);
  std::vector<int32_t> b = {4, 5, 6, 1};
  RadixMatch m = radix.match_prefix(b);
  EXPECT_EQ(m.n_tokens, 3);
  EXPECT_EQ(m.pages, (std::vector<int32_t>{pa[0], pa[1], pa[2]}));
  radix.lock(m.last_node);
  EXPECT_EQ(radix.evict(16), 2);  // tokens 7, 8
  radix.unlock(m.last_node);
  radix.check_integrity();
  pool.check_integrity();
}

}  // namespace
}  // namespace vela
