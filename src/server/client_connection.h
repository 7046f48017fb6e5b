// ClientConnection: tells whether the HTTP client of a request is still there, so a request whose
// client left is cancelled instead of decoding to the end (the vLLM / llama.cpp complaint).
// The HTTP layer (http_connection.cpp) makes one per request and calls mark_gone() when it sees
// the peer close or reset the socket while the request is being answered; generation code polls
// gone() or registers on_gone() hooks (e.g. cancel the engine request, wake an SSE pump).
// Copies share one state; every member is thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace vela {

class ClientConnection {
 public:
  // A default-constructed connection is never gone (in-process callers without a socket).
  ClientConnection() = default;
  // A live connection the HTTP layer will mark gone.
  static ClientConnection open();

  // True once the peer closed or reset the connection.
  bool gone() const { return s_ && s_->gone.load(); }
  // HTTP layer: the peer left. Runs the hooks once (on the calling thread).
  void mark_gone() const;
  // Runs `fn` when the peer leaves (at once when it already has). Hooks must not block.
  void on_gone(std::function<void()> fn) const;

 private:
  struct State {
    std::atomic<bool> gone{false};
    std::mutex mu;
    std::vector<std::function<void()>> hooks;
  };
  std::shared_ptr<State> s_;
};

}  // namespace vela
