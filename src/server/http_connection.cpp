// HttpConnection: the per-connection state machine (see the header). Every member function runs on
// the connection's strand except the thread-safe entry points, which post onto it.
#include "server/http_connection.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>
#include <chrono>
#include <cstdio>

#include "core/log.h"

namespace vela {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

std::chrono::steady_clock::duration seconds_of(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

bool is_hangup(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == asio::error::connection_aborted;
}

}  // namespace

HttpConnection::HttpConnection(tcp::socket socket, HttpService& svc)
    : socket_(std::move(socket)),
      read_timer_(socket_.get_executor()),
      write_timer_(socket_.get_executor()),
      svc_(svc) {}

HttpConnection::~HttpConnection() {
  client_.mark_gone();
  svc_.closed(this);
}

void HttpConnection::start(bool refuse) {
  refuse_ = refuse;
  asio::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->read_next(); });
}

void HttpConnection::stop_when_idle() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    self->stopping_ = true;
    if (!self->busy_) self->close();
  });
}

void HttpConnection::force_close() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->close(); });
}

// ---- timers ---------------------------------------------------------------------------------

void HttpConnection::arm_read(double seconds) {
  uint64_t gen = ++read_gen_;
  read_timer_.expires_after(seconds_of(seconds));
  read_timer_.async_wait([self = shared_from_this(), gen](beast::error_code ec) {
    if (ec || gen != self->read_gen_ || self->closed_) return;
    VELA_LOG_DEBUG("[http] closing a connection: no complete request within the timeout");
    self->close();
  });
}

void HttpConnection::disarm_read() {
  ++read_gen_;
  read_timer_.cancel();
}

void HttpConnection::close() {
  if (closed_) return;
  closed_ = true;
  beast::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  ++read_gen_;
  ++write_gen_;
  read_timer_.cancel();
  write_timer_.cancel();
  if (busy_) client_.mark_gone();
}

// ---- reading --------------------------------------------------------------------------------

void HttpConnection::read_next() {
  busy_ = false;
  req_.reset();
  client_ = ClientConnection();
  if (closed_) return;
  if (stopping_) return close();
  const HttpLimits& lim = svc_.limits();
  parser_.emplace();
  parser_->header_limit(lim.max_header_bytes);
  parser_->body_limit(static_cast<uint64_t>(lim.max_body_bytes));
  path_.clear();
  if (buf_.size() > 0) return read_header();  // a pipelined request is already here
  // Idle until the first byte: keep-alive connections may wait idle_timeout_s, a new one must
  // start its request within header_timeout_s.
  arm_read(first_ ? lim.header_timeout_s : lim.idle_timeout_s);
  socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
    if (ec || self->closed_) return self->close();
    self->read_header();
  });
}

void HttpConnection::read_header() {
  first_ = false;
  arm_read(svc_.limits().header_timeout_s);
  http::async_read_header(
      socket_, buf_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

void HttpConnection::on_header(beast::error_code ec) {
  if (closed_) return;
  if (ec) {
    if (is_hangup(ec) || ec == asio::error::operation_aborted) return close();
    if (ec == http::error::header_limit) return refuse_with(431);
    if (ec == http::error::body_limit) {  // a Content-Length over the limit, seen in the header
      set_path_from_parser();
      return refuse_with(413);
    }
    return refuse_with(400);
  }
  const auto& msg = parser_->get();
  std::map<std::string, std::string> params;
  if (!parse_target(std::string_view(msg.target().data(), msg.target().size()), path_, params))
    path_.clear();
  if (refuse_) return refuse_with(503);
  if (auto cl = parser_->content_length();
      cl && *cl > static_cast<uint64_t>(svc_.limits().max_body_bytes))
    return refuse_with(413);
  auto expect = msg.find(http::field::expect);
  if (expect != msg.end() && beast::iequals(expect->value(), "100-continue") &&
      !parser_->is_done()) {
    queue("HTTP/1.1 100 Continue\r\n\r\n");
    flush();
  }
  if (parser_->is_done()) return on_request();
  arm_read(svc_.limits().body_timeout_s);
  http::async_read(
      socket_, buf_, *parser_,
      [self = shared_from_this()](beast::error_code ec2, size_t) { self->on_body(ec2); });
}

// The path of the request being parsed (for the flavour of an early error object), if its start
// line got through.
void HttpConnection::set_path_from_parser() {
  std::map<std::string, std::string> params;
  auto t = parser_->get().target();
  if (!parse_target(std::string_view(t.data(), t.size()), path_, params)) path_.clear();
}

void HttpConnection::on_body(beast::error_code ec) {
  if (closed_) return;
  if (ec) {
    if (ec == http::error::body_limit) return refuse_with(413);
    if (is_hangup(ec) || ec == asio::error::operation_aborted) return close();
    return refuse_with(400);
  }
  on_request();
}

void HttpConnection::on_request() {
  disarm_read();
  busy_ = true;
  auto& msg = parser_->get();
  keep_alive_ = msg.keep_alive() && !stopping_;
  chunked_ = msg.version() >= 11;
  auto req = std::make_shared<HttpRequest>();
  req->method = std::string(msg.method_string());
  if (!parse_target(std::string_view(msg.target().data(), msg.target().size()), req->path,
                    req->params))
    return refuse_with(400);
  for (const auto& f : msg)
    req->headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
  req->body = std::move(msg.body());
  parser_.reset();
  client_ = ClientConnection::open();
  req->client = client_;
  req_ = req;
  watch_for_hangup();
  svc_.serve(req, [self = shared_from_this()](HttpResponse res) {
    asio::post(self->socket_.get_executor(),
               [self, res = std::move(res)]() mutable { self->respond(std::move(res)); });
  });
}

// One read while the request is answered: EOF or a reset means the client left. Bytes (a
// pipelined request) are kept for the next parse and end the watch.
void HttpConnection::watch_for_hangup() {
  if (buf_.size() > 0 || closed_) return;
  watching_ = true;
  socket_.async_read_some(
      buf_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
        self->watching_ = false;
        if (!ec) {
          self->buf_.commit(n);
        } else if (ec != asio::error::operation_aborted && !self->closed_) {
          if (self->busy_) VELA_LOG_DEBUG("[http] client hung up while its request was answered");
          self->client_.mark_gone();
          self->close();
          return;
        }
        if (self->want_next_) {
          self->want_next_ = false;
          self->read_next();
        }
      });
}

// ---- writing --------------------------------------------------------------------------------

void HttpConnection::refuse_with(int status) {
  disarm_read();
  busy_ = true;
  keep_alive_ = false;
  chunked_ = true;
  if (!req_) {
    req_ = std::make_shared<HttpRequest>();
    req_->path = path_;
    if (parser_) req_->method = std::string(parser_->get().method_string());
  }
  parser_.reset();
  respond(svc_.protocol_error(path_, status));
}

void HttpConnection::respond(HttpResponse res) {
  if (res.stream && res.stream->deferred()) {  // answered when the generation ends (pump())
    stream_ = std::move(res.stream);
    stream_->set_wake([self = shared_from_this()] { self->wake(); });
    return pump();
  }
  svc_.answered(*req_, res.status);
  for (const auto& [k, v] : res.headers)
    if (beast::iequals(k, "Connection") && beast::iequals(v, "close")) keep_alive_ = false;
  if (stopping_) keep_alive_ = false;
  if (res.stream && !chunked_) keep_alive_ = false;  // HTTP/1.0: the body ends at close
  std::string head = "HTTP/1.1 " + std::to_string(res.status) + " ";
  auto reason = http::obsolete_reason(static_cast<http::status>(res.status));
  head.append(reason.data(), reason.size());
  head += "\r\nContent-Type: " + res.content_type + "\r\n";
  for (const auto& [k, v] : res.headers)
    if (!beast::iequals(k, "Connection")) head += k + ": " + v + "\r\n";
  if (!res.stream)
    head += "Content-Length: " + std::to_string(res.body.size()) + "\r\n";
  else if (chunked_)
    head += "Transfer-Encoding: chunked\r\n";
  head += keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  queue(head);
  if (!res.stream) {
    queue(res.body);
    response_queued_ = true;
    return flush();
  }
  flush();
  stream_ = std::move(res.stream);
  stream_->set_wake([self = shared_from_this()] { self->wake(); });
  pump();
}

void HttpConnection::wake() {
  if (pump_posted_.exchange(true)) return;
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    self->pump_posted_.store(false);
    self->pump();
  });
}

void HttpConnection::pump() {
  if (!stream_ || !stream_->pump(writer_)) return;
  if (stream_->deferred()) {
    std::shared_ptr<SseStream> done = std::move(stream_);
    HttpResponse res;
    svc_.finish_deferred(
        *req_, [&done](HttpResponse& r) { done->respond(r); }, res);
    done.reset();  // the sessions end here (and leave the in-flight set)
    return respond(std::move(res));
  }
  stream_.reset();  // drops the handles' listeners (and with them the cycle back to us)
  if (chunked_) queue("0\r\n\r\n");
  response_queued_ = true;
  flush();
}

bool HttpConnection::write_chunk(std::string_view data) {
  if (closed_) return false;
  if (outbox_.size() + sending_.size() > svc_.limits().max_buffered_bytes) {
    VELA_LOG_INFO("[http] dropping a client that does not read its stream (",
                  outbox_.size() + sending_.size(), " bytes unsent)");
    client_.mark_gone();
    close();
    return false;
  }
  if (data.empty()) return true;
  if (chunked_) {
    char size[24];
    int n = std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
    outbox_.append(size, static_cast<size_t>(n));
    outbox_.append(data);
    outbox_.append("\r\n");
  } else {
    outbox_.append(data);
  }
  flush();
  return true;
}

void HttpConnection::queue(std::string_view data) {
  if (!closed_) outbox_.append(data);
}

void HttpConnection::flush() {
  if (closed_) return;
  if (writing_) return;
  if (outbox_.empty()) {
    if (response_queued_) finish_response();
    return;
  }
  writing_ = true;
  sending_.swap(outbox_);
  outbox_.clear();
  uint64_t gen = ++write_gen_;
  write_timer_.expires_after(seconds_of(svc_.limits().write_timeout_s));
  write_timer_.async_wait([self = shared_from_this(), gen](beast::error_code ec) {
    if (ec || gen != self->write_gen_ || self->closed_) return;
    VELA_LOG_INFO("[http] dropping a client: a write stalled past the write timeout");
    self->client_.mark_gone();
    self->close();
  });
  asio::async_write(socket_, asio::buffer(sending_),
                    [self = shared_from_this()](beast::error_code ec, size_t) {
                      self->writing_ = false;
                      self->sending_.clear();
                      ++self->write_gen_;
                      self->write_timer_.cancel();
                      if (ec) {
                        if (!self->closed_) {
                          self->client_.mark_gone();
                          self->close();
                        }
                        return;
                      }
                      self->flush();
                    });
}

void HttpConnection::finish_response() {
  response_queued_ = false;
  client_ = ClientConnection();  // answered: a hang-up from now on cancels nothing
  if (!keep_alive_ || stopping_) {
    busy_ = false;
    return linger_close();
  }
  busy_ = false;
  if (watching_) {
    want_next_ = true;
    socket_.cancel();  // ends the hang-up watch; its handler reads the next request
    return;
  }
  read_next();
}

// Closing right after the response could reset the connection while the client still sends (a
// refused body), and a reset may destroy the response before the client reads it. So: stop
// sending, discard what arrives until the client closes too, for at most two seconds.
void HttpConnection::linger_close() {
  if (closed_) return;
  beast::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_send, ec);
  if (ec) return close();
  arm_read(2.0);
  if (watching_) return;  // the hang-up watch's read sees the client's EOF (or the timer fires)
  discard_ = std::make_shared<std::array<char, 4096>>();
  socket_.async_read_some(asio::buffer(*discard_),
                          [self = shared_from_this()](beast::error_code e, size_t) {
                            if (e || self->closed_) return self->close();
                            self->linger_close_more();
                          });
}

void HttpConnection::linger_close_more() {
  socket_.async_read_some(asio::buffer(*discard_),
                          [self = shared_from_this()](beast::error_code e, size_t) {
                            if (e || self->closed_) return self->close();
                            self->linger_close_more();
                          });
}

}  // namespace vela
