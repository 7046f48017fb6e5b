// OpenAI chat completions and completions: request parsing (messages with system / developer /
// user / assistant / tool roles, content as a string or text parts, tools and tool_choice,
// sampling knobs), responses, and streaming chunks with incremental tool-call deltas.
#include "server/openai_api.h"

#include <memory>

#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/generation.h"
#include "server/request_fields.h"
#include "server/sse.h"

namespace vela {

namespace {

// ---- request parsing ----------------------------------------------------------------------

std::string content_text(const json& content, const std::string& param, bool allow_null) {
  if (content.is_null()) {
    if (!allow_null) throw ApiError(400, param + " must not be null", param);
    return "";
  }
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    throw ApiError(400, param + " must be a string or a list of content parts", param);
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    std::string pp = param + "[" + std::to_string(i) + "]";
    if (!part.is_object()) throw ApiError(400, pp + " must be an object", pp);
    const json* type = field(part, "type");
    std::string t = type ? string_field(*type, pp + ".type") : "";
    if (t != "text")
      throw ApiError(400,
                     pp + ".type '" + t + "' is not supported (this model takes text parts only)",
                     pp + ".type");
    const json* tx = field(part, "text");
    if (!tx) throw ApiError(400, pp + ".text is required", pp + ".text");
    text += string_field(*tx, pp + ".text");
  }
  return text;
}

json convert_tool_calls(const json& calls, const std::string& param) {
  if (!calls.is_array()) throw ApiError(400, param + " must be a list", param);
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    std::string pp = param + "[" + std::to_string(i) + "]";
    const json& c = calls[i];
    if (!c.is_object()) throw ApiError(400, pp + " must be an object", pp);
    const json* fn = field(c, "function");
    if (!fn || !fn->is_object()) throw ApiError(400, pp + ".function must be an object", pp);
    const json* name = field(*fn, "name");
    if (!name) throw ApiError(400, pp + ".function.name is required", pp + ".function.name");
    json call = {
        {"type", "function"},
        {"function", {{"name", string_field(*name, pp + ".function.name")}, {"arguments", "{}"}}}};
    if (const json* id = field(c, "id")) call["id"] = string_field(*id, pp + ".id");
    if (const json* args = field(*fn, "arguments")) {
      if (args->is_string()) {
        // The template prints a string as is and an object through tojson; pass objects so
        // every template sees the form it expects.
        json parsed = json::parse(args->get<std::string>(), nullptr, false);
        call["function"]["arguments"] = parsed.is_object() ? parsed : *args;
      } else if (args->is_object()) {
        call["function"]["arguments"] = *args;
      } else {
        throw ApiError(400, pp + ".function.arguments must be a JSON string",
                       pp + ".function.arguments");
      }
    }
    out.push_back(std::move(call));
  }
  return out;
}

json convert_messages(const ServerContext& ctx, const json& body) {
  const json* msgs = field(body, "messages");
  if (!msgs) throw ApiError(400, "messages is required", "messages");
  if (!msgs->is_array())
    throw ApiError(400, "messages must be a list of message objects", "messages");
  if (msgs->empty()) throw ApiError(400, "messages must not be empty", "messages");
  if (msgs->size() > static_cast<size_t>(ctx.cfg.max_messages))
    throw ApiError(400,
                   "too many messages (" + std::to_string(msgs->size()) + " > " +
                       std::to_string(ctx.cfg.max_messages) + ")",
                   "messages");
  json out = json::array();
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    std::string p = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw ApiError(400, p + " must be an object", p);
    const json* role_j = field(m, "role");
    if (!role_j) throw ApiError(400, p + ".role is required", p + ".role");
    std::string role = string_field(*role_j, p + ".role");
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      throw ApiError(400,
                     p + ".role '" + role +
                         "' is unknown (expected system, developer, user, assistant or tool)",
                     p + ".role");
    const json* tool_calls = role == "assistant" ? field(m, "tool_calls") : nullptr;
    const json* content = field(m, "content");
    if (!content && !tool_calls) throw ApiError(400, p + ".content is required", p + ".content");
    json msg = {
        {"role", role},
        {"content", content_text(content ? *content : json(nullptr), p + ".content", true)}};
    if (tool_calls) msg["tool_calls"] = convert_tool_calls(*tool_calls, p + ".tool_calls");
    if (const json* name = field(m, "name")) msg["name"] = string_field(*name, p + ".name");
    if (role == "tool")
      if (const json* id = field(m, "tool_call_id"))
        msg["tool_call_id"] = string_field(*id, p + ".tool_call_id");
    if (role == "assistant")
      if (const json* rc = field(m, "reasoning_content"))
        msg["reasoning_content"] = string_field(*rc, p + ".reasoning_content");
    out.push_back(std::move(msg));
  }
  return out;
}

json convert_tools(const json& tools) {
  if (!tools.is_array()) throw ApiError(400, "tools must be a list", "tools");
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    std::string p = "tools[" + std::to_string(i) + "]";
    const json& t = tools[i];
    if (!t.is_object()) throw ApiError(400, p + " must be an object", p);
    const json* type = field(t, "type");
    if (!type || string_field(*type, p + ".type") != "function")
      throw ApiError(400, p + ".type must be \"function\"", p + ".type");
    const json* fn = field(t, "function");
    if (!fn || !fn->is_object())
      throw ApiError(400, p + ".function must be an object", p + ".function");
    const json* name = field(*fn, "name");
    if (!name || string_field(*name, p + ".function.name").empty())
      throw ApiError(400, p + ".function.name must be a non-empty string", p + ".function.name");
    if (const json* params = field(*fn, "parameters"); params && !params->is_object())
      throw ApiError(400, p + ".function.parameters must be a JSON schema object",
                     p + ".function.parameters");
    if (const json* d = field(*fn, "description")) string_field(*d, p + ".function.description");
    out.push_back(t);
  }
  return out;
}

void parse_tool_choice(const json& body, ChatPrompt& cp) {
  const json* tc = field(body, "tool_choice");
  if (!tc) return;
  if (tc->is_string()) {
    std::string s = tc->get<std::string>();
    if (s != "none" && s != "auto" && s != "required")
      throw ApiError(400, "tool_choice must be none, auto, required or a function object",
                     "tool_choice");
    cp.tool_choice = s;
    return;
  }
  if (!tc->is_object())
    throw ApiError(400, "tool_choice must be a string or an object", "tool_choice");
  const json* fn = field(*tc, "function");
  const json* name = fn && fn->is_object() ? field(*fn, "name") : nullptr;
  if (!name) throw ApiError(400, "tool_choice.function.name is required", "tool_choice");
  cp.tool_choice = "function";
  cp.forced_tool = string_field(*name, "tool_choice.function.name");
}

std::optional<int32_t> requested_max_tokens(const json& body) {
  std::optional<int32_t> v;
  if (const json* m = field(body, "max_tokens")) v = int_field(*m, "max_tokens");
  if (const json* m = field(body, "max_completion_tokens"))
    v = int_field(*m, "max_completion_tokens");
  return v;
}

// ---- responses ----------------------------------------------------------------------------

json token_info(const Tokenizer& tok, int32_t id, float logprob) {
  std::string text = tok.decode({id});
  json bytes = json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return json{{"token", text}, {"logprob", logprob}, {"bytes", bytes}};
}

json chat_logprobs(const Tokenizer& tok, const std::vector<TokenLogprob>& lps) {
  json content = json::array();
  for (const TokenLogprob& lp : lps) {
    json e = token_info(tok, lp.token, lp.logprob);
    json top = json::array();
    for (const auto& [id, l] : lp.top) top.push_back(token_info(tok, id, l));
    e["top_logprobs"] = top;
    content.push_back(std::move(e));
  }
  return json{{"content", content}};
}

json usage_json(int64_t prompt, int64_t completion, int64_t cached) {
  return json{{"prompt_tokens", prompt},
              {"completion_tokens", completion},
              {"total_tokens", prompt + completion},
              {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

std::string finish_name(FinishReason r, bool tool_calls) {
  switch (r) {
    case FinishReason::kStop:
      return tool_calls ? "tool_calls" : "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "abort";
    case FinishReason::kError:
      return "error";
  }
  return "stop";
}

json tool_call_delta_json(const ToolCallDelta& d) {
  json j = {{"index", d.index}};
  if (d.start) {
    j["id"] = d.id;
    j["type"] = "function";
    j["function"] = {{"name", d.name}, {"arguments", d.arguments}};
  } else {
    j["function"] = {{"arguments", d.arguments}};
  }
  return j;
}

// Whitespace-only content next to tool calls is formatting, not an answer.
json content_value(const std::string& content, bool has_calls) {
  bool blank = content.find_first_not_of(" \n\r\t") == std::string::npos;
  if (has_calls && blank) return nullptr;
  return content;
}

struct ChatState {
  ServerContext* ctx = nullptr;
  std::unique_ptr<GenerationSession> session;
  std::vector<ChatOutputParser> parsers;
  std::vector<bool> role_sent;
  std::string id, model;
  int64_t created = 0;
  bool logprobs = false, include_usage = false;
};

json chunk(const ChatState& st, json choices) {
  return json{{"id", st.id},
              {"object", "chat.completion.chunk"},
              {"created", st.created},
              {"model", st.model},
              {"choices", std::move(choices)}};
}

// Writes one SSE payload; false (and the session marked) when the client is gone.
bool write_or_mark(GenerationSession& session, SseWriter& w, const std::string& s) {
  if (w.write(s)) return true;
  session.mark_client_gone();
  return false;
}

// One engine event of a streamed chat request; false when the client is gone.
bool chat_event(ChatState& st, const StreamEvent& ev, SseWriter& w) {
  auto write = [&](const std::string& s) { return write_or_mark(*st.session, w, s); };
  size_t i = static_cast<size_t>(ev.index);
  ChatDelta d = st.parsers[i].push(ev.text);
  if (ev.finish) {
    ChatDelta f = st.parsers[i].finish();
    d.reasoning += f.reasoning;
    d.content += f.content;
    for (auto& c : f.calls) d.calls.push_back(std::move(c));
  }
  if (ev.finish == FinishReason::kError) {
    json err = error_body(ApiFlavor::kOpenAI, 500, "generation failed: " + ev.error);
    return write(sse_data(err));
  }
  json delta = json::object();
  if (!st.role_sent[i]) {
    delta["role"] = "assistant";
    delta["content"] = "";
    st.role_sent[i] = true;
  }
  if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
  if (!d.content.empty()) delta["content"] = d.content;
  if (!d.calls.empty()) {
    json calls = json::array();
    for (const ToolCallDelta& c : d.calls) {
      if (!c.start && !calls.empty() && calls.back()["index"] == c.index) {
        calls.back()["function"]["arguments"] =
            calls.back()["function"]["arguments"].get<std::string>() + c.arguments;
      } else {
        calls.push_back(tool_call_delta_json(c));
      }
    }
    delta["tool_calls"] = calls;
  }
  bool has_lp = st.logprobs && !ev.logprobs.empty();
  if (!delta.empty() || has_lp) {
    json c = {
        {"index", ev.index}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
    if (has_lp) c["logprobs"] = chat_logprobs(st.ctx->tokenizer(), ev.logprobs);
    if (!write(sse_data(chunk(st, json::array({c}))))) return false;
  }
  if (ev.finish) {
    bool calls = !st.parsers[i].tool_calls().empty();
    json c = {{"index", ev.index},
              {"delta", json::object()},
              {"logprobs", nullptr},
              {"finish_reason", finish_name(*ev.finish, calls)}};
    return write(sse_data(chunk(st, json::array({c}))));
  }
  return true;
}

// The end of a streamed chat request: the usage chunk when asked for, then [DONE].
bool chat_end(ChatState& st, SseWriter& w) {
  auto write = [&](const std::string& s) { return write_or_mark(*st.session, w, s); };
  if (st.include_usage) {
    RequestResult r = st.session->result();
    int64_t completion = 0, cached = 0;
    for (const Completion& c : r.completions) {
      completion += static_cast<int64_t>(c.tokens.size());
      cached = std::max<int64_t>(cached, c.cached_tokens);
    }
    json u = chunk(st, json::array());
    u["usage"] = usage_json(r.prompt_tokens, completion, cached);
    if (!write(sse_data(u))) return false;
  }
  return write(kSseDone);
}

}  // namespace

void handle_chat_completions(ServerContext& ctx, const HttpRequest& req, HttpResponse& res) {
  Clock::time_point arrival = Clock::now();
  json body = parse_json_body(req.body);
  const std::string lora = check_model(ctx, body);
  ChatPrompt cp;
  cp.messages = convert_messages(ctx, body);
  if (const json* tools = field(body, "tools")) cp.tools = convert_tools(*tools);
  parse_tool_choice(body, cp);
  if (const json* ptc = field(body, "parallel_tool_calls"))
    cp.parallel_tool_calls = bool_field(*ptc, "parallel_tool_calls");
  if (const json* kw = field(body, "chat_template_kwargs")) {
    if (!kw->is_object())
      throw ApiError(400, "chat_template_kwargs must be an object", "chat_template_kwargs");
    cp.template_kwargs = *kw;
  }
  bool stream = false, include_usage = false;
  if (const json* s = field(body, "stream")) stream = bool_field(*s, "stream");
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) throw ApiError(400, "stream_options must be an object", "stream_options");
    if (const json* iu = field(*so, "include_usage"))
      include_usage = bool_field(*iu, "stream_options.include_usage");
  }
  if (const json* lp = field(body, "logprobs")) bool_field(*lp, "logprobs");
  std::optional<int32_t> max_tokens = requested_max_tokens(body);
  SamplingParams params = sampling_from_json(body);

  RenderedPrompt rp = render_chat_prompt(ctx, cp, "call_");
  // A forced tool call is constrained to the tool's schema (over any response_format); strict
  // tools under tool_choice auto lazily, from the model's "<tool_call>".
  params.constraint = tool_call_constraint(cp, rp, params.constraint);
  params.max_tokens = resolve_max_tokens(ctx, rp.ids.size(), max_tokens);
  Request request{rp.ids, params};
  request.lora = lora;

  auto st = std::make_shared<ChatState>();
  st->ctx = &ctx;
  st->session = std::make_unique<GenerationSession>(ctx, std::move(request), req.client, arrival);
  // One parser per choice (not copies): each announces its own tool-call ids.
  for (int32_t k = 0; k < params.n; ++k) st->parsers.emplace_back(rp.output);
  st->role_sent.assign(static_cast<size_t>(params.n), false);
  st->id = random_id("chatcmpl-");
  st->model = lora.empty() ? ctx.cfg.model_name : lora;
  st->created = unix_time();
  st->logprobs = params.logprobs;
  st->include_usage = include_usage;

  if (stream) {
    SseCallbacks cb;
    cb.sessions = {st->session.get()};
    cb.on_event = [p = st.get()](size_t, const StreamEvent& ev, SseWriter& w) {
      return chat_event(*p, ev, w);
    };
    cb.on_end = [p = st.get()](SseWriter& w) { return chat_end(*p, w); };
    cb.state = st;
    start_sse_stream(res, std::move(cb));
    return;
  }
  // Not streamed: the events feed the parsers; the response is built once the request ends.
  SseCallbacks cb;
  cb.sessions = {st->session.get()};
  cb.on_event = [p = st.get()](size_t, const StreamEvent& ev, SseWriter&) {
    p->parsers[static_cast<size_t>(ev.index)].push(ev.text);
    return true;
  };
  cb.respond = [st, &ctx, params](HttpResponse& res) {
    RequestResult r = st->session->result();
    json choices = json::array();
    int64_t completion = 0, cached = 0;
    for (size_t i = 0; i < r.completions.size(); ++i) {
      const Completion& c = r.completions[i];
      if (c.finish_reason == FinishReason::kError)
        throw ApiError(500, "generation failed: " + c.error);
      ChatOutputParser& p = st->parsers[i];
      p.finish();
      bool has_calls = !p.tool_calls().empty();
      json msg = {{"role", "assistant"}, {"content", content_value(p.content(), has_calls)}};
      if (!p.reasoning().empty()) msg["reasoning_content"] = p.reasoning();
      if (has_calls) {
        json calls = json::array();
        for (const ToolCall& tc : p.tool_calls())
          calls.push_back({{"id", tc.id},
                           {"type", "function"},
                           {"function", {{"name", tc.name}, {"arguments", tc.arguments}}}});
        msg["tool_calls"] = calls;
      }
      choices.push_back({{"index", i},
                         {"message", msg},
                         {"logprobs", params.logprobs ? chat_logprobs(ctx.tokenizer(), c.logprobs)
                                                      : json(nullptr)},
                         {"finish_reason", finish_name(c.finish_reason, has_calls)}});
      completion += static_cast<int64_t>(c.tokens.size());
      cached = std::max<int64_t>(cached, c.cached_tokens);
    }
    json out = {
        {"id", st->id},           {"object", "chat.completion"},
        {"created", st->created}, {"model", st->model},
        {"choices", choices},     {"usage", usage_json(r.prompt_tokens, completion, cached)}};
    res.set_content(dump_json(out), "application/json");
  };
  cb.state = st;
  defer_response(res, std::move(cb));
}

// ---- /v1/completions ----------------------------------------------------------------------

namespace {

// prompt: a string, a list of strings, a list of token ids, or a list of token-id lists.
std::vector<std::vector<int32_t>> completion_prompts(const ServerContext& ctx, const json& body,
                                                     std::vector<std::string>& texts) {
  const json* p = field(body, "prompt");
  if (!p) throw ApiError(400, "prompt is required", "prompt");
  std::vector<std::vector<int32_t>> out;
  auto encode = [&](const std::string& s) {
    try {
      out.push_back(ctx.tokenizer().encode(s, true));
    } catch (const Error& e) {
      throw ApiError(400, clean_error_message(e.what()), "prompt");
    }
    texts.push_back(s);
  };
  auto ids = [&](const json& list) {
    std::vector<int32_t> v;
    for (const json& e : list) v.push_back(int_field(e, "prompt"));
    for (int32_t id : v)
      if (id < 0 || id >= ctx.engine.model_config().vocab_size)
        throw ApiError(400, "prompt token id " + std::to_string(id) + " is outside the vocabulary",
                       "prompt");
    texts.push_back(ctx.tokenizer().decode(v));
    out.push_back(std::move(v));
  };
  if (p->is_string()) {
    encode(p->get<std::string>());
  } else if (p->is_array() && !p->empty()) {
    if ((*p)[0].is_string()) {
      for (const json& s : *p) encode(string_field(s, "prompt"));
    } else if ((*p)[0].is_array()) {
      for (const json& l : *p) {
        if (!l.is_array() || l.empty())
          throw ApiError(400, "prompt lists must be non-empty lists of token ids", "prompt");
        ids(l);
      }
    } else {
      ids(*p);
    }
  } else {
    throw ApiError(400,
                   "prompt must be a non-empty string, list of strings, list of token ids or list "
                   "of token-id lists",
                   "prompt");
  }
  if (out.size() > 64) throw ApiError(400, "at most 64 prompts per request", "prompt");
  for (const auto& v : out)
    if (v.empty()) throw ApiError(400, "prompt must not be empty", "prompt");
  return out;
}

json completion_logprobs(const Tokenizer& tok, const std::vector<TokenLogprob>& lps,
                         size_t text_offset) {
  json tokens = json::array(), token_lps = json::array(), tops = json::array(),
       offsets = json::array();
  for (const TokenLogprob& lp : lps) {
    std::string t = tok.decode({lp.token});
    tokens.push_back(t);
    token_lps.push_back(lp.logprob);
    json top = json::object();
    for (const auto& [id, l] : lp.top) top[tok.decode({id})] = l;
    tops.push_back(lp.top.empty() ? json(nullptr) : top);
    offsets.push_back(text_offset);
    text_offset += t.size();
  }
  return json{{"tokens", tokens},
              {"token_logprobs", token_lps},
              {"top_logprobs", tops},
              {"text_offset", offsets}};
}

struct CompletionState {
  ServerContext* ctx = nullptr;
  std::vector<std::unique_ptr<GenerationSession>> sessions;
  std::vector<std::string> prompt_texts;
  std::string id, model;
  int64_t created = 0;
  int32_t n = 1;
  bool echo = false, logprobs = false, include_usage = false;
  std::vector<size_t> offsets;  // streaming: text offset per choice (logprobs)
};

json completion_chunk(const CompletionState& st, json choice) {
  return json{{"id", st.id},
              {"object", "text_completion"},
              {"created", st.created},
              {"model", st.model},
              {"choices", json::array({std::move(choice)})}};
}

// A write of a streamed completions request; on failure every session is marked.
bool completion_write(CompletionState& st, SseWriter& w, const std::string& s) {
  if (w.write(s)) return true;
  for (auto& s2 : st.sessions) s2->mark_client_gone();
  return false;
}

// The echoed prompts, before any event.
bool completions_start(CompletionState& st, SseWriter& w) {
  st.offsets.assign(st.sessions.size() * static_cast<size_t>(st.n), 0);
  if (st.echo)
    for (size_t p = 0; p < st.sessions.size(); ++p)
      for (int32_t k = 0; k < st.n; ++k)
        if (!completion_write(st, w,
                              sse_data(completion_chunk(st, {{"index", p * st.n + k},
                                                             {"text", st.prompt_texts[p]},
                                                             {"logprobs", nullptr},
                                                             {"finish_reason", nullptr}}))))
          return false;
  return true;
}

// One engine event of prompt `p`.
bool completions_event(CompletionState& st, size_t p, const StreamEvent& ev, SseWriter& w) {
  size_t idx = p * static_cast<size_t>(st.n) + static_cast<size_t>(ev.index);
  if (ev.finish == FinishReason::kError)
    return completion_write(
        st, w, sse_data(error_body(ApiFlavor::kOpenAI, 500, "generation failed: " + ev.error)));
  json choice = {
      {"index", idx},
      {"text", ev.text},
      {"logprobs", nullptr},
      {"finish_reason", ev.finish ? json(finish_name(*ev.finish, false)) : json(nullptr)}};
  if (st.logprobs && !ev.logprobs.empty())
    choice["logprobs"] = completion_logprobs(st.ctx->tokenizer(), ev.logprobs, st.offsets[idx]);
  st.offsets[idx] += ev.text.size();
  if (ev.text.empty() && !ev.finish && !(st.logprobs && !ev.logprobs.empty())) return true;
  return completion_write(st, w, sse_data(completion_chunk(st, choice)));
}

bool completions_end(CompletionState& st, SseWriter& w) {
  if (st.include_usage) {
    int64_t prompt = 0, completion = 0;
    for (auto& s : st.sessions) {
      RequestResult r = s->result();
      prompt += r.prompt_tokens;
      for (const Completion& c : r.completions) completion += static_cast<int64_t>(c.tokens.size());
    }
    json u = {{"id", st.id},
              {"object", "text_completion"},
              {"created", st.created},
              {"model", st.model},
              {"choices", json::array()},
              {"usage", usage_json(prompt, completion, 0)}};
    if (!completion_write(st, w, sse_data(u))) return false;
  }
  return completion_write(st, w, kSseDone);
}

}  // namespace

void handle_completions(ServerContext& ctx, const HttpRequest& req, HttpResponse& res) {
  Clock::time_point arrival = Clock::now();
  json body = parse_json_body(req.body);
  const std::string lora = check_model(ctx, body);
  auto st = std::make_shared<CompletionState>();
  st->ctx = &ctx;
  std::vector<std::vector<int32_t>> prompts = completion_prompts(ctx, body, st->prompt_texts);
  bool stream = false;
  if (const json* s = field(body, "stream")) stream = bool_field(*s, "stream");
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) throw ApiError(400, "stream_options must be an object", "stream_options");
    if (const json* iu = field(*so, "include_usage"))
      st->include_usage = bool_field(*iu, "stream_options.include_usage");
  }
  if (const json* e = field(body, "echo")) st->echo = bool_field(*e, "echo");
  if (const json* s = field(body, "suffix");
      s && !(s->is_string() && s->get<std::string>().empty()))
    throw ApiError(400, "suffix is not supported", "suffix");
  std::optional<int32_t> max_tokens = requested_max_tokens(body);
  if (!max_tokens) max_tokens = 16;  // the OpenAI default for completions
  SamplingParams params = sampling_from_json(body);
  if (const json* b = field(body, "best_of"); b && int_field(*b, "best_of") != params.n)
    throw ApiError(400, "best_of other than n is not supported", "best_of");
  if (st->echo && params.logprobs)
    throw ApiError(400, "echo with logprobs is not supported (no prompt logprobs)", "echo");
  if (static_cast<int64_t>(prompts.size()) * params.n > ctx.cfg.max_n)
    throw ApiError(400, "prompts x n must be at most " + std::to_string(ctx.cfg.max_n), "n");
  st->n = params.n;
  st->logprobs = params.logprobs;
  for (const auto& ids : prompts) {
    SamplingParams p = params;
    p.max_tokens = resolve_max_tokens(ctx, ids.size(), max_tokens);
    Request r{ids, p};
    r.lora = lora;
    st->sessions.push_back(
        std::make_unique<GenerationSession>(ctx, std::move(r), req.client, arrival));
  }
  st->id = random_id("cmpl-");
  st->model = lora.empty() ? ctx.cfg.model_name : lora;
  st->created = unix_time();
  if (stream) {
    SseCallbacks cb;
    for (auto& s : st->sessions) cb.sessions.push_back(s.get());
    cb.on_start = [p = st.get()](SseWriter& w) { return completions_start(*p, w); };
    cb.on_event = [p = st.get()](size_t i, const StreamEvent& ev, SseWriter& w) {
      return completions_event(*p, i, ev, w);
    };
    cb.on_end = [p = st.get()](SseWriter& w) { return completions_end(*p, w); };
    cb.state = st;
    start_sse_stream(res, std::move(cb));
    return;
  }
  // Not streamed: the response is built once every prompt's request has ended.
  SseCallbacks cb;
  for (auto& s : st->sessions) cb.sessions.push_back(s.get());
  cb.on_event = [](size_t, const StreamEvent&, SseWriter&) { return true; };
  cb.respond = [st, &ctx, params](HttpResponse& res) {
    json choices = json::array();
    int64_t prompt_total = 0, completion = 0, cached = 0;
    for (size_t p = 0; p < st->sessions.size(); ++p) {
      RequestResult r = st->sessions[p]->result();
      prompt_total += r.prompt_tokens;
      for (size_t k = 0; k < r.completions.size(); ++k) {
        const Completion& c = r.completions[k];
        if (c.finish_reason == FinishReason::kError)
          throw ApiError(500, "generation failed: " + c.error);
        std::string prefix = st->echo ? st->prompt_texts[p] : "";
        choices.push_back(
            {{"index", p * static_cast<size_t>(params.n) + k},
             {"text", prefix + c.text},
             {"logprobs", params.logprobs ? completion_logprobs(ctx.tokenizer(), c.logprobs, 0)
                                          : json(nullptr)},
             {"finish_reason", finish_name(c.finish_reason, false)}});
        completion += static_cast<int64_t>(c.tokens.size());
        cached += c.cached_tokens;
      }
    }
    json out = {{"id", st->id},           {"object", "text_completion"},
                {"created", st->created}, {"model", st->model},
                {"choices", choices},     {"usage", usage_json(prompt_total, completion, cached)}};
    res.set_content(dump_json(out), "application/json");
  };
  cb.state = st;
  defer_response(res, std::move(cb));
}

json models_list(const ServerContext& ctx) {
  const int64_t now = unix_time();
  json m = {{"id", ctx.cfg.model_name},
            {"object", "model"},
            {"created", now},
            {"owned_by", "vela"},
            {"max_model_len", ctx.engine.max_context()}};
  json data = json::array({m});
  for (const std::string& a : ctx.engine.lora_names())  // vLLM lists adapters with their parent
    data.push_back({{"id", a},
                    {"object", "model"},
                    {"created", now},
                    {"owned_by", "vela"},
                    {"parent", ctx.cfg.model_name},
                    {"max_model_len", ctx.engine.max_context()}});
  return json{{"object", "list"}, {"data", data}};
}

}  // namespace vela
