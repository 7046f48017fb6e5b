// WorkerPool: threads start on demand up to the cap, at most max_pending tasks wait, and submit()
// refuses past that; queued tasks all run before the destructor returns.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "server/worker_pool.h"

namespace vela {
namespace {

TEST(WorkerPool, BoundsThreadsAndQueue) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> ran{0};
  auto blocker = [&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(30), [&] { return release; });
    ++ran;
  };
  {
    WorkerPool pool(2, 3);
    EXPECT_EQ(pool.n_threads(), 0u) << "threads start on demand";
    int accepted = 0;
    for (int i = 0; i < 8; ++i) accepted += pool.submit(blocker) ? 1 : 0;
    EXPECT_EQ(accepted, 5) << "2 running + 3 waiting";
    EXPECT_EQ(pool.n_threads(), 2u);
    {
      std::lock_guard<std::mutex> lock(mu);
      release = true;
    }
    cv.notify_all();
  }
  EXPECT_EQ(ran.load(), 5) << "every accepted task ran before the pool was gone";
}

}  // namespace
}  // namespace vela
