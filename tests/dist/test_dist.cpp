// Data-parallel building blocks on the CPU: the TCP store (values, counters, deadlines, a peer
// that disconnects without goodbye), the store-backed process group with ranks as threads (every
// collective against the rank-order sum computed here, bit for bit), and the bucket layout.
// The MPI backend and the trainer are covered end to end by tests/dist/test_dist_train.sh.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/dtype.h"
#include "dist/bucket_layout.h"
#include "dist/cpu_process_group.h"
#include "dist/launcher.h"
#include "dist/process_group.h"
#include "dist/tcp_store.h"

namespace vela::dist {
namespace {

using std::chrono::milliseconds;

TEST(TcpStore, ValuesCountersAndReaders) {
  TcpStoreServer server(0, 2);
  TcpStoreClient a("127.0.0.1", server.port(), 0, milliseconds(5000));
  TcpStoreClient b("127.0.0.1", server.port(), 1, milliseconds(5000));
  a.set("k", std::string("v\0w", 3), 1);
  EXPECT_EQ(b.get("k"), std::string("v\0w", 3));
  EXPECT_EQ(a.add("c", 2), 2);
  EXPECT_EQ(b.add("c", 3), 5);
  b.wait_at_least("c", 5);
  // A get blocks until another thread sets the value.
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(100));
    a.set("late", "x");
  });
  EXPECT_EQ(b.get("late"), "x");
  t.join();
  std::thread bar([&] { a.barrier("b1", 2); });
  b.barrier("b1", 2);
  bar.join();
}

TEST(TcpStore, DeadlineNamesTheKey) {
  TcpStoreServer server(0, 1);
  TcpStoreClient a("127.0.0.1", server.port(), 0, milliseconds(300));
  const auto t0 = std::chrono::steady_clock::now();
  try {
    a.get("never");
    FAIL() << "expected a deadline";
  } catch (const DistError& e) {
    EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("never"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(TcpStore, DeadPeerFailsTheWaitersPromptly) {
  TcpStoreServer server(0, 2);
  const int port = server.port();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Rank 1 connects, then dies without saying goodbye.
    try {
      auto* c = new TcpStoreClient("127.0.0.1", port, 1, milliseconds(5000));
      (void)c;
    } catch (...) {
    }
    ::_exit(0);
  }
  TcpStoreClient a("127.0.0.1", port, 0, milliseconds(60000));
  const auto t0 = std::chrono::steady_clock::now();
  try {
    a.get("from_rank_1");
    FAIL() << "expected the dead peer to be reported";
  } catch (const DistError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 disconnected"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_NE(a.wait_for_failure(milliseconds(10)), "");
}

// Runs fn(rank, group) on `world` threads, each a rank of a store-backed group.
template <typename Fn>
void run_ranks(int world, Fn fn) {
  const int port = pick_free_port();
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        DistOptions o;
        o.rank = r;
        o.world_size = world;
        o.master_port = port;
        o.backend = "store";
        o.timeout = milliseconds(20000);
        std::shared_ptr<ProcessGroup> pg = make_process_group(o, Device::cpu());
        fn(r, *pg);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

float value_of(int rank, int64_t i) {
  // Values whose sums round differently in different orders.
  return static_cast<float>((i * 7919 + rank * 104729) % 1000) * 1e-3f +
         (rank + 1) * 1e4f * (i % 3);
}

TEST(StoreProcessGroup, CollectivesAreRankOrderSums) {
  const int world = 3;
  const int64_t n = 1001;  // not a multiple of the world size
  run_ranks(world, [&](int rank, ProcessGroup& pg) {
    EXPECT_EQ(std::string(pg.backend()), "store");
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = value_of(rank, i);
    Tensor t = Tensor::from_vector(x);
    pg.all_reduce(t)->wait();
    std::vector<float> got = t.to_vector<float>();
    for (int64_t i = 0; i < n; ++i) {
      float want = value_of(0, i);
      for (int r = 1; r < world; ++r) want += value_of(r, i);
      ASSERT_EQ(got[i], want) << "element " << i;
    }
    // bf16: summed in f32 and rounded once.
    std::vector<bf16> xb(n);
    for (int64_t i = 0; i < n; ++i) xb[i] = bf16(value_of(rank, i));
    Tensor tb = Tensor::from_vector(xb);
    pg.all_reduce(tb)->wait();
    std::vector<bf16> gb = tb.to_vector<bf16>();
    for (int64_t i = 0; i < n; ++i) {
      float acc = static_cast<float>(bf16(value_of(0, i)));
      for (int r = 1; r < world; ++r) acc += static_cast<float>(bf16(value_of(r, i)));
      ASSERT_EQ(gb[i].bits, bf16(acc).bits) << "bf16 element " << i;
    }
    // reduce_scatter of [world * m] -> [m], then all_gather back.
    const int64_t m = 17;
    std::vector<float> in(world * m);
    for (int64_t i = 0; i < world * m; ++i) in[i] = value_of(rank, i);
    Tensor out = Tensor::zeros({m}, DType::kF32);
    pg.reduce_scatter(Tensor::from_vector(in), out)->wait();
    for (int64_t i = 0; i < m; ++i) {
      const int64_t j = rank * m + i;
      float want = value_of(0, j);
      for (int r = 1; r < world; ++r) want += value_of(r, j);
      ASSERT_EQ(out.to_vector<float>()[i], want);
    }
    Tensor mine = Tensor::from_vector(std::vector<int32_t>(5, rank * 10));
    Tensor all = Tensor::zeros({5 * world}, DType::kI32);
    pg.all_gather(mine, all)->wait();
    for (int r = 0; r < world; ++r) EXPECT_EQ(all.to_vector<int32_t>()[r * 5 + 4], r * 10);
    Tensor b = Tensor::from_vector(std::vector<int32_t>{rank, rank});
    pg.broadcast(b, 1)->wait();
    EXPECT_EQ(b.to_vector<int32_t>(), (std::vector<int32_t>{1, 1}));
    EXPECT_EQ(pg.all_reduce_host({1.5, double(rank)}), (std::vector<double>{4.5, 3.0}));
    EXPECT_EQ(pg.broadcast_host(rank == 2 ? "from two" : "", 2), "from two");
    // Async: several in flight, waited out of order.
    Tensor u = Tensor::from_vector(std::vector<float>(10, 1.0f));
    Tensor v = Tensor::from_vector(std::vector<float>(3, 2.0f));
    WorkHandle wu = pg.all_reduce(u), wv = pg.all_reduce(v);
    wv->wait();
    wu->wait();
    EXPECT_EQ(u.to_vector<float>()[9], 3.0f);
    EXPECT_EQ(v.to_vector<float>()[0], 6.0f);
    pg.barrier();
  });
}

TEST(StoreProcessGroup, BadBuffersAreRejected) {
  run_ranks(2, [&](int, ProcessGroup& pg) {
    Tensor ints = Tensor::zeros({4}, DType::kI32);
    EXPECT_THROW(pg.all_reduce(ints), InvalidArgument);
    EXPECT_THROW(
        pg.reduce_scatter(Tensor::zeros({5}, DType::kF32), Tensor::zeros({2}, DType::kF32)),
        InvalidArgument);
    pg.barrier();
  });
}

TEST(ProcessGroup, LocalAndMissingBackends) {
  auto pg = make_local_process_group();
  EXPECT_EQ(pg->world_size(), 1);
  Tensor t = Tensor::from_vector(std::vector<float>{1, 2});
  pg->all_reduce(t)->wait();
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2}));
  DistOptions o;
  o.world_size = 2;
  o.rank = 1;
  o.backend = "store";
  EXPECT_THROW(make_process_group(o, Device::cpu()), InvalidArgument);  // no MASTER_PORT
#ifndef VELA_HAS_NCCL
  o.master_port = 1;
  EXPECT_THROW(make_process_group(o, Device::cuda(0)), InvalidArgument);
#endif
}

TEST(BucketLayout, BucketsOwnersAndShards) {
  // 10 parameters of assorted sizes, backward order reversed.
  std::vector<int64_t> numels = {50, 3, 40, 40, 7, 100, 1, 60, 20, 5};
  std::vector<size_t> order;
  for (size_t i = numels.size(); i-- > 0;) order.push_back(i);
  BucketLayout layout(numels, order, 3, /*bucket_bytes=*/4 * 100);
  int64_t total = 0;
  std::vector<int> seen(numels.size(), 0);
  size_t expect_pos = 0;
  for (const Bucket& b : layout.buckets()) {
    std::vector<int64_t> used(3, 0);
    for (const BucketEntry& e : b.entries) {
      EXPECT_EQ(e.param, order[expect_pos++]);  // buckets follow the backward order
      ++seen[e.param];
      EXPECT_EQ(e.offset, used[static_cast<size_t>(e.owner)]);
      used[static_cast<size_t>(e.owner)] += e.numel;
      EXPECT_LE(used[static_cast<size_t>(e.owner)], b.shard_numel);
      total += e.numel;
    }
  }
  EXPECT_EQ(total, 326);
  for (int s : seen) EXPECT_EQ(s, 1);
  int64_t owned = 0;
  for (int r = 0; r < 3; ++r) owned += layout.owned_numel(r);
  EXPECT_EQ(owned, 326);
  EXPECT_THROW(BucketLayout(numels, {0, 1}, 2, 100), InvalidArgument);
}

}  // namespace
}  // namespace vela::dist
