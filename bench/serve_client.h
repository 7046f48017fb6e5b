// The HTTP side of `vela bench serve`: one streamed request per connection on a Boost.Asio
// io_context (no thread per stream) — send, parse the status line and headers, undo chunked
// transfer encoding, split SSE events, time the content chunks, read the usage — plus the URL
// parsing and a blocking GET for /v1/models.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace vela::cli {

// What one request came to.
struct Outcome {
  bool ok = false;
  std::string error;
  double start = 0, ttft = -1, end = 0;  // seconds since the run began
  std::vector<double> chunk_times;       // content chunks' arrival
  int64_t prompt_tokens = -1, output_tokens = -1;
};

struct Target {
  std::string host, port, base_path;  // base_path: "" or "/prefix" (no trailing slash)
};

// "http://host[:port][/prefix][/v1]" -> Target. Throws InvalidArgument otherwise (no TLS).
Target parse_url(const std::string& url);

// Starts one streamed request (`request` is the whole HTTP/1.1 message, `Connection: close`) on
// `io`; `done` runs on io's thread with the outcome, times relative to `t0`. `chat`: content is in
// choices[0].delta (chat completions), else choices[0].text.
void start_stream(boost::asio::io_context& io,
                  const boost::asio::ip::tcp::resolver::results_type& eps, std::string request,
                  bool chat, std::chrono::steady_clock::time_point t0, double timeout_s,
                  std::function<void(Outcome)> done);

// Raises this process's soft open-file limit to the hard one.
void raise_nofile();

// A blocking GET; the raw response (status line, headers, body).
std::string http_get(boost::asio::io_context& io,
                     const boost::asio::ip::tcp::resolver::results_type& eps,
                     const std::string& host, const std::string& path, const std::string& key);

}  // namespace vela::cli
