// TcpStore: the small key-value store that bootstraps a data-parallel job (torchrun's c10d store
// idea, our own wire format). Rank 0 runs a TcpStoreServer on MASTER_ADDR:MASTER_PORT; every rank
// (rank 0 too, over loopback) talks to it through a TcpStoreClient. It hands out the NCCL unique
// id, serves barriers, carries the CPU "store" transport's messages (dist/store_transport.h) and
// is how a rank learns that another one died:
//   - each client says HELLO <rank> first and BYE before closing; a connection that ends without
//     BYE marks the job failed ("rank R disconnected ..."): every blocked and later get / wait
//     then fails with that message, so no rank hangs on a dead peer;
//   - every blocking call has a deadline (DistTimeout): past it the call throws DistError naming
//     the key and the seconds waited.
// Values are byte strings. set(key, value, n_readers) stores a value that is deleted after
// n_readers gets (0: kept until overwritten), so message keys do not pile up on the server.
// Thread safety: the server is internally synchronized; one client object is used by one thread at
// a time (a rank opens one client per thread that needs one).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"

namespace vela {
// A collective or store operation failed: a peer died, a deadline passed, a transport error.
// (In namespace vela so VELA_CHECK_T / VELA_THROW can name it.)
class DistError : public Error {
  using Error::Error;
};
}  // namespace vela

namespace vela::dist {

class TcpStoreServer {
 public:
  // Listens on `port` (0: an ephemeral port, see port()) on all interfaces, for `world_size`
  // ranks. IoError when the port cannot be bound.
  TcpStoreServer(int port, int world_size);
  // Waits (at most `linger`) for the clients to say BYE, then closes everything.
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  int port() const { return port_; }
  void set_linger(std::chrono::milliseconds linger) { linger_ = linger; }

 private:
  struct Value {
    std::string bytes;
    int readers_left = 0;  // 0: kept
  };
  void accept_loop();
  void serve(int fd);
  void mark_failed(const std::string& why);

  int listen_fd_ = -1;
  int port_ = 0;
  int world_size_ = 0;
  std::chrono::milliseconds linger_{10000};
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Value> values_;
  std::map<std::string, int64_t> counters_;
  std::string failed_;  // "" while every rank is alive
  std::vector<std::thread> conn_threads_;
  std::vector<int> conn_fds_;
  int n_open_ = 0;  // connections not yet closed
};

class TcpStoreClient {
 public:
  // Connects to host:port (retrying until `timeout`, the server may not listen yet) and says
  // HELLO. DistError when no connection comes up in time.
  TcpStoreClient(const std::string& host, int port, int rank, std::chrono::milliseconds timeout);
  ~TcpStoreClient();  // says BYE
  TcpStoreClient(const TcpStoreClient&) = delete;
  TcpStoreClient& operator=(const TcpStoreClient&) = delete;

  void set(const std::string& key, const std::string& value, int n_readers = 0);
  // Blocks until `key` exists (or the deadline / a failure).
  std::string get(const std::string& key);
  // Adds `delta` to the counter `key` (created at 0); returns the new value.
  int64_t add(const std::string& key, int64_t delta);
  // Blocks until the counter `key` reaches `target`.
  void wait_at_least(const std::string& key, int64_t target);
  // Blocks until the job is marked failed or the server goes away (returns the reason), or until
  // `timeout` passes (returns ""). Used by watchdog threads.
  std::string wait_for_failure(std::chrono::milliseconds timeout);
  // The barrier `name` over `world_size` ranks (each name used once per job).
  void barrier(const std::string& name, int world_size);

  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  std::string request(uint32_t op, const std::string& key, const std::string& value, int64_t arg,
                      std::chrono::milliseconds wait);
  int fd_ = -1;
  int rank_ = 0;
  std::string where_;  // host:port, for messages
  std::chrono::milliseconds timeout_;
};

}  // namespace vela::dist
