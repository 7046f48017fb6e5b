// The local (world size 1) process group and the backend factory; see process_group.h.
#include "dist/process_group.h"

#include "core/log.h"
#include "dist/cpu_process_group.h"
#include "dist/nccl_process_group.h"

namespace vela::dist {
namespace {

class DoneWork final : public Work {
 public:
  void wait() override {}
};

class LocalProcessGroup final : public ProcessGroup {
 public:
  explicit LocalProcessGroup(Device device) : ProcessGroup(0, 1), device_(device) {}
  const char* backend() const override { return "local"; }
  Device device() const override { return device_; }
  WorkHandle all_reduce(Tensor) override { return done(); }
  WorkHandle reduce_scatter(Tensor in, Tensor out) override {
    VELA_CHECK(in.numel() == out.numel(), "dist reduce_scatter: input ", in.str(),
               " must hold world_size (1) x output ", out.str());
    if (in.data_ptr() != out.data_ptr()) out.copy_(in.view(out.shape()));
    return done();
  }
  WorkHandle all_gather(Tensor in, Tensor out) override {
    VELA_CHECK(in.numel() == out.numel(), "dist all_gather: output ", out.str(),
               " must hold world_size (1) x input ", in.str());
    if (in.data_ptr() != out.data_ptr()) out.copy_(in.view(out.shape()));
    return done();
  }
  WorkHandle broadcast(Tensor, int root) override {
    VELA_CHECK(root == 0, "dist broadcast: root ", root, " is not a rank of a world of 1");
    return done();
  }
  void barrier() override {}
  std::vector<double> all_reduce_host(std::vector<double> v) override { return v; }
  std::string broadcast_host(const std::string& b, int) override { return b; }

 private:
  static WorkHandle done() { return std::make_shared<DoneWork>(); }
  Device device_;
};

}  // namespace

std::shared_ptr<ProcessGroup> make_local_process_group(Device device) {
  return std::make_shared<LocalProcessGroup>(device);
}

std::vector<std::string> built_backends() {
  std::vector<std::string> out = {"local", "store"};
#ifdef VELA_HAS_MPI
  out.push_back("mpi");
#endif
#ifdef VELA_HAS_NCCL
  out.push_back("nccl");
#endif
  return out;
}

std::shared_ptr<ProcessGroup> make_process_group(const DistOptions& o, Device device) {
  if (o.world_size == 1 && o.backend.empty()) return make_local_process_group(device);
  std::string backend = o.backend;
  if (backend.empty()) backend = device.is_cuda() ? "nccl" : o.under_mpirun ? "mpi" : "store";
  VELA_CHECK(device.is_cuda() == (backend == "nccl"), "dist: backend ", backend, " cannot run on ",
             device.str(), device.is_cuda() ? " (CUDA ranks use nccl)" : " (nccl needs CUDA)");
  VELA_CHECK(backend == "mpi" || o.master_port > 0, "dist: the ", backend, " backend of a ",
             o.world_size,
             "-rank job needs MASTER_PORT (and MASTER_ADDR when the ranks span hosts) for its "
             "store; `vela train --nproc-per-node N` sets both");
  VELA_LOG_INFO("[dist] rank ", o.rank, " of ", o.world_size, " (local rank ", o.local_rank,
                "), backend ", backend, " on ", device.str());
  if (backend == "nccl") return make_nccl_process_group(o, device);
  std::unique_ptr<Transport> t = backend == "mpi" ? make_mpi_transport(o) : make_store_transport(o);
  return std::make_shared<CpuProcessGroup>(std::move(t), o.timeout);
}

}  // namespace vela::dist
