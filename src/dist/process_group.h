// ProcessGroup: the collectives a data-parallel trainer needs, over one of several backends
// (ARCHITECTURE §9, docs/distributed.md):
//   local  world size 1: every collective is a no-op (or a copy), nothing is linked;
//   mpi    CPU ranks under `mpirun` (Debian's OpenMPI; built when CMake finds MPI, VELA_MPI);
//   store  CPU ranks without MPI (`vela train --nproc-per-node N` on the CPU): the messages go
//          through the TCP store (dist/tcp_store.h) - for tests and small CPU jobs, not speed;
//   nccl   CUDA tensors, one GPU per rank (built when CUDA and nccl.h / libnccl are found).
//
// Semantics (every backend): sums are DETERMINISTIC and in RANK ORDER. An all-reduce of n elements
// splits the buffer into world_size contiguous chunks; chunk c is reduced on rank c as
// ((x_0 + x_1) + x_2) + ... (x_r = rank r's values; bf16 is summed in f32 and rounded once on
// the CPU backends) and then gathered, so every rank gets the same bits, run after run, whatever
// the transport's own algorithm. reduce_scatter is the first half of that, all_gather the second.
// With two ranks the sum is exactly x_0 + x_1 (IEEE addition is commutative), i.e. the same bits a
// single process gets by adding the two halves of its gradient.
//
// Buffers are contiguous tensors on the backend's device (CPU for local / mpi / store, the rank's
// GPU for nccl); f32 and bf16 for the reductions, any dtype for all_gather and broadcast. The
// async calls return a Work handle; the buffers must stay untouched until wait() returns (on CUDA
// wait() makes the current stream wait for the collective, the host does not block). Collectives
// must be issued in the same order on every rank. Failures (a dead peer, a deadline of
// DistOptions::timeout) throw DistError from wait() or the blocking call. One thread issues the
// collectives of a group; wait() may be called from that thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "dist/tcp_store.h"

namespace vela::dist {

class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the operation is complete (CUDA: until the current stream is ordered after it).
  virtual void wait() = 0;
};
using WorkHandle = std::shared_ptr<Work>;

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  virtual const char* backend() const = 0;
  virtual Device device() const = 0;

  // In-place sum of `buf` (f32 or bf16) over the ranks, rank order.
  virtual WorkHandle all_reduce(Tensor buf) = 0;
  // `in` [world_size * n] -> `out` [n]: out = sum over ranks of in[rank() * n : (rank() + 1) * n].
  virtual WorkHandle reduce_scatter(Tensor in, Tensor out) = 0;
  // `in` [n] -> `out` [world_size * n], rank r's `in` at out[r * n : (r + 1) * n].
  virtual WorkHandle all_gather(Tensor in, Tensor out) = 0;
  // `buf` of rank `root` copied into every rank's `buf`.
  virtual WorkHandle broadcast(Tensor buf, int root) = 0;
  virtual void barrier() = 0;

  // Blocking sums of small host vectors (loss sums, token counts), rank order.
  virtual std::vector<double> all_reduce_host(std::vector<double> values) = 0;
  // Rank `root`'s bytes to everyone (paths, small state).
  virtual std::string broadcast_host(const std::string& bytes, int root) = 0;

 protected:
  ProcessGroup(int rank, int world_size) : rank_(rank), world_size_(world_size) {}
  int rank_ = 0, world_size_ = 1;
};

// How this process takes part in a job (dist/dist_env.h reads it from the environment).
struct DistOptions {
  int rank = 0, world_size = 1, local_rank = 0, local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  bool under_mpirun = false;                  // launched by mpirun (OMPI_COMM_WORLD_* variables)
  std::chrono::milliseconds timeout{300000};  // VELA_DIST_TIMEOUT (seconds)
  std::string backend;  // "" = pick (VELA_DIST_BACKEND=mpi|store|nccl overrides)
};

// The process group for `options` on `device`: local when world_size is 1; nccl for a CUDA
// device; for the CPU mpi under mpirun, else store. InvalidArgument / Unsupported (naming what to
// install or how to launch) when the needed backend is not built in.
std::shared_ptr<ProcessGroup> make_process_group(const DistOptions& options, Device device);
// A world-size-1 group.
std::shared_ptr<ProcessGroup> make_local_process_group(Device device = Device::cpu());

// Which optional backends this binary has ("mpi", "nccl"; "store" and "local" always).
std::vector<std::string> built_backends();

}  // namespace vela::dist
