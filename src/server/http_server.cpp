// HttpServer: the listener and connection registry (Boost.Asio), the route table, pre-routing
// checks (draining, API key), the handler wrapper that turns exceptions into error objects,
// request metrics, and shutdown.
#include "server/http_server.h"

#include <sys/resource.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <functional>
#include <future>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/log.h"
#include "server/anthropic_api.h"
#include "server/api_error.h"
#include "server/auth.h"
#include "server/http_connection.h"
#include "server/openai_api.h"
#include "server/web_ui.h"
#include "server/worker_pool.h"

namespace vela {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

ApiFlavor flavor_of(const std::string& path) {
  return path.rfind("/v1/messages", 0) == 0 ? ApiFlavor::kAnthropic : ApiFlavor::kOpenAI;
}

// Metric label for a path: known routes by name, everything else "other" (bounded cardinality).
std::string route_label(const std::string& path) {
  static const char* kRoutes[] = {"/v1/chat/completions",
                                  "/v1/completions",
                                  "/v1/models",
                                  "/v1/messages",
                                  "/v1/messages/count_tokens",
                                  "/health",
                                  "/stats",
                                  "/metrics",
                                  "/model-card",
                                  "/"};
  for (const char* r : kRoutes)
    if (path == r) return r;
  return "other";
}

void set_error(HttpResponse& res, ApiFlavor flavor, int status, const std::string& message,
               const std::string& param = "", const std::string& code = "", int retry_after = -1) {
  res.status = status;
  if (retry_after >= 0) res.set_header("Retry-After", std::to_string(retry_after));
  res.set_content(dump_json(error_body(flavor, status, message, param, code)), "application/json");
}

std::atomic<uint64_t> g_error_id{1};

using Handler = std::function<void(ServerContext&, const HttpRequest&, HttpResponse&)>;

struct Route {
  std::string method, path;
  Handler fn;
  bool cheap = false;  // runs on the I/O thread (never blocks, answers in microseconds)
};

// GET /model-card: the served directory's README.md, for the chat page's model card panel.
void handle_model_card(ServerContext& ctx, const HttpRequest&, HttpResponse& res) {
  std::optional<std::string> card = read_model_card(ctx.cfg.model_dir);
  if (!card)
    throw ApiError(404, "the served model directory has no README.md (model card)", "",
                   "model_card_not_found");
  res.set_content(*card, "text/markdown; charset=utf-8");
}

// Raises the soft open-file limit to the hard one (each connection is a descriptor); returns it.
int64_t raise_nofile_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
  if (rl.rlim_cur < rl.rlim_max) {
    rlimit want = rl;
    want.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &want) == 0) rl = want;
  }
  return rl.rlim_cur == RLIM_INFINITY ? int64_t{1} << 30 : static_cast<int64_t>(rl.rlim_cur);
}

}  // namespace

class HttpServer::Impl : public HttpService {
 public:
  Impl(Engine& engine, const ServerConfig& cfg, std::optional<ChatTemplate> tpl)
      : ctx(std::make_unique<ServerContext>(engine, cfg, std::move(tpl))),
        max_connections(cfg.max_connections),
        work(asio::make_work_guard(io)) {
    lim.max_body_bytes = cfg.max_body_bytes;
    lim.header_timeout_s = cfg.header_timeout_s;
    lim.body_timeout_s = cfg.body_timeout_s;
    lim.idle_timeout_s = cfg.idle_timeout_s;
    lim.write_timeout_s = cfg.write_timeout_s;
    pool = std::make_unique<WorkerPool>(static_cast<size_t>(cfg.http_threads),
                                        static_cast<size_t>(cfg.max_pending_requests));
    install_routes();
  }

  // ---- HttpService ----
  const HttpLimits& limits() const override { return lim; }
  void serve(std::shared_ptr<HttpRequest> req, std::function<void(HttpResponse)> done) override;
  HttpResponse protocol_error(const std::string& path, int status) override;
  void finish_deferred(const HttpRequest& req, const std::function<void(HttpResponse&)>& fill,
                       HttpResponse& res) override {
    guarded(req, fill, res);
  }
  void answered(const HttpRequest& req, int status) override {
    ctx->metrics.count_request(route_label(req.path), status);
    VELA_LOG_DEBUG("[server] ", req.method, " ", req.path, " -> ", status);
  }
  void closed(HttpConnection* c) override {
    std::lock_guard<std::mutex> lock(conns_mu);
    conns.erase(c);
  }

  void accept();
  std::vector<std::shared_ptr<HttpConnection>> connections() {
    std::vector<std::shared_ptr<HttpConnection>> out;
    std::lock_guard<std::mutex> lock(conns_mu);
    for (auto& [p, w] : conns)
      if (auto s = w.lock()) out.push_back(std::move(s));
    return out;
  }
  int64_t n_connections() {
    std::lock_guard<std::mutex> lock(conns_mu);
    return static_cast<int64_t>(conns.size());
  }

  std::unique_ptr<ServerContext> ctx;
  HttpLimits lim;
  int64_t max_connections;
  std::vector<Route> routes;
  std::mutex conns_mu;
  std::unordered_map<HttpConnection*, std::weak_ptr<HttpConnection>> conns;
  // Declared after what the connections call back into: destroying the io_context destroys the
  // handlers that still own connections.
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
  bool accept_error_logged = false;
  std::unique_ptr<WorkerPool> pool;  // last: joined first, its tasks use everything above

 private:
  void install_routes();
  bool pre_route(const HttpRequest& req, HttpResponse& res);
  void run_handler(const Route& r, const HttpRequest& req, HttpResponse& res) {
    guarded(
        req, [&](HttpResponse& out) { r.fn(*ctx, req, out); }, res);
  }
  // Runs `fn`; what it throws becomes an error object in the route's flavor.
  void guarded(const HttpRequest& req, const std::function<void(HttpResponse&)>& fn,
               HttpResponse& res);
};

void HttpServer::Impl::install_routes() {
  ServerContext& c = *ctx;
  routes.push_back({"POST", "/v1/chat/completions", &handle_chat_completions});
  routes.push_back({"POST", "/v1/completions", &handle_completions});
  routes.push_back({"POST", "/v1/messages", &handle_messages});
  routes.push_back({"POST", "/v1/messages/count_tokens", &handle_count_tokens});
  routes.push_back({"GET", "/v1/models",
                    [](ServerContext& ctx, const HttpRequest&, HttpResponse& res) {
                      res.set_content(dump_json(models_list(ctx)), "application/json");
                    },
                    true});
  routes.push_back({"GET", "/health",
                    [](ServerContext&, const HttpRequest&, HttpResponse& res) {
                      res.set_content(R"({"status":"ok"})", "application/json");
                    },
                    true});
  routes.push_back(
      {"GET", "/stats", [](ServerContext& ctx, const HttpRequest& req, HttpResponse& res) {
         json j = ctx.metrics.stats_json(ctx.engine.stats());
         if (req.has_param("check")) {  // /stats?check=1: the KV integrity check too
           std::string broken = ctx.engine.check_integrity();
           j["kv_integrity"] = broken.empty() ? "ok" : broken;
         }
         j["model"] = ctx.cfg.model_name;
         j["max_context"] = ctx.engine.max_context();
         res.set_content(dump_json(j), "application/json");
       }});
  routes.push_back({"GET", "/metrics",
                    [](ServerContext& ctx, const HttpRequest&, HttpResponse& res) {
                      res.set_content(ctx.metrics.prometheus(ctx.engine.stats()),
                                      "text/plain; version=0.0.4");
                    },
                    true});
  routes.push_back({"GET", "/model-card", &handle_model_card});
  if (c.cfg.web_ui) {
    routes.push_back({"GET", "/",
                      [](ServerContext&, const HttpRequest&, HttpResponse& res) {
                        std::string_view page = web_ui_html();
                        res.set_content(std::string(page), "text/html; charset=utf-8");
                      },
                      true});
  }
}

// Draining and the API key, before routing. True when `res` is the answer.
bool HttpServer::Impl::pre_route(const HttpRequest& req, HttpResponse& res) {
  ApiFlavor fl = flavor_of(req.path);
  int retry = ctx->cfg.retry_after_s;
  if (ctx->draining.load() && req.path != "/metrics" && req.path != "/stats") {
    res.set_header("Connection", "close");
    if (req.path == "/health") {
      res.status = 503;
      res.set_content(R"({"status":"draining"})", "application/json");
    } else {
      set_error(res, fl, 503, "the server is shutting down", "", "shutting_down", retry);
    }
    return true;
  }
  if (req.path != "/health" && req.path != "/" &&
      !api_key_ok(ctx->cfg.api_key, req.header("Authorization"), req.header("x-api-key"))) {
    set_error(res, fl, 401,
              "missing or invalid API key (send `Authorization: Bearer <key>` or `x-api-key`)", "",
              "invalid_api_key");
    return true;
  }
  return false;
}

void HttpServer::Impl::guarded(const HttpRequest& req, const std::function<void(HttpResponse&)>& fn,
                               HttpResponse& res) {
  ApiFlavor fl = flavor_of(req.path);
  try {
    fn(res);
  } catch (const ApiError& e) {
    res = HttpResponse();
    int ra = e.status() == 429 || e.status() == 503 ? ctx->cfg.retry_after_s : -1;
    set_error(res, fl, e.status(), e.message(), e.param(), e.code(), ra);
  } catch (const InvalidArgument& e) {
    res = HttpResponse();
    set_error(res, fl, 400, clean_error_message(e.what()));
  } catch (const std::exception& e) {
    res = HttpResponse();
    uint64_t id = g_error_id.fetch_add(1);
    VELA_LOG_ERROR("[server] internal error #", id, " on ", req.method, " ", req.path, ": ",
                   e.what());
    set_error(res, fl, 500, "internal server error (id " + std::to_string(id) + ")");
  }
}

void HttpServer::Impl::serve(std::shared_ptr<HttpRequest> req,
                             std::function<void(HttpResponse)> done) {
  HttpResponse res;
  if (pre_route(*req, res)) return done(std::move(res));
  const Route* route = nullptr;
  bool path_known = false;
  for (const Route& r : routes) {
    if (r.path != req->path) continue;
    path_known = true;
    if (r.method == req->method) route = &r;
  }
  ApiFlavor fl = flavor_of(req->path);
  if (!route) {
    if (path_known) {
      set_error(res, fl, 405, "method " + req->method + " is not allowed on " + req->path);
    } else {
      set_error(res, fl, 404, "no route " + req->method + " " + req->path);
    }
    return done(std::move(res));
  }
  if (route->cheap) {
    run_handler(*route, *req, res);
    return done(std::move(res));
  }
  bool queued = pool->submit([this, route, req, done] {
    HttpResponse r;
    run_handler(*route, *req, r);
    done(std::move(r));
  });
  if (!queued) {
    ctx->metrics.rejected_overload();
    res.set_header("Connection", "close");
    set_error(res, fl, 503, "the server is overloaded (every worker is busy); retry later", "",
              "overloaded", ctx->cfg.retry_after_s);
    done(std::move(res));
  }
}

HttpResponse HttpServer::Impl::protocol_error(const std::string& path, int status) {
  HttpResponse res;
  ApiFlavor fl = flavor_of(path);
  switch (status) {
    case 413:
      set_error(
          res, fl, 413,
          "the request body is too large (limit " + std::to_string(lim.max_body_bytes) + " bytes)");
      break;
    case 431:
      set_error(res, fl, 431, "the request header is too large");
      break;
    case 503:
      ctx->metrics.rejected_overload();
      set_error(res, fl, 503, "the server is overloaded (too many connections); retry later", "",
                "overloaded", ctx->cfg.retry_after_s);
      break;
    default:
      set_error(res, fl, status, "malformed HTTP request");
  }
  res.set_header("Connection", "close");
  return res;
}

void HttpServer::Impl::accept() {
  acceptor.async_accept(
      asio::make_strand(io), [this](boost::system::error_code ec, tcp::socket socket) {
        if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
        if (ec) {
          // Out of descriptors (EMFILE / ENFILE) or a transient error: back off instead of
          // spinning.
          if (!accept_error_logged)
            VELA_LOG_WARN("[server] accept failed: ", ec.message(),
                          " (raise the open-file limit, `ulimit -n`, or lower max_connections)");
          accept_error_logged = true;
          accept_retry.expires_after(std::chrono::milliseconds(50));
          accept_retry.async_wait([this](boost::system::error_code e) {
            if (!e) accept();
          });
          return;
        }
        boost::system::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        auto c = std::make_shared<HttpConnection>(std::move(socket), *this);
        bool refuse;
        {
          std::lock_guard<std::mutex> lock(conns_mu);
          refuse = static_cast<int64_t>(conns.size()) >= max_connections;
          conns.emplace(c.get(), c);
        }
        c->start(refuse);
        accept();
      });
}

// ---- HttpServer ---------------------------------------------------------------------------

HttpServer::HttpServer(Engine& engine, const ServerConfig& cfg, std::optional<ChatTemplate> tpl) {
  cfg.validate();
  VELA_CHECK(engine.tokenizer() != nullptr,
             "vela serve needs a tokenizer (tokenizer.json in the model directory)");
  impl_ = std::make_unique<Impl>(engine, cfg, std::move(tpl));
}

HttpServer::~HttpServer() { shutdown(); }

ServerContext& HttpServer::context() { return *impl_->ctx; }

int64_t HttpServer::n_connections() const { return impl_->n_connections(); }

int HttpServer::bind() {
  const ServerConfig& cfg = impl_->ctx->cfg;
  int64_t nofile = raise_nofile_limit();
  // Keep descriptors for the model files, the engine and the listener.
  if (nofile > 0 && impl_->max_connections > nofile - 64) {
    impl_->max_connections = std::max<int64_t>(1, nofile - 64);
    VELA_LOG_WARN("[server] the open-file limit is ", nofile, ": at most ", impl_->max_connections,
                  " connections (max_connections ", cfg.max_connections,
                  "); raise it with `ulimit -n`");
  }
  boost::system::error_code ec;
  tcp::resolver resolver(impl_->io);
  auto results = resolver.resolve(cfg.host, std::to_string(cfg.port), ec);
  VELA_CHECK_T(IoError, !ec && !results.empty(), "cannot resolve host '", cfg.host,
               "': ", ec.message());
  tcp::endpoint ep = results.begin()->endpoint();
  tcp::acceptor& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  VELA_CHECK_T(IoError, !ec, "cannot bind ", cfg.host, ":", cfg.port, " (", ec.message(),
               "; in use, or not a local address)");
  port_ = a.local_endpoint().port();
  return port_;
}

bool HttpServer::run() {
  VELA_CHECK(port_ > 0, "HttpServer::run() before bind()");
  impl_->accept();
  std::vector<std::thread> extra;
  for (int i = 1; i < impl_->ctx->cfg.io_threads; ++i)
    extra.emplace_back([this] { impl_->io.run(); });
  bool ok = true;
  try {
    impl_->io.run();
  } catch (const std::exception& e) {
    VELA_LOG_ERROR("[server] the I/O loop failed: ", e.what());
    ok = false;
    impl_->io.stop();
  }
  for (std::thread& t : extra) t.join();
  return ok;
}

void HttpServer::shutdown() {
  std::lock_guard<std::mutex> lock(shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  ServerContext& ctx = *impl_->ctx;
  ctx.draining.store(true);
  using namespace std::chrono;
  auto deadline = steady_clock::now() + duration<double>(ctx.cfg.shutdown_grace_s);
  int64_t n = ctx.n_in_flight();
  if (n > 0) VELA_LOG_INFO("[server] shutting down: waiting for ", n, " in-flight request(s)");
  while (ctx.n_in_flight() > 0 && steady_clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(20));
  if (ctx.n_in_flight() > 0) {
    VELA_LOG_INFO("[server] grace period over: cancelling ", ctx.n_in_flight(), " request(s)");
    ctx.cancel_all.store(true);
    ctx.cancel_in_flight();
    auto hard = steady_clock::now() + seconds(5);
    while (ctx.n_in_flight() > 0 && steady_clock::now() < hard)
      std::this_thread::sleep_for(milliseconds(20));
  }
  // Stop listening; let every connection finish the response it is writing, then close.
  auto closed = std::make_shared<std::promise<void>>();
  std::future<void> listener_closed = closed->get_future();
  asio::post(impl_->io, [impl = impl_.get(), closed] {
    boost::system::error_code ec;
    impl->acceptor.close(ec);
    impl->accept_retry.cancel();
    closed->set_value();
  });
  if (listener_closed.wait_for(seconds(2)) != std::future_status::ready) {
    boost::system::error_code ec;  // the I/O loop is not running (run() never called or over)
    impl_->acceptor.close(ec);
  }
  for (auto& c : impl_->connections()) c->stop_when_idle();
  auto flush_deadline = steady_clock::now() + seconds(3);
  while (impl_->n_connections() > 0 && steady_clock::now() < flush_deadline)
    std::this_thread::sleep_for(milliseconds(10));
  if (impl_->n_connections() > 0)
    VELA_LOG_INFO("[server] closing ", impl_->n_connections(),
                  " connection(s) that did not finish within 3 s");
  for (auto& c : impl_->connections()) c->force_close();
  impl_->work.reset();
  auto close_deadline = steady_clock::now() + seconds(1);
  while (impl_->n_connections() > 0 && steady_clock::now() < close_deadline)
    std::this_thread::sleep_for(milliseconds(10));
  impl_->io.stop();
}

}  // namespace vela
