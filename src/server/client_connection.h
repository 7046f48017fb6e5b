// ClientConnection: tells whether the HTTP client of a request is still there, so a request whose
// client left is cancelled instead of decoding to the end (the vLLM / llama.cpp complaint).
// cpp-httplib 0.11 does not hand handlers their socket, so the socket is found once per request by
// its address pair (local port, peer address and port; unique while the connection is open) and
// then polled for a hang-up (POLLRDHUP / POLLHUP / POLLERR) without reading from it.
// Thread-safe for one owner; gone() is cheap (one poll(2) with zero timeout).
#pragma once

#include <string>

namespace vela {

class ClientConnection {
 public:
  ClientConnection() = default;
  // Finds the socket of the connection (local_port, remote_addr:remote_port). When it cannot be
  // found, gone() stays false (the write path still notices a closed stream).
  ClientConnection(int local_port, const std::string& remote_addr, int remote_port);

  bool found() const { return fd_ >= 0; }
  // True once the peer closed or reset the connection.
  bool gone() const;

 private:
  int fd_ = -1;
};

}  // namespace vela
