// NcclProcessGroup; see nccl_process_group.h.
#include "dist/nccl_process_group.h"

#ifdef VELA_HAS_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "core/cuda/stream.h"
#include "core/log.h"
#include "ops/elementwise.h"

namespace vela::dist {
namespace {

#define VELA_NCCL_CHECK(expr)                                                \
  do {                                                                       \
    ncclResult_t vela_r_ = (expr);                                           \
    if (vela_r_ != ncclSuccess)                                              \
      VELA_THROW(DistError, #expr, " failed: ", ncclGetErrorString(vela_r_), \
                 " (NCCL_DEBUG=INFO says more)");                            \
  } while (0)

ncclDataType_t nccl_type(DType dt) {
  switch (dt) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kF16:
      return ncclFloat16;
    case DType::kI32:
      return ncclInt32;
    case DType::kI64:
      return ncclInt64;
    case DType::kU8:
      return ncclUint8;
  }
  return ncclUint8;
}

class NcclProcessGroup;

class NcclWork final : public Work {
 public:
  NcclWork(cudaEvent_t done, std::vector<Tensor> keep) : done_(done), keep_(std::move(keep)) {}
  ~NcclWork() override { cudaEventDestroy(done_); }
  void wait() override { VELA_CUDA_CHECK(cudaStreamWaitEvent(cuda::current_stream(), done_, 0)); }

 private:
  cudaEvent_t done_;
  std::vector<Tensor> keep_;  // scratch the collective still uses
};

class NcclProcessGroup final : public ProcessGroup {
 public:
  NcclProcessGroup(const DistOptions& o, Device device)
      : ProcessGroup(o.rank, o.world_size), device_(device), timeout_(o.timeout) {
    VELA_CHECK(device.is_cuda(), "nccl backend needs a CUDA device, got ", device.str());
    cuda::DeviceGuard dg(device.index);
    if (o.rank == 0) server_ = std::make_unique<TcpStoreServer>(o.master_port, o.world_size);
    const std::string host = o.rank == 0 ? "127.0.0.1" : o.master_addr;
    store_ = std::make_unique<TcpStoreClient>(host, o.master_port, o.rank, o.timeout);
    ncclUniqueId id;
    if (o.rank == 0) {
      VELA_NCCL_CHECK(ncclGetUniqueId(&id));
      store_->set("nccl/unique_id", std::string(reinterpret_cast<char*>(&id), sizeof(id)),
                  o.world_size - 1);
    } else {
      const std::string v = store_->get("nccl/unique_id");
      VELA_CHECK_T(DistError, v.size() == sizeof(id), "nccl: bad unique id from rank 0");
      std::memcpy(&id, v.data(), sizeof(id));
    }
    VELA_NCCL_CHECK(ncclCommInitRank(&comm_, o.world_size, id, o.rank));
    VELA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    watch_store_ = std::make_unique<TcpStoreClient>(host, o.master_port, o.rank, o.timeout);
    watchdog_ = std::thread([this] { watch(); });
    store_->barrier("nccl_up", world_size_);
  }

  ~NcclProcessGroup() override {
    try {
      cudaStreamSynchronize(stream_);
      store_->barrier("nccl_down", world_size_);
    } catch (...) {
    }
    stop_ = true;
    if (watchdog_.joinable()) watchdog_.join();
    watch_store_.reset();
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
    store_.reset();
    server_.reset();
  }

  const char* backend() const override { return "nccl"; }
  Device device() const override { return device_; }

  WorkHandle all_reduce(Tensor buf) override {
    check(buf, "all_reduce", true);
    cuda::DeviceGuard dg(device_.index);
    begin();
    const int W = world_size_, me = rank_;
    const int64_t n = buf.numel();
    auto lo = [&](int r) { return n * r / W; };
    const int64_t c = lo(me + 1) - lo(me);
    Tensor recv = Tensor::empty({std::max<int64_t>(1, W * c)}, buf.dtype(), device_);
    const size_t es = buf.element_size();
    char* p = static_cast<char*>(buf.data_ptr());
    char* q = static_cast<char*>(recv.data_ptr());
    const ncclDataType_t t = nccl_type(buf.dtype());
    VELA_NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < W; ++r) {
      const int64_t cr = lo(r + 1) - lo(r);
      if (r == me) continue;
      if (cr > 0) VELA_NCCL_CHECK(ncclSend(p + lo(r) * es, cr, t, r, comm_, stream_));
      if (c > 0) VELA_NCCL_CHECK(ncclRecv(q + r * c * es, c, t, r, comm_, stream_));
    }
    VELA_NCCL_CHECK(ncclGroupEnd());
    if (c > 0) {
      // Own chunk into its slot, then ((x_0 + x_1) + x_2) ... into buf's chunk.
      VELA_CUDA_CHECK(cudaMemcpyAsync(q + me * c * es, p + lo(me) * es, c * es,
                                      cudaMemcpyDeviceToDevice, stream_));
      Tensor flat = buf.view({n});
      Tensor mine = flat.slice(0, lo(me), lo(me) + c);
      cuda::StreamGuard sg(stream_);
      if (W == 1) {
        // Nothing to add.
      } else {
        ops::add(recv.slice(0, 0, c), recv.slice(0, c, 2 * c), mine);
        for (int r = 2; r < W; ++r) ops::add(mine, recv.slice(0, r * c, (r + 1) * c), mine);
      }
    }
    VELA_NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < W; ++r) {
      const int64_t cr = lo(r + 1) - lo(r);
      if (r == me) continue;
      if (c > 0) VELA_NCCL_CHECK(ncclSend(p + lo(me) * es, c, t, r, comm_, stream_));
      if (cr > 0) VELA_NCCL_CHECK(ncclRecv(p + lo(r) * es, cr, t, r, comm_, stream_));
    }
    VELA_NCCL_CHECK(ncclGroupEnd());
    return end("all_reduce of " + buf.str(), {buf, recv});
  }

  WorkHandle reduce_scatter(Tensor in, Tensor out) override {
    check(in, "reduce_scatter", true);
    check(out, "reduce_scatter", true);
    VELA_CHECK(in.dtype() == out.dtype() && in.numel() == out.numel() * world_size_,
               "dist reduce_scatter: input ", in.str(), " must hold world_size x output ",
               out.str());
    cuda::DeviceGuard dg(device_.index);
    begin();
    const int W = world_size_, me = rank_;
    const int64_t n = out.numel();
    const size_t es = in.element_size();
    Tensor recv = Tensor::empty({W * n}, in.dtype(), device_);
    const char* p = static_cast<const char*>(in.data_ptr());
    char* q = static_cast<char*>(recv.data_ptr());
    const ncclDataType_t t = nccl_type(in.dtype());
    VELA_NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < W; ++r) {
      if (r == me) continue;
      VELA_NCCL_CHECK(ncclSend(p + r * n * es, n, t, r, comm_, stream_));
      VELA_NCCL_CHECK(ncclRecv(q + r * n * es, n, t, r, comm_, stream_));
    }
    VELA_NCCL_CHECK(ncclGroupEnd());
    VELA_CUDA_CHECK(cudaMemcpyAsync(q + me * n * es, p + me * n * es, n * es,
                                    cudaMemcpyDeviceToDevice, stream_));
    Tensor o = out.view({n});
    {
      cuda::StreamGuard sg(stream_);
      if (W == 1) {
        o.copy_(recv);
      } else {
        ops::add(recv.slice(0, 0, n), recv.slice(0, n, 2 * n), o);
        for (int r = 2; r < W; ++r) ops::add(o, recv.slice(0, r * n, (r + 1) * n), o);
      }
    }
    return end("reduce_scatter of " + in.str(), {in, out, recv});
  }

  WorkHandle all_gather(Tensor in, Tensor out) override {
    check(in, "all_gather", false);
    check(out, "all_gather", false);
    VELA_CHECK(in.dtype() == out.dtype() && out.numel() == in.numel() * world_size_,
               "dist all_gather: output ", out.str(), " must hold world_size x input ", in.str());
    cuda::DeviceGuard dg(device_.index);
    begin();
    VELA_NCCL_CHECK(ncclAllGather(in.data_ptr(), out.data_ptr(), in.numel(), nccl_type(in.dtype()),
                                  comm_, stream_));
    return end("all_gather of " + in.str(), {in, out});
  }

  WorkHandle broadcast(Tensor buf, int root) override {
    check(buf, "broadcast", false);
    cuda::DeviceGuard dg(device_.index);
    begin();
    VELA_NCCL_CHECK(ncclBroadcast(buf.data_ptr(), buf.data_ptr(), buf.numel(),
                                  nccl_type(buf.dtype()), root, comm_, stream_));
    return end("broadcast of " + buf.str(), {buf});
  }

  void barrier() override {
    cuda::DeviceGuard dg(device_.index);
    VELA_CUDA_CHECK(cudaStreamSynchronize(stream_));
    store_->barrier("b/" + std::to_string(seq_++), world_size_);
  }

  std::vector<double> all_reduce_host(std::vector<double> v) override {
    const std::string k = "h/" + std::to_string(seq_++) + "/";
    store_->set(k + std::to_string(rank_),
                std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double)),
                world_size_ - 1);
    std::vector<std::vector<double>> all(world_size_);
    for (int r = 0; r < world_size_; ++r) {
      if (r == rank_) {
        all[r] = v;
        continue;
      }
      const std::string s = store_->get(k + std::to_string(r));
      VELA_CHECK_T(DistError, s.size() == v.size() * sizeof(double), "rank ", r, " sent ", s.size(),
                   " bytes of host values, expected ", v.size() * sizeof(double));
      all[r].resize(v.size());
      std::memcpy(all[r].data(), s.data(), s.size());
    }
    for (size_t i = 0; i < v.size(); ++i) {
      double acc = all[0][i];
      for (int r = 1; r < world_size_; ++r) acc += all[r][i];
      v[i] = acc;
    }
    return v;
  }

  std::string broadcast_host(const std::string& bytes, int root) override {
    const std::string k = "hb/" + std::to_string(seq_++);
    if (rank_ == root) {
      if (world_size_ > 1) store_->set(k, bytes, world_size_ - 1);
      return bytes;
    }
    return store_->get(k);
  }

 private:
  struct Pending {
    cudaEvent_t event;
    std::chrono::steady_clock::time_point start;
    std::string what;
  };

  void check(const Tensor& t, const char* op, bool reduce) const {
    VELA_CHECK(t.defined() && t.device() == device_ && t.is_contiguous(), "dist ", op,
               ": buffers must be contiguous on ", device_.str(), ", got ",
               t.defined() ? t.str() : std::string("undefined"));
    VELA_CHECK(!reduce || t.dtype() == DType::kF32 || t.dtype() == DType::kBF16, "dist ", op,
               ": f32 or bf16 to be summed, got ", dtype_name(t.dtype()));
    VELA_CHECK_T(DistError, !aborted_, "dist: the NCCL communicator was aborted");
  }
  // The group's stream waits for the caller's current stream.
  void begin() {
    cudaEvent_t ready;
    VELA_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    VELA_CUDA_CHECK(cudaEventRecord(ready, cuda::current_stream()));
    VELA_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready, 0));
    cudaEventDestroy(ready);
  }
  WorkHandle end(std::string what, std::vector<Tensor> keep) {
    cudaEvent_t done, watched;
    VELA_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    VELA_CUDA_CHECK(cudaEventRecord(done, stream_));
    VELA_CUDA_CHECK(cudaEventCreateWithFlags(&watched, cudaEventDisableTiming));
    VELA_CUDA_CHECK(cudaEventRecord(watched, stream_));
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.push_back({watched, std::chrono::steady_clock::now(), std::move(what)});
    }
    return std::make_shared<NcclWork>(done, std::move(keep));
  }

  [[noreturn]] void fail(const std::string& why) {
    VELA_LOG_ERROR("[dist] rank ", rank_, ": ", why,
                   "; aborting the NCCL communicator and exiting (status ", kExitNcclFailure, ")");
    aborted_ = true;
    ncclCommAbort(comm_);
    std::fflush(nullptr);
    std::_Exit(kExitNcclFailure);
  }

  void watch() {
    while (!stop_) {
      const std::string dead = watch_store_->wait_for_failure(std::chrono::milliseconds(500));
      if (stop_) return;
      if (!dead.empty()) fail(dead);
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(comm_, &async) == ncclSuccess && async != ncclSuccess)
        fail(std::string("NCCL reported ") + ncclGetErrorString(async));
      std::lock_guard<std::mutex> lock(mu_);
      while (!pending_.empty()) {
        Pending& p = pending_.front();
        const cudaError_t q = cudaEventQuery(p.event);
        if (q == cudaSuccess) {
          cudaEventDestroy(p.event);
          pending_.pop_front();
          continue;
        }
        if (q != cudaErrorNotReady) fail(std::string("CUDA error in ") + p.what);
        if (std::chrono::steady_clock::now() - p.start > timeout_)
          fail(p.what + " did not finish within " + std::to_string(timeout_.count() / 1000) +
               " s (a peer rank died or hangs)");
        break;
      }
    }
  }

  Device device_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStoreClient> store_, watch_store_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::thread watchdog_;
  std::atomic<bool> stop_{false}, aborted_{false};
  std::mutex mu_;
  std::deque<Pending> pending_;
  uint64_t seq_ = 0;
};

}  // namespace

std::shared_ptr<ProcessGroup> make_nccl_process_group(const DistOptions& options, Device device) {
  return std::make_shared<NcclProcessGroup>(options, device);
}

}  // namespace vela::dist

#else

namespace vela::dist {
std::shared_ptr<ProcessGroup> make_nccl_process_group(const DistOptions&, Device) {
  VELA_THROW(Unsupported,
             "this vela was built without NCCL: configure with CUDA and nccl.h / libnccl "
             "(VELA_NCCL_ROOT=<dir holding include/nccl.h and lib/libnccl.so*>), or train on the "
             "CPU ranks (mpirun or the store backend)");
}
}  // namespace vela::dist

#endif
