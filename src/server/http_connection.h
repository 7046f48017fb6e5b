// HttpConnection: one client socket of `vela serve`, event-driven on Boost.Asio with the request
// parsed by Boost.Beast. Nothing here holds a thread: reads, writes and timeouts are asynchronous
// operations on the connection's strand, so an idle or slow connection costs a socket and a few
// kilobytes. Life of a request:
//   wait for bytes (idle timeout; a new connection: header timeout) -> read the header (header
//   timeout; over max_header_bytes 431, unparsable 400) -> answer `Expect: 100-continue` -> read
//   the body (body timeout; over max_body_bytes 413) -> HttpService::serve() (the server runs the
//   handler inline or on its WorkerPool) -> write the response (write timeout per write) -> keep
//   alive or close.
// While a request is being answered the socket is watched for a hang-up (a read of EOF / reset
// marks the request's ClientConnection gone, which cancels its generation). A streamed response
// (SseStream) is pumped on the strand whenever an engine event wakes it; its output is buffered up
// to max_buffered_bytes (a client that stops reading is dropped past that or the write timeout).
// A non-streaming generation is pumped the same way and its response written when it ends, so no
// thread waits for it either.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "server/http_message.h"
#include "server/sse.h"

namespace vela {

struct HttpLimits {
  int64_t max_body_bytes = 8 << 20;
  uint32_t max_header_bytes = 64 << 10;
  double header_timeout_s = 10, body_timeout_s = 30, idle_timeout_s = 60, write_timeout_s = 30;
  size_t max_buffered_bytes = 8 << 20;  // unsent output of one streamed response
};

class HttpConnection;

// What a connection asks of the server (HttpServer implements it).
class HttpService {
 public:
  virtual ~HttpService() = default;
  virtual const HttpLimits& limits() const = 0;
  // Answers `req`; `done` is called exactly once, from any thread, with the response.
  virtual void serve(std::shared_ptr<HttpRequest> req, std::function<void(HttpResponse)> done) = 0;
  // A refusal the HTTP layer makes itself (400, 413, 431, 503 over the connection cap), as an
  // error object in the flavour of `path` ("" when unknown).
  virtual HttpResponse protocol_error(const std::string& path, int status) = 0;
  // Fills the response of a deferred (non-streaming) generation with `fill`, turning what it
  // throws into an error object like a handler's.
  virtual void finish_deferred(const HttpRequest& req,
                               const std::function<void(HttpResponse&)>& fill,
                               HttpResponse& res) = 0;
  // A response's status is known (metrics, debug log).
  virtual void answered(const HttpRequest& req, int status) = 0;
  // The connection is gone (from its destructor).
  virtual void closed(HttpConnection* c) = 0;
};

class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  // `socket`'s executor must be a strand (async_accept with make_strand).
  HttpConnection(boost::asio::ip::tcp::socket socket, HttpService& svc);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // Starts reading requests. `refuse`: answer the first request with 503 and close (the server is
  // over its connection cap).
  void start(bool refuse = false);
  // Server shutdown (thread-safe): close now when idle, else after the response in progress.
  void stop_when_idle();
  // Server shutdown, last step (thread-safe): close now.
  void force_close();

 private:
  class ChunkWriter : public SseWriter {
   public:
    explicit ChunkWriter(HttpConnection& c) : c_(c) {}
    bool write(std::string_view data) override { return c_.write_chunk(data); }

   private:
    HttpConnection& c_;
  };

  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer read_timer_, write_timer_;
  HttpService& svc_;
  boost::beast::flat_buffer buf_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::shared_ptr<HttpRequest> req_;  // the request being answered
  ClientConnection client_;
  std::string path_;  // of the request being read (error flavour)
  bool first_ = true, refuse_ = false, busy_ = false, keep_alive_ = true, chunked_ = true;
  bool closed_ = false, stopping_ = false, watching_ = false, want_next_ = false;
  uint64_t read_gen_ = 0, write_gen_ = 0;
  // Output: outbox_ fills while sending_ is on the wire.
  std::string outbox_, sending_;
  bool writing_ = false, response_queued_ = false;
  std::shared_ptr<SseStream> stream_;
  std::atomic<bool> pump_posted_{false};
  ChunkWriter writer_{*this};
  std::shared_ptr<std::array<char, 4096>> discard_;  // linger_close()'s sink

  void read_next();
  void read_header();
  void on_header(boost::beast::error_code ec);
  void on_body(boost::beast::error_code ec);
  void set_path_from_parser();
  void on_request();
  void watch_for_hangup();
  void respond(HttpResponse res);
  void refuse_with(int status);
  void wake();
  void pump();
  bool write_chunk(std::string_view data);
  void queue(std::string_view data);
  void flush();
  void finish_response();
  void arm_read(double seconds);
  void disarm_read();
  void linger_close();
  void linger_close_more();
  void close();
};

}  // namespace vela
