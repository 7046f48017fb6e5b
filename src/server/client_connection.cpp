// ClientConnection: a shared flag plus hooks, set by the HTTP layer.
#include "server/client_connection.h"

namespace vela {

ClientConnection ClientConnection::open() {
  ClientConnection c;
  c.s_ = std::make_shared<State>();
  return c;
}

void ClientConnection::mark_gone() const {
  if (!s_) return;
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    if (s_->gone.exchange(true)) return;
    hooks.swap(s_->hooks);
  }
  for (auto& fn : hooks) fn();
}

void ClientConnection::on_gone(std::function<void()> fn) const {
  if (!s_) return;
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    if (!s_->gone.load()) {
      s_->hooks.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

}  // namespace vela
