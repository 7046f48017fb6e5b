// The TCP store as a Transport (process_group.h's "store" backend): every message is a store value
// read once by its receiver (deleted after), keyed by a per-job sequence number that all ranks
// advance in the same order. Rank 0's process hosts the store server. Slow (everything passes
// through rank 0's server) but it needs nothing installed, reports a dead peer at once (the
// server sees its connection drop) and lets `vela train --nproc-per-node N` run CPU ranks.
#include <cstring>

#include "dist/transport.h"

namespace vela::dist {
namespace {

class StoreTransport final : public Transport {
 public:
  explicit StoreTransport(const DistOptions& o) {
    rank_ = o.rank;
    world_size_ = o.world_size;
    if (o.rank == 0) server_ = std::make_unique<TcpStoreServer>(o.master_port, o.world_size);
    client_ = std::make_unique<TcpStoreClient>(o.rank == 0 ? "127.0.0.1" : o.master_addr,
                                               o.master_port, o.rank, o.timeout);
    client_->barrier("store_transport_up", world_size_);
  }
  ~StoreTransport() override {
    try {
      client_->barrier("store_transport_down", world_size_);
    } catch (...) {
    }
    client_.reset();  // says BYE before the server (rank 0) waits for everyone's
    server_.reset();
  }
  const char* name() const override { return "store"; }

  void alltoallv(const char* send, const std::vector<int64_t>& sc, const std::vector<int64_t>& sd,
                 char* recv, const std::vector<int64_t>& rc,
                 const std::vector<int64_t>& rd) override {
    const std::string k = "a2a/" + std::to_string(seq_++) + "/";
    for (int r = 0; r < world_size_; ++r)
      if (r != rank_)
        client_->set(k + std::to_string(rank_) + ">" + std::to_string(r),
                     std::string(send + sd[r], static_cast<size_t>(sc[r])), 1);
    std::memcpy(recv + rd[rank_], send + sd[rank_], static_cast<size_t>(sc[rank_]));
    for (int s = 0; s < world_size_; ++s) {
      if (s == rank_) continue;
      const std::string v = client_->get(k + std::to_string(s) + ">" + std::to_string(rank_));
      VELA_CHECK_T(DistError, static_cast<int64_t>(v.size()) == rc[s], "store transport: rank ", s,
                   " sent ", v.size(), " bytes, expected ", rc[s]);
      std::memcpy(recv + rd[s], v.data(), v.size());
    }
  }

  void allgatherv(const char* send, int64_t bytes, char* recv, const std::vector<int64_t>& rc,
                  const std::vector<int64_t>& rd) override {
    const std::string k = "ag/" + std::to_string(seq_++) + "/";
    if (world_size_ > 1)
      client_->set(k + std::to_string(rank_), std::string(send, static_cast<size_t>(bytes)),
                   world_size_ - 1);
    std::memmove(recv + rd[rank_], send, static_cast<size_t>(bytes));
    for (int s = 0; s < world_size_; ++s) {
      if (s == rank_) continue;
      const std::string v = client_->get(k + std::to_string(s));
      VELA_CHECK_T(DistError, static_cast<int64_t>(v.size()) == rc[s], "store transport: rank ", s,
                   " gathered ", v.size(), " bytes, expected ", rc[s]);
      std::memcpy(recv + rd[s], v.data(), v.size());
    }
  }

  void broadcast(char* buf, int64_t bytes, int root) override {
    const std::string k = "bc/" + std::to_string(seq_++);
    if (rank_ == root) {
      if (world_size_ > 1)
        client_->set(k, std::string(buf, static_cast<size_t>(bytes)), world_size_ - 1);
      return;
    }
    const std::string v = client_->get(k);
    VELA_CHECK_T(DistError, static_cast<int64_t>(v.size()) == bytes, "store transport: rank ", root,
                 " broadcast ", v.size(), " bytes, expected ", bytes);
    std::memcpy(buf, v.data(), v.size());
  }

  void barrier() override { client_->barrier(std::to_string(seq_++), world_size_); }

 private:
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStoreClient> client_;
  uint64_t seq_ = 0;
};

}  // namespace

std::unique_ptr<Transport> make_store_transport(const DistOptions& options) {
  return std::make_unique<StoreTransport>(options);
}

}  // namespace vela::dist
