// parallel_for_balanced: every item exactly once whatever n, grain, chunk and thread count, chunks
// inside one share taken in order by its owner, and a share whose thread stalls finished by the
// others (its tail taken from the back). The pool under all three (core/thread_pool.h): every
// item once for parallel_for / parallel_for_dynamic, nested regions inline, regions from several
// threads at once, and a task's exception rethrown in the caller with the pool still usable.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/parallel.h"

namespace vela {
namespace {

// Sets the pool's thread count for one test, then puts it back.
struct Threads {
  explicit Threads(int n) : saved(num_threads()) { set_num_threads(n); }
  ~Threads() { set_num_threads(saved); }
  int saved;
};

TEST(ParallelForBalanced, CoversEveryItemOnce) {
  for (int nt : {1, 2, 3, 4}) {
    Threads threads(nt);
    for (int64_t n : {0, 1, 7, 64, 1000, 4099}) {
      for (int64_t grain : {1, 16, 5000}) {
        for (int64_t chunk : {1, 3, 64, 10000}) {
          std::vector<int> hits(static_cast<size_t>(n), 0);
          std::mutex mu;
          parallel_for_balanced(n, grain, chunk, [&](int64_t b, int64_t e) {
            ASSERT_LE(0, b);
            ASSERT_LT(b, e);
            ASSERT_LE(e, n);
            std::lock_guard<std::mutex> lock(mu);
            for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
          });
          for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(hits[static_cast<size_t>(i)], 1)
                << "item " << i << " n=" << n << " grain=" << grain << " chunk=" << chunk
                << " threads=" << nt;
        }
      }
    }
  }
}

TEST(ParallelForBalanced, OthersFinishAStalledShare) {
  Threads threads(2);
  const int64_t n = 64, chunk = 4;  // shares [0, 32) and [32, 64), 8 chunks each
  std::vector<int> owner(static_cast<size_t>(n), -1);
  std::mutex mu;
  parallel_for_balanced(n, 1, chunk, [&](int64_t b, int64_t e) {
    const int t = thread_index();
    // Thread 1 spends 10 ms a chunk, so thread 0 has taken its first (chunk 0) long before thread 1
    // is through its own share; thread 0 then stalls for a second, and thread 1 takes the other 7
    // chunks of share 0 from the back in ~70 ms.
    std::this_thread::sleep_for(std::chrono::milliseconds(t == 0 ? 1000 : 10));
    std::lock_guard<std::mutex> lock(mu);
    for (int64_t i = b; i < e; ++i) owner[static_cast<size_t>(i)] = t;
  });
  for (int64_t i = 0; i < chunk; ++i) EXPECT_EQ(owner[static_cast<size_t>(i)], 0) << i;
  for (int64_t i = chunk; i < n; ++i) EXPECT_EQ(owner[static_cast<size_t>(i)], 1) << i;
}

TEST(ThreadPool, EveryItemOnceInEachForm) {
  for (int nt : {1, 2, 3, 5}) {
    Threads threads(nt);
    for (int64_t n : {0, 1, 2, 9, 1000, 100003}) {
      for (int form = 0; form < 2; ++form) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int> bad_index{0};
        auto body = [&](int64_t b, int64_t e) {
          if (thread_index() < 0 || thread_index() >= nt) bad_index.fetch_add(1);
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        };
        if (form == 0) {
          parallel_for(n, 7, body);
        } else {
          parallel_for_dynamic(n, 13, body);
        }
        EXPECT_EQ(bad_index.load(), 0);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1)
              << "item " << i << " n=" << n << " form=" << form << " threads=" << nt;
      }
    }
  }
}

// Back-to-back regions of different sizes: every task of every region runs exactly once, and on
// the region it belongs to. A worker that has claimed nothing yet may still hold the previous
// region's claim word when the caller publishes the next one; it must not claim a task of the new
// region through the old word (seen once on a 16-core machine as a GEMM share run twice: one
// 128-column block of a CPU reference doubled). Oversubscribed on purpose (more threads than
// cores), so workers get descheduled mid-claim.
TEST(ThreadPool, BackToBackRegionsRunEachTaskOnce) {
  Threads threads(6);
  constexpr int kRegions = 20000;
  const int64_t sizes[] = {2, 9, 3, 16, 5, 12, 4, 7};
  std::vector<std::atomic<int>> runs(16);
  for (int r = 0; r < kRegions; ++r) {
    const int64_t n = sizes[r % 8];
    for (int64_t i = 0; i < 16; ++i) runs[static_cast<size_t>(i)].store(0);
    parallel_for(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) runs[static_cast<size_t>(i)].fetch_add(1);
    });
    for (int64_t i = 0; i < 16; ++i)
      ASSERT_EQ(runs[static_cast<size_t>(i)].load(), i < n ? 1 : 0)
          << "region " << r << " of " << n << " tasks, task " << i;
  }
}

TEST(ThreadPool, NestedRegionsRunInline) {
  Threads threads(3);
  std::vector<std::atomic<int>> hits(64 * 64);
  parallel_for(64, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int outer = thread_index();
      parallel_for(64, 1, [&](int64_t b2, int64_t e2) {
        EXPECT_EQ(thread_index(), outer);  // inline on the same thread
        for (int64_t j = b2; j < e2; ++j) hits[static_cast<size_t>(i * 64 + j)].fetch_add(1);
      });
    }
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ThreadPool, RegionsFromSeveralThreadsAtOnce) {
  Threads threads(2);
  constexpr int kCallers = 4, kRounds = 200;
  constexpr int64_t kN = 4096;
  std::vector<std::vector<int>> sums(kCallers, std::vector<int>(kN, 0));
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int r = 0; r < kRounds; ++r)
        parallel_for_balanced(kN, 1, 64, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) ++sums[static_cast<size_t>(c)][static_cast<size_t>(i)];
        });
    });
  }
  for (auto& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c)
    for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(sums[c][static_cast<size_t>(i)], kRounds) << c;
}

TEST(ThreadPool, ATaskExceptionReachesTheCaller) {
  Threads threads(2);
  std::atomic<int64_t> ran{0};
  EXPECT_THROW(parallel_for_dynamic(1000, 1,
                                    [&](int64_t b, int64_t e) {
                                      ran.fetch_add(e - b);
                                      if (b <= 500 && 500 < e) throw std::runtime_error("item 500");
                                    }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 1000);  // the other tasks still ran: nothing is left half-claimed
  std::atomic<int64_t> total{0};
  parallel_for(1000, 1, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
  EXPECT_EQ(total.load(), 1000);
}

}  // namespace
}  // namespace vela
