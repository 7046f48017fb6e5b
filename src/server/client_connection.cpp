// Socket lookup by address pair over the process's descriptors (/proc/self/fd), then poll(2).
#include "server/client_connection.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

namespace vela {

namespace {

// Port and textual address of a sockaddr (IPv4 or IPv6).
bool describe(const sockaddr_storage& ss, int& port, std::string& addr) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    port = ntohs(a->sin_port);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
  } else if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    port = ntohs(a->sin6_port);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
  } else {
    return false;
  }
  addr = buf;
  return true;
}

bool same_addr(const std::string& a, const std::string& b) {
  if (a == b) return true;
  // IPv4-mapped IPv6 ("::ffff:127.0.0.1") against plain IPv4.
  auto strip = [](const std::string& s) { return s.rfind("::ffff:", 0) == 0 ? s.substr(7) : s; };
  return strip(a) == strip(b);
}

}  // namespace

ClientConnection::ClientConnection(int local_port, const std::string& remote_addr,
                                   int remote_port) {
  if (local_port <= 0 || remote_port <= 0) return;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t ll = sizeof(local), pl = sizeof(peer);
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &ll) != 0) continue;
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &pl) != 0) continue;
    int lport = 0, pport = 0;
    std::string laddr, paddr;
    if (!describe(local, lport, laddr) || !describe(peer, pport, paddr)) continue;
    if (lport == local_port && pport == remote_port && same_addr(paddr, remote_addr)) {
      fd_ = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
}

bool ClientConnection::gone() const {
  if (fd_ < 0) return false;
  pollfd p{};
  p.fd = fd_;
  p.events = POLLRDHUP;
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace vela
