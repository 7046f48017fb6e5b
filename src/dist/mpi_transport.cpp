// MPI as a Transport (process_group.h's "mpi" backend, compiled when CMake finds MPI): CPU ranks
// started by mpirun. MPI is initialized MPI_THREAD_SERIALIZED (the group's comm thread makes the
// collective calls, the constructing thread Init / Finalize) and errors return codes
// (MPI_ERRORS_RETURN), turned into DistError. Byte counts go as MPI_BYTE.
#include "dist/transport.h"

#ifdef VELA_HAS_MPI
#include <mpi.h>

#include "core/log.h"

namespace vela::dist {
namespace {

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  VELA_THROW(DistError, "MPI ", what, " failed: ", std::string(msg, static_cast<size_t>(len)),
             " (a peer rank died?)");
}

std::vector<int> ints(const std::vector<int64_t>& v) {
  return std::vector<int>(v.begin(), v.end());
}

class MpiTransport final : public Transport {
 public:
  explicit MpiTransport(const DistOptions& o) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "Init");
      VELA_CHECK_T(DistError, provided >= MPI_THREAD_SERIALIZED,
                   "MPI: this MPI library does not support MPI_THREAD_SERIALIZED");
      owns_ = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
    VELA_CHECK_T(DistError, rank_ == o.rank && world_size_ == o.world_size, "MPI: rank ", rank_,
                 " of ", world_size_, " but the environment says rank ", o.rank, " of ",
                 o.world_size);
  }
  ~MpiTransport() override {
    if (owns_) MPI_Finalize();
  }
  const char* name() const override { return "mpi"; }

  void alltoallv(const char* send, const std::vector<int64_t>& sc, const std::vector<int64_t>& sd,
                 char* recv, const std::vector<int64_t>& rc,
                 const std::vector<int64_t>& rd) override {
    auto a = ints(sc), b = ints(sd), c = ints(rc), d = ints(rd);
    check_mpi(MPI_Alltoallv(send, a.data(), b.data(), MPI_BYTE, recv, c.data(), d.data(), MPI_BYTE,
                            MPI_COMM_WORLD),
              "Alltoallv");
  }
  void allgatherv(const char* send, int64_t bytes, char* recv, const std::vector<int64_t>& rc,
                  const std::vector<int64_t>& rd) override {
    auto c = ints(rc), d = ints(rd);
    // In place when the caller's send block already sits at its slot of recv.
    const void* s = send == recv + rd[rank_] ? MPI_IN_PLACE : send;
    check_mpi(MPI_Allgatherv(s, static_cast<int>(bytes), MPI_BYTE, recv, c.data(), d.data(),
                             MPI_BYTE, MPI_COMM_WORLD),
              "Allgatherv");
  }
  void broadcast(char* buf, int64_t bytes, int root) override {
    check_mpi(MPI_Bcast(buf, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD), "Bcast");
  }
  void barrier() override { check_mpi(MPI_Barrier(MPI_COMM_WORLD), "Barrier"); }

 private:
  bool owns_ = false;
};

}  // namespace

std::unique_ptr<Transport> make_mpi_transport(const DistOptions& options) {
  return std::make_unique<MpiTransport>(options);
}

}  // namespace vela::dist

#else

namespace vela::dist {
std::unique_ptr<Transport> make_mpi_transport(const DistOptions&) {
  VELA_THROW(Unsupported,
             "this vela was built without MPI (VELA_MPI=OFF or no MPI found at configure time): "
             "install libopenmpi-dev and rebuild, or launch CPU ranks with "
             "`vela train --nproc-per-node N` (the store backend)");
}
}  // namespace vela::dist

#endif
