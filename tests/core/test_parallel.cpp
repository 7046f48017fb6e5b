// parallel_for_balanced: every item exactly once whatever n, grain, chunk and thread count, chunks
// inside one share taken in order by its owner, and a share whose thread stalls finished by the
// others (its tail taken from the back).
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "core/parallel.h"

namespace vela {
namespace {

// Sets the OpenMP thread count for one test, then puts it back.
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
    const int t = omp_get_thread_num();
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

}  // namespace
}  // namespace vela
