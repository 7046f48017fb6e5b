// serve_client: the streamed-request state machine (see the header).
#include "bench/serve_client.h"

#include <sys/resource.h>

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <cctype>
#include <cstdlib>
#include <memory>

#include "core/error.h"
#include "core/json.h"

namespace vela::cli {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0, Clock::time_point t) {
  return std::chrono::duration<double>(t - t0).count();
}

// One streamed request over its own connection: send, parse the status line and headers, undo
// chunked transfer encoding, split SSE events, time the content chunks.
class Stream : public std::enable_shared_from_this<Stream> {
 public:
  Stream(asio::io_context& io, const tcp::resolver::results_type& eps, std::string request,
         bool chat, Clock::time_point t0, double timeout_s, std::function<void(Outcome)> done)
      : socket_(io),
        timer_(io),
        eps_(eps),
        request_(std::move(request)),
        chat_(chat),
        t0_(t0),
        timeout_s_(timeout_s),
        done_(std::move(done)) {}

  void start() {
    out_.start = since(t0_, Clock::now());
    timer_.expires_after(
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_)));
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->fail("timed out after " + std::to_string(self->timeout_s_) + " s");
    });
    asio::async_connect(socket_, eps_,
                        [self = shared_from_this()](boost::system::error_code ec, const auto&) {
                          if (ec) return self->fail("connect: " + ec.message());
                          self->socket_.set_option(tcp::no_delay(true), ec);
                          asio::async_write(self->socket_, asio::buffer(self->request_),
                                            [self](boost::system::error_code e, size_t) {
                                              if (e) return self->fail("send: " + e.message());
                                              self->read();
                                            });
                        });
  }

 private:
  tcp::socket socket_;
  asio::steady_timer timer_;
  const tcp::resolver::results_type& eps_;
  std::string request_;
  bool chat_;
  Clock::time_point t0_;
  double timeout_s_;
  std::function<void(Outcome)> done_;
  Outcome out_;
  bool finished_ = false;
  std::array<char, 16384> buf_{};
  std::string raw_;  // bytes not yet consumed by the HTTP layer
  bool headers_done_ = false, chunked_ = false, saw_done_ = false;
  int status_ = 0;
  int64_t content_left_ = -1;  // Content-Length body bytes still expected (non-chunked)
  std::string body_;           // decoded body bytes not yet consumed by the SSE splitter
  std::string error_body_;
  int64_t n_chunks_ = 0;

  void read() {
    socket_.async_read_some(asio::buffer(buf_),
                            [self = shared_from_this()](boost::system::error_code ec, size_t n) {
                              if (self->finished_) return;
                              if (n > 0) {
                                self->raw_.append(self->buf_.data(), n);
                                if (!self->consume()) return;
                              }
                              if (ec) return self->on_eof(ec);
                              self->read();
                            });
  }

  void on_eof(const boost::system::error_code& ec) {
    if (status_ != 0 && status_ != 200) return fail_status();
    if (!chunked_ && headers_done_ && content_left_ < 0) {
      flush_sse(true);  // body delimited by the close
      if (saw_done_) return succeed();
    }
    fail(saw_done_ ? "connection closed before the end of the response"
                   : "stream ended without [DONE] (" + ec.message() + ")");
  }

  // Consumes raw_; false once the request has finished (either way).
  bool consume() {
    if (!headers_done_) {
      size_t end = raw_.find("\r\n\r\n");
      if (end == std::string::npos) {
        if (raw_.size() > 65536) fail("response header too large");
        return !finished_;
      }
      std::string head = raw_.substr(0, end);
      raw_.erase(0, end + 4);
      headers_done_ = true;
      if (head.rfind("HTTP/1.", 0) != 0 || head.size() < 12)
        return fail("not an HTTP response"), false;
      status_ = std::atoi(head.c_str() + 9);
      std::string lower = head;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      chunked_ = lower.find("\r\ntransfer-encoding: chunked") != std::string::npos;
      size_t cl = lower.find("\r\ncontent-length:");
      if (cl != std::string::npos) content_left_ = std::atoll(lower.c_str() + cl + 17);
    }
    // Body bytes: de-chunk into body_.
    if (chunked_) {
      while (true) {
        size_t eol = raw_.find("\r\n");
        if (eol == std::string::npos) break;
        size_t size = std::strtoull(raw_.c_str(), nullptr, 16);
        if (raw_.size() < eol + 2 + size + 2) break;
        if (size == 0) {
          raw_.clear();
          flush_sse(true);
          if (status_ != 200) return fail_status(), false;
          if (saw_done_) return succeed(), false;
          return fail("stream ended without [DONE]"), false;
        }
        body_.append(raw_, eol + 2, size);
        raw_.erase(0, eol + 2 + size + 2);
      }
    } else {
      body_ += raw_;
      if (content_left_ >= 0) content_left_ -= static_cast<int64_t>(raw_.size());
      raw_.clear();
      if (content_left_ == 0) {
        flush_sse(true);
        if (status_ != 200) return fail_status(), false;
        if (saw_done_) return succeed(), false;
        return fail("response ended without [DONE] (not a stream?)"), false;
      }
    }
    if (status_ != 200) {
      error_body_ += body_;
      body_.clear();
      return true;
    }
    flush_sse(false);
    return !finished_;
  }

  // Splits complete SSE events off body_ ("\n\n"-terminated); `all`: the rest too.
  void flush_sse(bool all) {
    if (status_ != 200) {
      error_body_ += body_;
      body_.clear();
      return;
    }
    size_t pos;
    while ((pos = body_.find("\n\n")) != std::string::npos) {
      std::string ev = body_.substr(0, pos);
      body_.erase(0, pos + 2);
      on_event(ev);
    }
    if (all && !body_.empty()) {
      on_event(body_);
      body_.clear();
    }
  }

  void on_event(const std::string& ev) {
    size_t at = 0;
    while (at < ev.size()) {
      size_t eol = ev.find('\n', at);
      std::string line = ev.substr(at, eol == std::string::npos ? std::string::npos : eol - at);
      at = eol == std::string::npos ? ev.size() : eol + 1;
      if (line.rfind("data:", 0) != 0) continue;
      std::string data = line.substr(line.size() > 5 && line[5] == ' ' ? 6 : 5);
      if (data == "[DONE]") {
        saw_done_ = true;
        continue;
      }
      json j = json::parse(data, nullptr, false);
      if (j.is_discarded()) return fail("unparsable SSE data: " + data.substr(0, 200));
      if (j.contains("error")) return fail("error event: " + j["error"].dump().substr(0, 300));
      if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
        out_.prompt_tokens = u->value("prompt_tokens", int64_t{-1});
        out_.output_tokens = u->value("completion_tokens", int64_t{-1});
      }
      auto ch = j.find("choices");
      if (ch == j.end() || !ch->is_array() || ch->empty()) continue;
      const json& c0 = (*ch)[0];
      std::string text;
      if (chat_) {
        if (auto d = c0.find("delta"); d != c0.end() && d->is_object()) {
          for (const char* k : {"content", "reasoning_content", "reasoning"})
            if (auto t = d->find(k); t != d->end() && t->is_string()) text += t->get<std::string>();
          if (d->contains("tool_calls")) text += "*";
        }
      } else if (auto t = c0.find("text"); t != c0.end() && t->is_string()) {
        text = t->get<std::string>();
      }
      if (text.empty()) continue;
      double now = since(t0_, Clock::now());
      if (out_.ttft < 0) out_.ttft = now - out_.start;
      out_.chunk_times.push_back(now);
      ++n_chunks_;
    }
  }

  void fail_status() {
    std::string b = error_body_ + body_;
    fail("HTTP " + std::to_string(status_) + ": " + b.substr(0, 300));
  }

  void fail(const std::string& why) {
    if (finished_) return;
    out_.error = why;
    finish();
  }

  void succeed() {
    if (finished_) return;
    out_.ok = true;
    if (out_.output_tokens < 0) out_.output_tokens = n_chunks_;
    finish();
  }

  void finish() {
    finished_ = true;
    out_.end = since(t0_, Clock::now());
    boost::system::error_code ec;
    timer_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    auto done = std::move(done_);
    done(std::move(out_));
  }
};

}  // namespace

Target parse_url(const std::string& url) {
  const std::string scheme = "http://";
  VELA_CHECK(url.rfind(scheme, 0) == 0, "--url must start with http:// (no TLS), got '", url, "'");
  std::string rest = url.substr(scheme.size());
  size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  Target t;
  t.base_path = slash == std::string::npos ? "" : rest.substr(slash);
  while (!t.base_path.empty() && t.base_path.back() == '/') t.base_path.pop_back();
  if (t.base_path.size() >= 3 && t.base_path.compare(t.base_path.size() - 3, 3, "/v1") == 0)
    t.base_path.resize(t.base_path.size() - 3);  // "http://host:port/v1" works too
  size_t colon = hostport.rfind(':');
  t.host = hostport.substr(0, colon);
  t.port = colon == std::string::npos ? "80" : hostport.substr(colon + 1);
  VELA_CHECK(!t.host.empty(), "--url has no host: '", url, "'");
  return t;
}

void start_stream(asio::io_context& io, const tcp::resolver::results_type& eps, std::string request,
                  bool chat, Clock::time_point t0, double timeout_s,
                  std::function<void(Outcome)> done) {
  std::make_shared<Stream>(io, eps, std::move(request), chat, t0, timeout_s, std::move(done))
      ->start();
}

void raise_nofile() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

std::string http_get(asio::io_context& io, const tcp::resolver::results_type& eps,
                     const std::string& host, const std::string& path, const std::string& key) {
  tcp::socket s(io);
  asio::connect(s, eps);
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n";
  if (!key.empty()) req += "Authorization: Bearer " + key + "\r\n";
  req += "\r\n";
  asio::write(s, asio::buffer(req));
  std::string resp;
  boost::system::error_code ec;
  std::array<char, 8192> b{};
  while (true) {
    size_t n = s.read_some(asio::buffer(b), ec);
    resp.append(b.data(), n);
    if (ec) break;
  }
  return resp;
}

}  // namespace vela::cli
