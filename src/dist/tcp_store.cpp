// TcpStore server and client; see tcp_store.h. Wire format (little-endian, this host's layout):
// request = {u32 op, u32 key_bytes, u64 value_bytes, i64 arg, i64 wait_ms} key value;
// reply = {u32 status (0 ok, 1 failed, 2 deadline), u64 bytes} payload.
#include "dist/tcp_store.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/log.h"

namespace vela::dist {
namespace {

enum Op : uint32_t { kHello = 1, kSet, kGet, kAdd, kWaitGe, kWaitFail, kBye };
enum Status : uint32_t { kOk = 0, kFailed = 1, kDeadline = 2 };

struct RequestHeader {
  uint32_t op, key_bytes;
  uint64_t value_bytes;
  int64_t arg, wait_ms;
};
struct ReplyHeader {
  uint32_t status, pad;
  uint64_t bytes;
};

// Reads exactly n bytes; false on EOF / error. With a deadline (ms >= 0) DistError past it.
bool read_all(int fd, void* buf, size_t n, int64_t deadline_ms = -1) {
  auto* p = static_cast<char*>(buf);
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
  while (n > 0) {
    if (deadline_ms >= 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            end - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) return false;
      pollfd pfd{fd, POLLIN, 0};
      const int rc = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
      if (rc < 0 && errno == EINTR) continue;
      if (rc <= 0) continue;
    }
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool write_all(int fd, const void* buf, size_t n) {
  const auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool reply(int fd, Status status, const std::string& payload) {
  ReplyHeader h{status, 0, payload.size()};
  return write_all(fd, &h, sizeof(h)) && write_all(fd, payload.data(), payload.size());
}

// Whether the peer of `fd` has closed its end (nothing more to read and EOF pending).
bool peer_closed(int fd) {
  pollfd pfd{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&pfd, 1, 0) <= 0) return false;
  if (pfd.revents & (POLLHUP | POLLERR | POLLRDHUP)) return true;
  char c;
  return ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

}  // namespace

// ---- server ----

TcpStoreServer::TcpStoreServer(int port, int world_size) : world_size_(world_size) {
  listen_fd_ = ::socket(AF_INET6, SOCK_STREAM, 0);
  bool v6 = listen_fd_ >= 0;
  if (!v6) listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  VELA_CHECK_T(IoError, listen_fd_ >= 0, "store: socket() failed: ", std::strerror(errno));
  int one = 1, zero = 0;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int rc;
  if (v6) {
    ::setsockopt(listen_fd_, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  }
  if (rc != 0) {
    const int err = errno;
    ::close(listen_fd_);
    VELA_THROW(IoError, "store: cannot listen on port ", port, ": ", std::strerror(err),
               " (is another job using MASTER_PORT ", port, "?)");
  }
  ::listen(listen_fd_, 128);
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len);
  port_ = ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                   : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  accept_thread_ = std::thread([this] { accept_loop(); });
}

TcpStoreServer::~TcpStoreServer() {
  {
    // Let the other ranks finish their last requests and say BYE.
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, linger_, [&] { return n_open_ == 0; });
    stopping_ = true;
    for (int fd : conn_fds_) ::shutdown(fd, SHUT_RDWR);
    cv_.notify_all();
  }
  ::shutdown(listen_fd_, SHUT_RDWR);
  ::close(listen_fd_);
  if (accept_thread_.joinable()) accept_thread_.join();
  for (std::thread& t : conn_threads_)
    if (t.joinable()) t.join();
  for (int fd : conn_fds_) ::close(fd);
}

void TcpStoreServer::accept_loop() {
  while (!stopping_) {
    const int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) {
      if (errno == EINTR) continue;
      return;  // listening socket shut down
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    conn_fds_.push_back(fd);
    ++n_open_;
    conn_threads_.emplace_back([this, fd] { serve(fd); });
  }
}

void TcpStoreServer::mark_failed(const std::string& why) {
  // Caller holds mu_.
  if (failed_.empty()) {
    failed_ = why;
    VELA_LOG_ERROR("[dist] ", why);
  }
  cv_.notify_all();
}

void TcpStoreServer::serve(int fd) {
  int rank = -1;
  bool bye = false;
  for (;;) {
    RequestHeader h{};
    if (!read_all(fd, &h, sizeof(h))) break;
    std::string key(h.key_bytes, '\0'), value(h.value_bytes, '\0');
    if (!read_all(fd, key.data(), key.size()) || !read_all(fd, value.data(), value.size())) break;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(h.wait_ms);
    Status status = kOk;
    std::string out;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Waits for `ready` in slices, watching this client's socket and the job's failure flag.
      auto wait_until = [&](auto ready, bool fail_wakes) -> bool {
        while (!ready()) {
          if (stopping_) return false;
          if (fail_wakes && !failed_.empty()) return false;
          if (std::chrono::steady_clock::now() >= deadline) return false;
          cv_.wait_for(lock, std::chrono::milliseconds(100));
          if (peer_closed(fd)) return false;
        }
        return true;
      };
      switch (h.op) {
        case kHello:
          rank = static_cast<int>(h.arg);
          break;
        case kSet:
          values_[key] = Value{std::move(value), static_cast<int>(h.arg)};
          cv_.notify_all();
          break;
        case kGet: {
          if (wait_until([&] { return values_.count(key) != 0; }, true)) {
            auto it = values_.find(key);
            out = it->second.bytes;
            if (it->second.readers_left > 0 && --it->second.readers_left == 0) values_.erase(it);
          } else if (!failed_.empty()) {
            status = kFailed;
            out = failed_;
          } else {
            status = kDeadline;
          }
          break;
        }
        case kAdd: {
          const int64_t v = counters_[key] += h.arg;
          out.assign(reinterpret_cast<const char*>(&v), sizeof(v));
          cv_.notify_all();
          break;
        }
        case kWaitGe:
          if (!wait_until([&] { return counters_[key] >= h.arg; }, true)) {
            status = failed_.empty() ? kDeadline : kFailed;
            out = failed_;
          }
          break;
        case kWaitFail:
          wait_until([&] { return !failed_.empty(); }, false);
          out = failed_;
          break;
        case kBye:
          bye = true;
          break;
        default:
          status = kFailed;
          out = "store: unknown request " + std::to_string(h.op);
      }
    }
    if (!reply(fd, status, out)) break;
    if (bye) break;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!bye && !stopping_)
    mark_failed("rank " + std::to_string(rank) +
                " disconnected from the store without saying goodbye (it exited or was killed)");
  --n_open_;
  cv_.notify_all();
}

// ---- client ----

TcpStoreClient::TcpStoreClient(const std::string& host, int port, int rank,
                               std::chrono::milliseconds timeout)
    : rank_(rank), where_(host + ":" + std::to_string(port)), timeout_(timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last_error = "no attempt";
  while (fd_ < 0) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_socktype = SOCK_STREAM;
    const int g = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (g != 0) {
      last_error = gai_strerror(g);
    } else {
      for (addrinfo* a = res; a != nullptr && fd_ < 0; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) continue;
        if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          fd_ = fd;
        } else {
          last_error = std::strerror(errno);
          ::close(fd);
        }
      }
      ::freeaddrinfo(res);
    }
    if (fd_ >= 0) break;
    if (std::chrono::steady_clock::now() >= deadline)
      VELA_THROW(DistError, "rank ", rank, ": cannot reach the store at ", where_, " within ",
                 timeout.count() / 1000.0, " s (", last_error,
                 "); is rank 0 running and MASTER_ADDR / MASTER_PORT right?");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  request(kHello, "", "", rank, std::chrono::milliseconds(0));
}

TcpStoreClient::~TcpStoreClient() {
  if (fd_ < 0) return;
  try {
    request(kBye, "", "", 0, std::chrono::milliseconds(0));
  } catch (...) {
  }
  ::close(fd_);
}

std::string TcpStoreClient::request(uint32_t op, const std::string& key, const std::string& value,
                                    int64_t arg, std::chrono::milliseconds wait) {
  RequestHeader h{op, static_cast<uint32_t>(key.size()), value.size(), arg, wait.count()};
  if (!write_all(fd_, &h, sizeof(h)) || !write_all(fd_, key.data(), key.size()) ||
      !write_all(fd_, value.data(), value.size()))
    VELA_THROW(DistError, "rank ", rank_, ": lost the connection to the store at ", where_,
               " (rank 0 exited or was killed)");
  ReplyHeader r{};
  // The server enforces `wait`; the slack covers a slow network.
  if (!read_all(fd_, &r, sizeof(r), wait.count() + 30000))
    VELA_THROW(DistError, "rank ", rank_, ": lost the connection to the store at ", where_,
               " while waiting for '", key, "' (rank 0 exited or was killed)");
  std::string out(r.bytes, '\0');
  if (!read_all(fd_, out.data(), out.size(), 30000))
    VELA_THROW(DistError, "rank ", rank_, ": lost the connection to the store at ", where_);
  if (r.status == kFailed) VELA_THROW(DistError, "rank ", rank_, ": ", out);
  if (r.status == kDeadline)
    VELA_THROW(
        DistError, "rank ", rank_, ": timed out after ", wait.count() / 1000.0, " s waiting for '",
        key, "' from the other ranks (a rank is stuck or gone; VELA_DIST_TIMEOUT sets the limit)");
  return out;
}

void TcpStoreClient::set(const std::string& key, const std::string& value, int n_readers) {
  request(kSet, key, value, n_readers, std::chrono::milliseconds(0));
}

std::string TcpStoreClient::get(const std::string& key) {
  return request(kGet, key, "", 0, timeout_);
}

int64_t TcpStoreClient::add(const std::string& key, int64_t delta) {
  const std::string v = request(kAdd, key, "", delta, std::chrono::milliseconds(0));
  int64_t out = 0;
  std::memcpy(&out, v.data(), sizeof(out));
  return out;
}

void TcpStoreClient::wait_at_least(const std::string& key, int64_t target) {
  request(kWaitGe, key, "", target, timeout_);
}

std::string TcpStoreClient::wait_for_failure(std::chrono::milliseconds timeout) {
  try {
    return request(kWaitFail, "", "", 0, timeout);
  } catch (const DistError& e) {
    return e.what();
  }
}

void TcpStoreClient::barrier(const std::string& name, int world_size) {
  add("barrier/" + name, 1);
  wait_at_least("barrier/" + name, world_size);
}

}  // namespace vela::dist
