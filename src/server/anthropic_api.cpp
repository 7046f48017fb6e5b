// Anthropic Messages API over the shared chat pipeline: system (string or text blocks), content
// blocks text / tool_use / tool_result (/ thinking), tools with input_schema, tool_choice
// auto / any / tool / none, stop_sequences; stop reasons end_turn / max_tokens / stop_sequence /
// tool_use. Reasoning (<think>) comes back as thinking blocks.
#include "server/anthropic_api.h"

#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/generation.h"
#include "server/request_fields.h"
#include "server/sse.h"

namespace vela {

namespace {

std::string block_text(const json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    throw ApiError(400, param + " must be a string or a list of blocks", param);
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    std::string p = param + "." + std::to_string(i);
    const json& b = content[i];
    if (!b.is_object()) throw ApiError(400, p + " must be an object", p);
    const json* type = field(b, "type");
    std::string t = type ? string_field(*type, p + ".type") : "";
    if (t != "text")
      throw ApiError(400, p + ": only text blocks are allowed here, got '" + t + "'", p);
    const json* tx = field(b, "text");
    if (!tx) throw ApiError(400, p + ".text is required", p + ".text");
    text += string_field(*tx, p + ".text");
  }
  return text;
}

// Anthropic messages -> template messages (tool_result blocks become role "tool" messages).
ChatPrompt convert_request(const ServerContext& ctx, const json& body) {
  ChatPrompt cp;
  if (const json* sys = field(body, "system"))
    cp.messages.push_back({{"role", "system"}, {"content", block_text(*sys, "system")}});
  const json* msgs = field(body, "messages");
  if (!msgs) throw ApiError(400, "messages: field required", "messages");
  if (!msgs->is_array()) throw ApiError(400, "messages must be a list", "messages");
  if (msgs->empty()) throw ApiError(400, "messages: at least one message is required", "messages");
  if (msgs->size() > static_cast<size_t>(ctx.cfg.max_messages))
    throw ApiError(400, "too many messages", "messages");
  for (size_t i = 0; i < msgs->size(); ++i) {
    std::string p = "messages." + std::to_string(i);
    const json& m = (*msgs)[i];
    if (!m.is_object()) throw ApiError(400, p + " must be an object", p);
    const json* role_j = field(m, "role");
    if (!role_j) throw ApiError(400, p + ".role: field required", p + ".role");
    std::string role = string_field(*role_j, p + ".role");
    if (role != "user" && role != "assistant")
      throw ApiError(400, p + ".role: unexpected role '" + role + "' (user or assistant)",
                     p + ".role");
    const json* content = field(m, "content");
    if (!content) throw ApiError(400, p + ".content: field required", p + ".content");
    if (content->is_string()) {
      cp.messages.push_back({{"role", role}, {"content", content->get<std::string>()}});
      continue;
    }
    if (!content->is_array())
      throw ApiError(400, p + ".content must be a string or a list of blocks", p + ".content");
    std::string text, thinking;
    json tool_calls = json::array();
    json tool_results = json::array();
    for (size_t k = 0; k < content->size(); ++k) {
      std::string bp = p + ".content." + std::to_string(k);
      const json& b = (*content)[k];
      if (!b.is_object()) throw ApiError(400, bp + " must be an object", bp);
      const json* type_j = field(b, "type");
      if (!type_j) throw ApiError(400, bp + ".type: field required", bp + ".type");
      std::string type = string_field(*type_j, bp + ".type");
      if (type == "text") {
        const json* tx = field(b, "text");
        if (!tx) throw ApiError(400, bp + ".text: field required", bp + ".text");
        text += string_field(*tx, bp + ".text");
      } else if (type == "thinking" && role == "assistant") {
        if (const json* th = field(b, "thinking")) thinking += string_field(*th, bp + ".thinking");
      } else if (type == "redacted_thinking" && role == "assistant") {
      } else if (type == "tool_use" && role == "assistant") {
        const json* name = field(b, "name");
        if (!name) throw ApiError(400, bp + ".name: field required", bp + ".name");
        const json* input = field(b, "input");
        if (input && !input->is_object())
          throw ApiError(400, bp + ".input must be an object", bp + ".input");
        json call = {{"type", "function"},
                     {"function",
                      {{"name", string_field(*name, bp + ".name")},
                       {"arguments", input ? *input : json::object()}}}};
        if (const json* id = field(b, "id")) call["id"] = string_field(*id, bp + ".id");
        tool_calls.push_back(std::move(call));
      } else if (type == "tool_result" && role == "user") {
        std::string result;
        if (const json* c = field(b, "content")) result = block_text(*c, bp + ".content");
        json msg = {{"role", "tool"}, {"content", result}};
        if (const json* id = field(b, "tool_use_id"))
          msg["tool_call_id"] = string_field(*id, bp + ".tool_use_id");
        tool_results.push_back(std::move(msg));
      } else {
        throw ApiError(400,
                       bp + ".type '" + type + "' is not supported in a " + role +
                           " message (text, tool_use, tool_result, thinking)",
                       bp + ".type");
      }
    }
    for (json& r : tool_results) cp.messages.push_back(std::move(r));
    if (!text.empty() || !tool_calls.empty() || !thinking.empty() || tool_results.empty()) {
      json msg = {{"role", role}, {"content", text}};
      if (!tool_calls.empty()) msg["tool_calls"] = tool_calls;
      if (!thinking.empty()) msg["reasoning_content"] = thinking;
      cp.messages.push_back(std::move(msg));
    }
  }
  if (const json* tools = field(body, "tools")) {
    if (!tools->is_array()) throw ApiError(400, "tools must be a list", "tools");
    cp.tools = json::array();
    for (size_t i = 0; i < tools->size(); ++i) {
      std::string p = "tools." + std::to_string(i);
      const json& t = (*tools)[i];
      if (!t.is_object()) throw ApiError(400, p + " must be an object", p);
      const json* name = field(t, "name");
      if (!name || string_field(*name, p + ".name").empty())
        throw ApiError(400, p + ".name: a non-empty string is required", p + ".name");
      json fn = {{"name", name->get<std::string>()}};
      if (const json* d = field(t, "description"))
        fn["description"] = string_field(*d, p + ".description");
      const json* schema = field(t, "input_schema");
      if (!schema || !schema->is_object())
        throw ApiError(400, p + ".input_schema: a JSON schema object is required",
                       p + ".input_schema");
      fn["parameters"] = *schema;
      if (const json* strict = field(t, "strict")) fn["strict"] = bool_field(*strict, p + ".strict");
      cp.tools.push_back({{"type", "function"}, {"function", fn}});
    }
  }
  if (const json* tc = field(body, "tool_choice")) {
    if (!tc->is_object()) throw ApiError(400, "tool_choice must be an object", "tool_choice");
    const json* type = field(*tc, "type");
    std::string t = type ? string_field(*type, "tool_choice.type") : "";
    if (t == "auto") {
      cp.tool_choice = "auto";
    } else if (t == "any") {
      cp.tool_choice = "required";
    } else if (t == "none") {
      cp.tool_choice = "none";
    } else if (t == "tool") {
      const json* name = field(*tc, "name");
      if (!name) throw ApiError(400, "tool_choice.name: field required", "tool_choice.name");
      cp.tool_choice = "function";
      cp.forced_tool = string_field(*name, "tool_choice.name");
    } else {
      throw ApiError(400, "tool_choice.type must be auto, any, tool or none", "tool_choice.type");
    }
    if (const json* d = field(*tc, "disable_parallel_tool_use"))
      cp.parallel_tool_calls = !bool_field(*d, "tool_choice.disable_parallel_tool_use");
  }
  if (const json* th = field(body, "thinking")) {
    if (!th->is_object()) throw ApiError(400, "thinking must be an object", "thinking");
    const json* type = field(*th, "type");
    std::string t = type ? string_field(*type, "thinking.type") : "";
    if (t != "enabled" && t != "disabled")
      throw ApiError(400, "thinking.type must be enabled or disabled", "thinking.type");
    cp.template_kwargs["enable_thinking"] = t == "enabled";
  }
  return cp;
}

json sampling_json(const json& body) {
  json s = json::object();
  // temperature / top_p / top_k are Anthropic's; the rest are vela extensions (as in vLLM).
  for (const char* k : {"temperature", "top_p", "top_k", "min_p", "seed", "logit_bias",
                        "presence_penalty", "frequency_penalty", "repetition_penalty"})
    if (const json* v = field(body, k)) s[k] = *v;
  if (const json* v = field(body, "stop_sequences")) {
    if (!v->is_array())
      throw ApiError(400, "stop_sequences must be a list of strings", "stop_sequences");
    s["stop"] = *v;
  }
  return s;
}

const char* stop_reason(const Completion& c, bool tool_calls) {
  switch (c.finish_reason) {
    case FinishReason::kStop:
      if (tool_calls) return "tool_use";
      return c.stop_reason.empty() ? "end_turn" : "stop_sequence";
    case FinishReason::kLength:
      return "max_tokens";
    default:
      return "end_turn";
  }
}

json tool_input(const ToolCall& tc) {
  json j = json::parse(tc.arguments, nullptr, false);
  return j.is_object() ? j : json::object();
}

struct MessageState {
  ServerContext* ctx = nullptr;
  std::unique_ptr<GenerationSession> session;
  std::unique_ptr<ChatOutputParser> parser;
  std::string id, model;
};

// The SSE writer of one streamed message: blocks are sequential, an open block closes when
// output of another kind arrives.
class MessageStream {
 public:
  explicit MessageStream(MessageState& st) : st_(st) {}

  bool start(SseWriter& w) {
    w_ = &w;
    json message = {
        {"id", st_.id},
        {"type", "message"},
        {"role", "assistant"},
        {"content", json::array()},
        {"model", st_.model},
        {"stop_reason", nullptr},
        {"stop_sequence", nullptr},
        {"usage", {{"input_tokens", st_.session->prompt_tokens()}, {"output_tokens", 0}}}};
    write("message_start", {{"type", "message_start"}, {"message", message}});
    return write("ping", {{"type", "ping"}});
  }

  bool event(const StreamEvent& ev, SseWriter& w) {
    w_ = &w;
    if (ev.finish == FinishReason::kError) {
      error_ = true;
      return write("error",
                   error_body(ApiFlavor::kAnthropic, 500, "generation failed: " + ev.error));
    }
    emit(st_.parser->push(ev.text));
    if (ev.finish) emit(st_.parser->finish());
    return !gone_;
  }

  bool end(SseWriter& w) {
    w_ = &w;
    if (error_) return true;
    close_block();
    RequestResult r = st_.session->result();
    const Completion& c = r.completions[0];
    bool calls = !st_.parser->tool_calls().empty();
    json delta = {
        {"stop_reason", stop_reason(c, calls)},
        {"stop_sequence", c.stop_reason.empty() || calls ? json(nullptr) : json(c.stop_reason)}};
    write("message_delta", {{"type", "message_delta"},
                            {"delta", delta},
                            {"usage", {{"output_tokens", c.tokens.size()}}}});
    return write("message_stop", {{"type", "message_stop"}});
  }

 private:
  MessageState& st_;
  SseWriter* w_ = nullptr;
  bool gone_ = false, error_ = false;
  int index_ = -1;
  std::string open_;  // "", "thinking", "text", "tool_use"

  bool write(const std::string& name, const json& payload) {
    if (gone_) return false;
    if (!w_->write(sse_event(name, payload))) {
      gone_ = true;
      st_.session->mark_client_gone();
      return false;
    }
    return true;
  }
  void close_block() {
    if (open_.empty()) return;
    if (open_ == "thinking")
      write("content_block_delta", {{"type", "content_block_delta"},
                                    {"index", index_},
                                    {"delta", {{"type", "signature_delta"}, {"signature", ""}}}});
    write("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
    open_.clear();
  }
  void open_block(const std::string& kind, json block) {
    close_block();
    ++index_;
    open_ = kind;
    write("content_block_start",
          {{"type", "content_block_start"}, {"index", index_}, {"content_block", block}});
  }
  void emit(const ChatDelta& d) {
    if (!d.reasoning.empty()) {
      if (open_ != "thinking")
        open_block("thinking", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
      write("content_block_delta",
            {{"type", "content_block_delta"},
             {"index", index_},
             {"delta", {{"type", "thinking_delta"}, {"thinking", d.reasoning}}}});
    }
    if (!d.content.empty() &&
        !(open_ != "text" && d.content.find_first_not_of(" \n\r\t") == std::string::npos &&
          !st_.parser->tool_calls().empty())) {
      if (open_ != "text") open_block("text", {{"type", "text"}, {"text", ""}});
      write("content_block_delta", {{"type", "content_block_delta"},
                                    {"index", index_},
                                    {"delta", {{"type", "text_delta"}, {"text", d.content}}}});
    }
    for (const ToolCallDelta& c : d.calls) {
      if (c.start)
        open_block(
            "tool_use",
            {{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", json::object()}});
      if (!c.arguments.empty())
        write("content_block_delta",
              {{"type", "content_block_delta"},
               {"index", index_},
               {"delta", {{"type", "input_json_delta"}, {"partial_json", c.arguments}}}});
    }
  }
};

}  // namespace

void handle_messages(ServerContext& ctx, const HttpRequest& req, HttpResponse& res) {
  Clock::time_point arrival = Clock::now();
  json body = parse_json_body(req.body);
  const std::string lora = check_model(ctx, body);
  const json* mt = field(body, "max_tokens");
  if (!mt) throw ApiError(400, "max_tokens: field required", "max_tokens");
  int32_t max_tokens = int_field(*mt, "max_tokens");
  ChatPrompt cp = convert_request(ctx, body);
  bool stream = false;
  if (const json* s = field(body, "stream")) stream = bool_field(*s, "stream");
  SamplingParams params = sampling_from_json(sampling_json(body));
  RenderedPrompt rp = render_chat_prompt(ctx, cp, "toolu_");
  params.constraint = tool_call_constraint(cp, rp, params.constraint);
  params.max_tokens = resolve_max_tokens(ctx, rp.ids.size(), max_tokens);

  auto st = std::make_shared<MessageState>();
  st->ctx = &ctx;
  Request request{rp.ids, params};
  request.lora = lora;
  st->session = std::make_unique<GenerationSession>(ctx, std::move(request), req.client, arrival);
  st->parser = std::make_unique<ChatOutputParser>(rp.output);
  st->id = random_id("msg_");
  st->model = lora.empty() ? ctx.cfg.model_name : lora;
  if (stream) {
    auto ms = std::make_shared<MessageStream>(*st);
    SseCallbacks cb;
    cb.sessions = {st->session.get()};
    cb.on_start = [ms](SseWriter& w) { return ms->start(w); };
    cb.on_event = [ms](size_t, const StreamEvent& ev, SseWriter& w) { return ms->event(ev, w); };
    cb.on_end = [ms](SseWriter& w) { return ms->end(w); };
    cb.state = st;
    start_sse_stream(res, std::move(cb));
    return;
  }
  // Not streamed: the events feed the parser; the response is built once the request ends.
  SseCallbacks cb;
  cb.sessions = {st->session.get()};
  cb.on_event = [p = st.get()](size_t, const StreamEvent& ev, SseWriter&) {
    p->parser->push(ev.text);
    return true;
  };
  cb.respond = [st](HttpResponse& res) {
    st->parser->finish();
    RequestResult r = st->session->result();
    const Completion& c = r.completions[0];
    if (c.finish_reason == FinishReason::kError)
      throw ApiError(500, "generation failed: " + c.error);
    const ChatOutputParser& p = *st->parser;
    bool calls = !p.tool_calls().empty();
    json content = json::array();
    if (!p.reasoning().empty())
      content.push_back({{"type", "thinking"}, {"thinking", p.reasoning()}, {"signature", ""}});
    bool blank = p.content().find_first_not_of(" \n\r\t") == std::string::npos;
    if (!(blank && (calls || !content.empty())) || (content.empty() && !calls))
      content.push_back({{"type", "text"}, {"text", p.content()}});
    for (const ToolCall& tc : p.tool_calls())
      content.push_back(
          {{"type", "tool_use"}, {"id", tc.id}, {"name", tc.name}, {"input", tool_input(tc)}});
    json out = {
        {"id", st->id},
        {"type", "message"},
        {"role", "assistant"},
        {"model", st->model},
        {"content", content},
        {"stop_reason", stop_reason(c, calls)},
        {"stop_sequence", c.stop_reason.empty() || calls ? json(nullptr) : json(c.stop_reason)},
        {"usage",
         {{"input_tokens", r.prompt_tokens},
          {"output_tokens", c.tokens.size()},
          {"cache_read_input_tokens", c.cached_tokens}}}};
    res.set_content(dump_json(out), "application/json");
  };
  cb.state = st;
  defer_response(res, std::move(cb));
}

void handle_count_tokens(ServerContext& ctx, const HttpRequest& req, HttpResponse& res) {
  json body = parse_json_body(req.body);
  check_model(ctx, body);
  ChatPrompt cp = convert_request(ctx, body);
  RenderedPrompt rp = render_chat_prompt(ctx, cp, "toolu_");
  res.set_content(dump_json({{"input_tokens", rp.ids.size()}}), "application/json");
}

}  // namespace vela
