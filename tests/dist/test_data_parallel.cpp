// DataParallel (train/data_parallel.h) with two ranks as threads over the store backend, on a
// hand-made parameter list: a bucket launches only when armed and when all its gradients are
// final, in bucket order; DDP leaves every rank with the rank-order sums; ZeRO-1 gives each owner
// its summed gradients and, after an "optimizer step" on the owned values, every rank the
// updated weights; the global norm is the same in both modes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include "dist/launcher.h"
#include "dist/process_group.h"
#include "train/data_parallel.h"

namespace vela {
namespace {

ParameterList make_params(int rank) {
  ParameterList ps;
  const int64_t sizes[4] = {6, 3, 5, 4};
  for (int i = 0; i < 4; ++i) {
    Parameter p;
    p.name = "p" + std::to_string(i);
    std::vector<float> v(static_cast<size_t>(sizes[i])), g(v.size());
    for (size_t j = 0; j < v.size(); ++j) {
      v[j] = 1.0f + static_cast<float>(i) + 0.1f * static_cast<float>(j);  // same on all ranks
      g[j] = 0.5f * static_cast<float>(rank + 1) + 0.01f * static_cast<float>(i * 10 + j);
    }
    p.value = Tensor::from_vector(v);
    p.grad = Tensor::from_vector(g);
    ps.push_back(p);
  }
  return ps;
}

template <typename Fn>
void two_ranks(Fn fn) {
  const int port = dist::pick_free_port();
  std::string errors[2];
  std::thread t[2];
  for (int r = 0; r < 2; ++r) {
    t[r] = std::thread([&, r] {
      try {
        dist::DistOptions o;
        o.rank = r;
        o.world_size = 2;
        o.master_port = port;
        o.backend = "store";
        o.timeout = std::chrono::milliseconds(20000);
        fn(r, dist::make_process_group(o, Device::cpu()));
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& x : t) x.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

void run_mode(int zero) {
  double norms[2] = {0, 0};
  two_ranks([&](int rank, std::shared_ptr<dist::ProcessGroup> pg) {
    ParameterList params = make_params(rank);
    DataParallelConfig cfg;
    cfg.zero = zero;
    cfg.bucket_mb = 8.0 * 4 / (1024 * 1024);  // 8 floats: buckets {p3, p2}, {p1, p0}
    DataParallel dp(pg, params, cfg, {3, 2, 1, 0});
    ASSERT_EQ(dp.layout().buckets().size(), 2u);
    // A non-final micro-batch: the hook reports gradients, nothing is sent.
    dp.grads_ready({3, 2, 1, 0});
    EXPECT_EQ(dp.n_bucket_launches(), 0);
    // The final one: bucket 1 is not launched before bucket 0 is complete.
    dp.arm();
    dp.grads_ready({1, 0});
    EXPECT_EQ(dp.n_bucket_launches(), 0);
    dp.grads_ready({3});
    EXPECT_EQ(dp.n_bucket_launches(), 0);
    dp.grads_ready({2});
    EXPECT_EQ(dp.n_bucket_launches(), 2);
    dp.finish_gradients();
    EXPECT_EQ(dp.n_bucket_launches(), 2);
    std::vector<size_t> owned;
    for (const Parameter& p : dp.optimizer_params()) owned.push_back(std::stoul(p.name.substr(1)));
    if (zero == 0) EXPECT_EQ(owned.size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
      const bool mine = zero == 0 || std::find(owned.begin(), owned.end(), i) != owned.end();
      if (!mine) continue;
      std::vector<float> g = params[i].grad.to_vector<float>();
      const std::vector<float> a = make_params(0)[i].grad.to_vector<float>();
      const std::vector<float> b = make_params(1)[i].grad.to_vector<float>();
      for (size_t j = 0; j < g.size(); ++j) ASSERT_EQ(g[j], a[j] + b[j]) << "param " << i;
    }
    norms[rank] = dp.clip_grad_norm(0.0);
    // "Optimizer step" on the owned values, then the all-gather.
    for (Parameter& p : dp.optimizer_params()) {
      float* v = p.value.data<float>();
      for (int64_t j = 0; j < p.value.numel(); ++j) v[j] = -v[j];
    }
    dp.after_optimizer_step();
    if (zero == 1) {
      const ParameterList fresh = make_params(rank);
      for (size_t i = 0; i < 4; ++i) {
        std::vector<float> v = params[i].value.to_vector<float>(),
                           w = fresh[i].value.to_vector<float>();
        for (size_t j = 0; j < v.size(); ++j) ASSERT_EQ(v[j], -w[j]) << "weights of p" << i;
      }
    }
  });
  EXPECT_EQ(norms[0], norms[1]);
  double sq = 0;
  for (size_t i = 0; i < 4; ++i) {
    std::vector<float> a = make_params(0)[i].grad.to_vector<float>(),
                       b = make_params(1)[i].grad.to_vector<float>();
    for (size_t j = 0; j < a.size(); ++j) sq += double(a[j] + b[j]) * double(a[j] + b[j]);
  }
  EXPECT_NEAR(norms[0], std::sqrt(sq), 1e-12 * std::sqrt(sq));
}

TEST(DataParallel, DdpSumsOnlyTheFinalMicroBatchInBucketOrder) { run_mode(0); }
TEST(DataParallel, Zero1ReducesToOwnersAndGathersWeights) { run_mode(1); }

}  // namespace
}  // namespace vela
