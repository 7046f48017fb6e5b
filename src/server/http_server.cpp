// HttpServer: route table, pre-routing checks (overflow, draining, API key), the handler wrapper
// that turns exceptions into error objects, the request logger feeding metrics, and shutdown.
#include "server/http_server.h"

#include <httplib.h>

#include <atomic>
#include <thread>

#include "core/log.h"
#include "server/anthropic_api.h"
#include "server/api_error.h"
#include "server/auth.h"
#include "server/bounded_task_queue.h"
#include "server/openai_api.h"
#include "server/web_ui.h"

namespace vela {

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

void set_error(httplib::Response& res, ApiFlavor flavor, int status, const std::string& message,
               const std::string& param = "", const std::string& code = "", int retry_after = -1) {
  res.status = status;
  if (retry_after >= 0) res.set_header("Retry-After", std::to_string(retry_after));
  res.set_content(dump_json(error_body(flavor, status, message, param, code)), "application/json");
}

std::atomic<uint64_t> g_error_id{1};

// GET /model-card: the served directory's README.md, for the chat page's model card panel.
void handle_model_card(ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  std::optional<std::string> card = read_model_card(ctx.cfg.model_dir);
  if (!card)
    throw ApiError(404, "the served model directory has no README.md (model card)", "",
                   "model_card_not_found");
  res.set_content(*card, "text/markdown; charset=utf-8");
}

}  // namespace

HttpServer::HttpServer(Engine& engine, const ServerConfig& cfg, std::optional<ChatTemplate> tpl) {
  cfg.validate();
  VELA_CHECK(engine.tokenizer() != nullptr,
             "vela serve needs a tokenizer (tokenizer.json in the model directory)");
  ctx_ = std::make_unique<ServerContext>(engine, cfg, std::move(tpl));
  svr_ = std::make_unique<httplib::Server>();
  size_t threads = static_cast<size_t>(cfg.http_threads);
  size_t pending = static_cast<size_t>(cfg.max_pending_connections);
  svr_->new_task_queue = [threads, pending] { return new BoundedTaskQueue(threads, pending); };
  svr_->set_payload_max_length(static_cast<size_t>(cfg.max_body_bytes));
  svr_->set_keep_alive_max_count(1000);
  svr_->set_tcp_nodelay(true);
  install_routes();
}

HttpServer::~HttpServer() { shutdown(); }

void HttpServer::install_routes() {
  ServerContext& ctx = *ctx_;
  httplib::Server& svr = *svr_;
  int retry = ctx.cfg.retry_after_s;

  svr.set_pre_routing_handler([&ctx, retry](const httplib::Request& req, httplib::Response& res) {
    ApiFlavor fl = flavor_of(req.path);
    if (BoundedTaskQueue::in_overflow_thread()) {
      ctx.metrics.rejected_overload();
      res.set_header("Connection", "close");
      set_error(res, fl, 503, "the server is overloaded (too many connections); retry later", "",
                "overloaded", retry);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (ctx.draining.load() && req.path != "/metrics" && req.path != "/stats") {
      res.set_header("Connection", "close");
      if (req.path == "/health") {
        res.status = 503;
        res.set_content(R"({"status":"draining"})", "application/json");
      } else {
        set_error(res, fl, 503, "the server is shutting down", "", "shutting_down", retry);
      }
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.path != "/health" && req.path != "/" &&
        !api_key_ok(ctx.cfg.api_key, req.get_header_value("Authorization"),
                    req.get_header_value("x-api-key"))) {
      set_error(res, fl, 401,
                "missing or invalid API key (send `Authorization: Bearer <key>` or `x-api-key`)",
                "", "invalid_api_key");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  using Fn = void (*)(ServerContext&, const httplib::Request&, httplib::Response&);
  auto wrap = [&ctx, retry](Fn fn) {
    return [&ctx, retry, fn](const httplib::Request& req, httplib::Response& res) {
      ApiFlavor fl = flavor_of(req.path);
      try {
        fn(ctx, req, res);
      } catch (const ApiError& e) {
        int ra = e.status() == 429 || e.status() == 503 ? retry : -1;
        set_error(res, fl, e.status(), e.message(), e.param(), e.code(), ra);
      } catch (const InvalidArgument& e) {
        set_error(res, fl, 400, clean_error_message(e.what()));
      } catch (const std::exception& e) {
        uint64_t id = g_error_id.fetch_add(1);
        VELA_LOG_ERROR("[server] internal error #", id, " on ", req.method, " ", req.path, ": ",
                       e.what());
        set_error(res, fl, 500, "internal server error (id " + std::to_string(id) + ")");
      }
    };
  };
  svr.Post("/v1/chat/completions", wrap(&handle_chat_completions));
  svr.Post("/v1/completions", wrap(&handle_completions));
  svr.Post("/v1/messages", wrap(&handle_messages));
  svr.Post("/v1/messages/count_tokens", wrap(&handle_count_tokens));
  svr.Get("/v1/models", [&ctx](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump_json(models_list(ctx)), "application/json");
  });
  svr.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  svr.Get("/stats", [&ctx](const httplib::Request& req, httplib::Response& res) {
    json j = ctx.metrics.stats_json(ctx.engine.stats());
    if (req.has_param("check")) {  // /stats?check=1: run the KV cache's integrity check too
      std::string broken = ctx.engine.check_integrity();
      j["kv_integrity"] = broken.empty() ? "ok" : broken;
    }
    j["model"] = ctx.cfg.model_name;
    j["max_context"] = ctx.engine.max_context();
    res.set_content(dump_json(j), "application/json");
  });
  svr.Get("/metrics", [&ctx](const httplib::Request&, httplib::Response& res) {
    res.set_content(ctx.metrics.prometheus(ctx.engine.stats()), "text/plain; version=0.0.4");
  });
  svr.Get("/model-card", wrap(&handle_model_card));
  if (ctx.cfg.web_ui) {
    svr.Get("/", [](const httplib::Request&, httplib::Response& res) {
      std::string_view page = web_ui_html();
      res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
    });
  }

  // Statuses without a body (404 route, 405, 413 too large, 400 unparsable HTTP): an error object.
  svr.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        ApiFlavor fl = flavor_of(req.path);
        bool form =
            req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0;
        std::string msg = "HTTP error " + std::to_string(res.status);
        if (res.status == 404) msg = "no route " + req.method + " " + req.path;
        if (res.status == 413)
          msg = form ? "form-encoded bodies over 8 KiB are refused by the HTTP library; send "
                       "Content-Type: application/json"
                     : "the request body is too large";
        set_error(res, fl, res.status, msg);
        return httplib::Server::HandlerResponse::Handled;
      }));
  svr.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        uint64_t id = g_error_id.fetch_add(1);
        VELA_LOG_ERROR("[server] internal error #", id, " on ", req.path, ": ", what);
        set_error(res, flavor_of(req.path), 500,
                  "internal server error (id " + std::to_string(id) + ")");
      });
  svr.set_logger([&ctx](const httplib::Request& req, const httplib::Response& res) {
    ctx.metrics.count_request(route_label(req.path), res.status);
    VELA_LOG_DEBUG("[server] ", req.method, " ", req.path, " -> ", res.status);
  });
}

int HttpServer::bind() {
  const ServerConfig& cfg = ctx_->cfg;
  if (cfg.port == 0) {
    port_ = svr_->bind_to_any_port(cfg.host);
    VELA_CHECK_T(IoError, port_ > 0, "cannot bind ", cfg.host, " on any port");
  } else {
    VELA_CHECK_T(IoError, svr_->bind_to_port(cfg.host, cfg.port), "cannot bind ", cfg.host, ":",
                 cfg.port, " (in use, or not a local address)");
    port_ = cfg.port;
  }
  return port_;
}

bool HttpServer::run() {
  VELA_CHECK(port_ > 0, "HttpServer::run() before bind()");
  return svr_->listen_after_bind();
}

void HttpServer::shutdown() {
  std::lock_guard<std::mutex> lock(shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  ServerContext& ctx = *ctx_;
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
  svr_->stop();
}

}  // namespace vela
