// ToolCallParser: what every dialect's parser shares (buffering pushed text, call ids).
#include "server/tool_call_parser.h"

#include <random>

namespace vela {

ToolCallParser::Delta ToolCallParser::push(std::string_view text) {
  buf_.append(text);
  Delta out;
  run(out, false);
  return out;
}

std::string ToolCallParser::new_id() const {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char kAlnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = id_prefix_;
  for (int i = 0; i < 24; ++i) id += kAlnum[rng() % (sizeof(kAlnum) - 1)];
  return id;
}

}  // namespace vela
