// `vela serve --model DIR`: the OpenAI / Anthropic-compatible HTTP server (src/server/) over one
// Engine. Options come from --config serve.json (same keys, '_' for '-') with flags on top.
// SIGTERM / SIGINT shut down gracefully: new requests get 503, in-flight ones finish within the
// grace period or are cancelled, then the process exits 0.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_dtype.h"
#include "core/json.h"
#include "core/log.h"
#include "core/startup_log.h"
#include "engine/cache/kv_sizing.h"
#include "engine/engine.h"
#include "model/lora_adapter.h"
#include "server/http_server.h"
#include "tokenizer/chat_template.h"

namespace vela::cli {

namespace {

int g_signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
  char c = static_cast<char>(sig);
  if (write(g_signal_pipe[1], &c, 1) < 0) {
  }  // async-signal-safe; nothing else to do on failure
}

// The step budget `vela serve` uses when none is given (0 / -1 = not given); why these values:
// docs/serving.md "Scheduling" and bench/results/serve_chunked_cpu.txt.
void serving_step_defaults(EngineConfig& ec, Device device) {
  const bool cuda = device.is_cuda();
  // At least one token per decode row (a value given explicitly is checked by the Engine).
  if (ec.max_tokens_per_step == 0)
    ec.max_tokens_per_step = std::max(cuda ? 512 : 256, ec.max_seqs);
  if (ec.max_prefill_chunk < 0) ec.max_prefill_chunk = 0;
}

json read_config_file(const std::string& path) {
  std::ifstream f(path);
  VELA_CHECK_T(IoError, f.good(), "cannot open the serve config ", path);
  json j = json::parse(f, nullptr, /*allow_exceptions=*/false);
  VELA_CHECK(!j.is_discarded() && j.is_object(), "serve config ", path, " is not a JSON object");
  return j;
}

template <typename T>
T config_value(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if constexpr (std::is_same_v<T, std::string>) {
    VELA_CHECK(it->is_string(), "serve config: ", key, " must be a string");
  } else {
    VELA_CHECK(it->is_number(), "serve config: ", key, " must be a number");
  }
  return it->get<T>();
}

}  // namespace

int cmd_serve(int argc, char** argv) {
  Args args(argc, argv, {"help", "no-web-ui"});
  if (args.has("help")) {
    std::printf(
        "usage: vela serve --model DIR [--host 127.0.0.1] [--port 8000] [--api-key K]\n"
        "                  [--max-batch N] [--kv-pages N | --kv-memory-fraction F]\n"
        "                  [--config serve.json] [--served-model-name NAME] [--max-queue N]\n"
        "                  [--lora NAME=DIR ...] [--max-context N] [--page-size N]\n"
        "                  [--device cpu|cuda] [--dtype auto|f32|bf16|f16]\n"
        "                  [--shutdown-grace S] [--max-body-bytes N] [--http-threads N] "
        "[--no-web-ui]\n"
        "                  [--io-threads N] [--max-connections N] [--header-timeout S]\n"
        "                  [--body-timeout S] [--idle-timeout S] [--write-timeout S]\n"
        "                  [--speculative ngram,k=4 | draft=DIR,k=4 | off] (docs/speculative.md)\n"
        "                  [--max-tokens-per-step N] [--max-prefill-chunk N]\n"
        "                  [--max-prefills-per-step N] [--prefill-policy fcfs|prefix]\n"
        "                  [--tool-call-parser hermes|llama3_json] (default: from the chat "
        "template)\n"
        "The API key can also come from VELA_API_KEY. Routes: /v1/chat/completions,\n"
        "/v1/completions, /v1/models, /v1/messages, /v1/messages/count_tokens, /health, /stats,\n"
        "/metrics, / (chat page). See docs/serving.md.\n");
    return 0;
  }
  json file = args.has("config") ? read_config_file(args.get("config", "")) : json::object();
  const std::vector<std::string> lora_args = args.get_all("lora");  // NAME=DIR, repeatable
  std::string dir =
      args.has("model") ? args.require("model") : config_value<std::string>(file, "model", "");
  VELA_CHECK(!dir.empty(), "--model DIR is required");

  ServerConfig sc;
  json server_keys = file;
  for (const char* k :
       {"model", "max_batch", "kv_pages", "kv_memory_fraction", "max_queue", "max_context",
        "page_size", "device", "dtype", "lora", "speculative", "max_tokens_per_step",
        "max_prefill_chunk", "max_prefills_per_step", "prefill_policy"})
    server_keys.erase(k);
  static const std::set<std::string> kKnown = {"host",
                                               "port",
                                               "api_key",
                                               "served_model_name",
                                               "max_body_bytes",
                                               "max_messages",
                                               "max_n",
                                               "http_threads",
                                               "max_pending_requests",
                                               "io_threads",
                                               "max_connections",
                                               "header_timeout_s",
                                               "body_timeout_s",
                                               "idle_timeout_s",
                                               "write_timeout_s",
                                               "retry_after_s",
                                               "shutdown_grace_s",
                                               "web_ui",
                                               "tool_call_parser"};
  // Keys of earlier versions: say what replaced them instead of only "unknown".
  static const std::map<std::string, std::string> kRetired = {
      {"max_pending_connections",
       "was retired with the event-driven HTTP layer (a waiting connection holds no thread); "
       "use 'max_connections' to bound the open connections"}};
  for (const auto& [k, v] : server_keys.items()) {
    if (auto it = kRetired.find(k); it != kRetired.end())
      VELA_THROW(InvalidArgument, "serve config: '", k, "' ", it->second);
    VELA_CHECK(kKnown.count(k), "serve config: unknown key '", k, "'");
  }
  sc.apply_json(server_keys);
  if (const char* env = std::getenv("VELA_API_KEY"); env && *env && sc.api_key.empty())
    sc.api_key = env;
  sc.host = args.get("host", sc.host);
  sc.port = static_cast<int>(args.get_int("port", sc.port));
  sc.api_key = args.get("api-key", sc.api_key);
  sc.model_name = args.get("served-model-name", sc.model_name);
  sc.model_dir = dir;
  sc.shutdown_grace_s = args.get_double("shutdown-grace", sc.shutdown_grace_s);
  sc.max_body_bytes = args.get_int("max-body-bytes", sc.max_body_bytes);
  sc.http_threads = static_cast<int32_t>(args.get_int("http-threads", sc.http_threads));
  sc.io_threads = static_cast<int32_t>(args.get_int("io-threads", sc.io_threads));
  sc.max_connections = static_cast<int32_t>(args.get_int("max-connections", sc.max_connections));
  sc.header_timeout_s = args.get_double("header-timeout", sc.header_timeout_s);
  sc.body_timeout_s = args.get_double("body-timeout", sc.body_timeout_s);
  sc.idle_timeout_s = args.get_double("idle-timeout", sc.idle_timeout_s);
  sc.write_timeout_s = args.get_double("write-timeout", sc.write_timeout_s);
  sc.tool_call_parser = args.get("tool-call-parser", sc.tool_call_parser);
  if (args.has("no-web-ui")) sc.web_ui = false;
  if (sc.model_name.empty())
    sc.model_name = std::filesystem::path(dir).lexically_normal().filename().string();
  if (sc.model_name.empty()) sc.model_name = "vela";

  EngineConfig ec;
  ec.max_seqs = static_cast<int32_t>(
      args.get_int("max-batch", config_value<int64_t>(file, "max_batch", ec.max_seqs)));
  ec.max_waiting = static_cast<int32_t>(
      args.get_int("max-queue", config_value<int64_t>(file, "max_queue", ec.max_waiting)));
  ec.max_ctx = static_cast<int32_t>(
      args.get_int("max-context", config_value<int64_t>(file, "max_context", 0)));
  ec.page_size = static_cast<int32_t>(
      args.get_int("page-size", config_value<int64_t>(file, "page_size", ec.page_size)));
  ec.speculative = SpeculativeConfig::parse(
      args.get("speculative", config_value<std::string>(file, "speculative", "off")));
  ec.kv_pages = args.get_int("kv-pages", config_value<int64_t>(file, "kv_pages", 0));
  ec.kv_memory_fraction =
      args.get_double("kv-memory-fraction", config_value<double>(file, "kv_memory_fraction", 0.0));
  // Chunked prefill (docs/serving.md "Scheduling"). The serving default budget is smaller than
  // the engine's offline one: a step's time grows with its tokens, and every decode row waits
  // for the whole step.
  ec.max_tokens_per_step = static_cast<int32_t>(
      args.get_int("max-tokens-per-step", config_value<int64_t>(file, "max_tokens_per_step", 0)));
  ec.max_prefill_chunk = static_cast<int32_t>(
      args.get_int("max-prefill-chunk", config_value<int64_t>(file, "max_prefill_chunk", -1)));
  ec.max_prefills_per_step = static_cast<int32_t>(
      args.get_int("max-prefills-per-step",
                   config_value<int64_t>(file, "max_prefills_per_step", ec.max_prefills_per_step)));
  ec.prefill_policy =
      args.get("prefill-policy", config_value<std::string>(file, "prefill_policy", "fcfs"));
  Device device =
      Device::parse(args.get("device", config_value<std::string>(file, "device", "cpu")));
  DType dtype =
      resolve_model_dtype(args.get("dtype", config_value<std::string>(file, "dtype", "auto")), dir,
                          device);
  args.check_all_used();
  sc.validate();
  serving_step_defaults(ec, device);
  KvSizingRequest{ec.kv_pages, ec.kv_memory_fraction, 0, ec.page_size, 1}.validate();

  namespace fs = std::filesystem;
  // The chat template is read and parsed on its own thread while the engine loads.
  std::future<std::optional<ChatTemplate>> tpl_future =
      std::async(std::launch::async, [dir]() -> std::optional<ChatTemplate> {
        if (!fs::exists(fs::path(dir) / "tokenizer_config.json") &&
            !fs::exists(fs::path(dir) / "chat_template.jinja"))
          return std::nullopt;
        StartupPhase phase("chat template load");
        try {
          return ChatTemplate::from_tokenizer_config(dir);
        } catch (const Error& e) {
          VELA_LOG_WARN("[serve] no usable chat template (", e.what(),
                        "): chat routes will answer 400");
        }
        return std::nullopt;
      });

  std::vector<std::pair<std::string, std::string>> adapters;
  for (const std::string& a : lora_args) adapters.push_back(parse_lora_arg(a));
  if (adapters.empty() && file.contains("lora")) {
    VELA_CHECK(file["lora"].is_array(), "serve config: \"lora\" must be a list of \"NAME=DIR\"");
    for (const json& a : file["lora"]) {
      VELA_CHECK(a.is_string(), "serve config: \"lora\" entries must be \"NAME=DIR\" strings");
      adapters.push_back(parse_lora_arg(a.get<std::string>()));
    }
  }
  for (const auto& [name, adir] : adapters)
    VELA_CHECK(name != sc.model_name, "--lora name '", name, "' is the served model's own name");
  std::unique_ptr<Engine> engine = Engine::load(dir, ec, dtype, device, adapters);
  if (!adapters.empty())
    VELA_LOG_INFO("[serve] ", adapters.size(),
                  " LoRA adapter(s): ", json(engine->lora_names()).dump(),
                  " (request \"model\" picks one)");
  std::optional<ChatTemplate> tpl = tpl_future.get();
  std::optional<HttpServer> server_slot;
  int port = 0;
  {
    StartupPhase phase("server bind");
    server_slot.emplace(*engine, sc, std::move(tpl));
    port = server_slot->bind();
  }
  HttpServer& server = *server_slot;
  startup_mark("serving");
  // SIGTERM / SIGINT: a handler (whichever thread receives the signal — threads that libraries
  // start before main cannot have it blocked) writes to a pipe; a watcher thread shuts down.
  VELA_CHECK_T(IoError, pipe(g_signal_pipe) == 0, "cannot create the signal pipe");
  struct sigaction sa = {};
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not kill the server
  std::thread signals([&server] {
    char sig = 0;
    while (read(g_signal_pipe[0], &sig, 1) < 0 && errno == EINTR) {
    }
    if (sig == 0) return;  // the pipe closed: normal exit
    VELA_LOG_INFO("[serve] signal ", static_cast<int>(sig), ": shutting down");
    std::fprintf(stderr, "vela serve: signal %d, shutting down\n", static_cast<int>(sig));
    server.shutdown();
  });
  std::fprintf(stderr, "vela serve: %s (%s on %s) on http://%s:%d (max context %d, max batch %d)\n",
               sc.model_name.c_str(), dtype_name(dtype), device.str().c_str(), sc.host.c_str(), port,
               engine->max_context(), ec.max_seqs);
  std::fflush(stderr);
  bool ok = server.run();
  server.shutdown();
  char zero = 0;
  if (write(g_signal_pipe[1], &zero, 1) < 0) {
  }
  signals.join();
  std::fprintf(stderr, "vela serve: stopped\n");
  return ok ? 0 : 1;
}

}  // namespace vela::cli
