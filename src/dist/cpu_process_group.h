// CpuProcessGroup: the ProcessGroup of CPU ranks over a Transport (MPI or the TCP store). Every
// collective runs on one communication thread in issue order, so an all-reduce launched from a
// backward hook proceeds while the trainer thread computes the next layers (real overlap on a CPU
// with spare cores; MPI is initialized MPI_THREAD_SERIALIZED and only that thread calls it).
//
// Deterministic rank-order sums (process_group.h): all_reduce = alltoallv (chunk c of every rank
// to rank c) + a local ((x_0 + x_1) + x_2) ... sum + allgatherv; bf16 is summed in f32 and rounded
// once. wait() gives up after DistOptions::timeout + 30 s: a collective that never completes means
// a peer is gone in a way the transport did not report, and since a thread blocked inside MPI
// cannot be cancelled the process then logs the error and exits with status 75 (the other ranks
// then see it gone: mpirun stops the job, the store reports the disconnect).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "dist/process_group.h"
#include "dist/transport.h"

namespace vela::dist {

inline constexpr int kExitCollectiveTimeout = 75;

class CpuProcessGroup final : public ProcessGroup {
 public:
  CpuProcessGroup(std::unique_ptr<Transport> transport, std::chrono::milliseconds timeout);
  ~CpuProcessGroup() override;

  const char* backend() const override { return transport_->name(); }
  Device device() const override { return Device::cpu(); }
  WorkHandle all_reduce(Tensor buf) override;
  WorkHandle reduce_scatter(Tensor in, Tensor out) override;
  WorkHandle all_gather(Tensor in, Tensor out) override;
  WorkHandle broadcast(Tensor buf, int root) override;
  void barrier() override;
  std::vector<double> all_reduce_host(std::vector<double> values) override;
  std::string broadcast_host(const std::string& bytes, int root) override;

 private:
  class Job;
  WorkHandle submit(std::string what, std::function<void()> fn);
  void run_queue();

  std::unique_ptr<Transport> transport_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

// out[i] = ((parts[0][i] + parts[1][i]) + ...) for `n_parts` consecutive [n] arrays of `dtype`
// (f32; bf16 accumulated in f32 and rounded once). The one reduction every CPU collective uses.
void sum_in_rank_order(DType dtype, const char* parts, int n_parts, int64_t n, char* out);

}  // namespace vela::dist
