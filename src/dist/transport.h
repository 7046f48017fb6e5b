// Transport: blocking byte exchanges between the CPU ranks of a job, what CpuProcessGroup
// (dist/cpu_process_group.h) builds its deterministic collectives from. Two implementations:
// MPI (dist/mpi_transport.cpp, OpenMPI's MPI_Alltoallv / MPI_Allgatherv / MPI_Bcast) and the TCP
// store (dist/store_transport.cpp). Counts and displacements are in bytes, each below 2^31 (the
// process group splits larger collectives). Called from one thread (the group's comm thread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dist/process_group.h"

namespace vela::dist {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  // Rank r gets send[send_displs[r] .. + send_counts[r]) of every rank s into its
  // recv[recv_displs[s] .. + recv_counts[s]).
  virtual void alltoallv(const char* send, const std::vector<int64_t>& send_counts,
                         const std::vector<int64_t>& send_displs, char* recv,
                         const std::vector<int64_t>& recv_counts,
                         const std::vector<int64_t>& recv_displs) = 0;
  // Every rank's `send` (send_bytes) lands at recv[recv_displs[r] .. + recv_counts[r]).
  virtual void allgatherv(const char* send, int64_t send_bytes, char* recv,
                          const std::vector<int64_t>& recv_counts,
                          const std::vector<int64_t>& recv_displs) = 0;
  virtual void broadcast(char* buf, int64_t bytes, int root) = 0;
  virtual void barrier() = 0;

 protected:
  int rank_ = 0, world_size_ = 1;
};

// Built only with MPI (VELA_HAS_MPI); Unsupported otherwise.
std::unique_ptr<Transport> make_mpi_transport(const DistOptions& options);
std::unique_ptr<Transport> make_store_transport(const DistOptions& options);

}  // namespace vela::dist
