// `vela chat --model DIR`: an interactive terminal chat. Each user line is appended to the
// conversation, rendered with the model's chat template, and the reply streams token by token.
// Commands: /reset clears the conversation, /quit (or end of input) leaves.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_dtype.h"
#include "core/json.h"
#include "engine/engine.h"
#include "tokenizer/chat_template.h"

namespace vela::cli {

int cmd_chat(int argc, char** argv) {
  Args args(argc, argv, {"help"});
  if (args.has("help")) {
    std::printf(
        "usage: vela chat --model DIR [--system TEXT] [--max-tokens N] [--temperature T]\n"
        "                 [--seed S] [--dtype auto|f32|bf16]\n");
    return 0;
  }
  std::string dir = args.require("model");
  std::string system = args.get("system", "");
  SamplingParams p;
  p.max_tokens = static_cast<int32_t>(args.get_int("max-tokens", 256));
  p.temperature = static_cast<float>(args.get_double("temperature", 0.7));
  if (args.has("seed")) p.seed = static_cast<uint64_t>(args.get_int("seed", 0));
  DType dtype = resolve_model_dtype(args.get("dtype", "auto"), dir, Device::cpu());
  args.check_all_used();
  p.validate();
  namespace fs = std::filesystem;
  VELA_CHECK(fs::exists(fs::path(dir) / "tokenizer_config.json"),
             "vela chat needs a tokenizer_config.json with a chat_template in ", dir);
  ChatTemplate tpl = ChatTemplate::from_tokenizer_config(dir);
  std::unique_ptr<Engine> engine = Engine::load(dir, {}, dtype, Device::cpu());
  VELA_CHECK(engine->tokenizer() != nullptr, "vela chat needs a tokenizer.json in ", dir);

  json messages = json::array();
  if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
  std::string line;
  std::fprintf(stderr, "vela chat — /reset clears, /quit leaves\n");
  while (true) {
    std::fprintf(stderr, "> ");
    if (!std::getline(std::cin, line) || line == "/quit") break;
    if (line == "/reset") {
      messages = json::array();
      if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
      continue;
    }
    if (line.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    Request r;
    r.prompt = engine->tokenizer()->encode(tpl.render(messages, nullptr, true), false);
    r.params = p;
    RequestHandlePtr h = engine->submit(r);
    VELA_CHECK_T(OutOfMemory, h != nullptr, "engine queue full");
    std::string reply;
    StreamEvent ev;
    while (h->next(ev)) {
      std::fputs(ev.text.c_str(), stdout);
      std::fflush(stdout);
      reply += ev.text;
    }
    std::fputs("\n", stdout);
    messages.push_back({{"role", "assistant"}, {"content", reply}});
  }
  return 0;
}

}  // namespace vela::cli
