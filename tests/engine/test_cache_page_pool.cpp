// PagePool: allocation, reference counts, free-list reuse and the LRU order of evictable pages.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/cache/page_pool.h"

namespace vela {
namespace {

TEST(CachePagePool, AllocIsAllOrNothing) {
  PagePool pool(4, 16);
  EXPECT_EQ(pool.n_free(), 4);
  auto a = pool.alloc(3);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(*a, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(pool.n_free(), 1);
  EXPECT_FALSE(pool.alloc(2).has_value());
  EXPECT_EQ(pool.n_free(), 1);  // a failed alloc takes nothing
  EXPECT_EQ(pool.first_slot(2), 32);
  for (int32_t p : *a) EXPECT_EQ(pool.ref_count(p), 1);
  pool.check_integrity();
}

TEST(CachePagePool, RefCountsAndLifoReuse) {
  PagePool pool(4, 2);
  auto a = *pool.alloc(2);
  pool.retain(a[1]);
  EXPECT_EQ(pool.ref_count(a[1]), 2);
  EXPECT_FALSE(pool.release(a[1]));  // one holder left
  EXPECT_FALSE(pool.is_free(a[1]));
  EXPECT_TRUE(pool.release(a[1]));
  EXPECT_TRUE(pool.is_free(a[1]));
  EXPECT_EQ(pool.n_free(), 3);
  EXPECT_EQ(*pool.alloc(1), std::vector<int32_t>{a[1]});  // most recently freed first
  pool.check_integrity();
  EXPECT_THROW(pool.release(3), InternalError);  // page 3 was never allocated
  EXPECT_THROW(pool.retain(3), InternalError);
}

TEST(CachePagePool, LruOrderOfEvictablePages) {
  PagePool pool(4, 1);
  auto a = *pool.alloc(3);  // last_use: 0 < 1 < 2
  for (int32_t p : a) pool.set_evictable(p, true);
  EXPECT_EQ(pool.n_evictable(), 3);
  EXPECT_EQ(pool.lru_evictable(), 0);
  pool.touch(0);  // now 1 is the oldest
  EXPECT_EQ(pool.lru_evictable(), 1);
  pool.retain(1);  // a second holder: not evictable while shared
  EXPECT_FALSE(pool.is_evictable(1));
  EXPECT_TRUE(pool.is_marked_evictable(1));
  EXPECT_EQ(pool.lru_evictable(), 2);
  pool.release(1);  // back to one holder: evictable again, keeps its age
  EXPECT_EQ(pool.lru_evictable(), 1);
  pool.set_evictable(1, false);
  EXPECT_EQ(pool.lru_evictable(), 2);
  EXPECT_EQ(pool.n_evictable(), 2);
  pool.check_integrity();
  // A marked page must be unmarked by its owner before its last reference goes.
  EXPECT_THROW(pool.release(2), InternalError);
  for (int32_t p : a) pool.set_evictable(p, false);
  for (int32_t p : a) EXPECT_TRUE(pool.release(p));
  EXPECT_EQ(pool.n_free(), 4);
  EXPECT_FALSE(pool.lru_evictable().has_value());
  pool.check_integrity();
}

TEST(CachePagePool, RejectsBadSizes) {
  EXPECT_THROW(PagePool(0, 16), InvalidArgument);
  EXPECT_THROW(PagePool(4, 0), InvalidArgument);
}

}  // namespace
}  // namespace vela
