// ReasoningParser: splits streamed model text into reasoning (inside <think> ... </think>) and
// content, as vLLM's qwen3 / deepseek_r1 reasoning parsers do. Text arrives in arbitrary pieces
// (token by token); a piece that might be the start of a tag is held back until it is decided, so
// the concatenation of all reasoning / content deltas equals what a one-shot split would give.
// Either the output opens with <think> (Qwen3) or the prompt already did (start_inside = true,
// templates that end the generation prompt with "<think>\n"). Not thread-safe; one per sample.
#pragma once

#include <string>
#include <string_view>

namespace vela {

class ReasoningParser {
 public:
  struct Delta {
    std::string reasoning;
    std::string content;
  };

  explicit ReasoningParser(bool start_inside = false);
  Delta push(std::string_view text);
  // End of the sample: whatever is held back is released (an unterminated <think> stays reasoning).
  Delta finish();

 private:
  enum class State { kStart, kReasoning, kContent };
  State state_;
  std::string pending_;         // undecided text
  bool strip_leading_ = false;  // drop whitespace between </think> and the answer
  void run(Delta& out, bool final);
};

// Length of the longest suffix of `text` that is a proper prefix of `tag` (text that may still
// become `tag`).
size_t partial_tag_suffix(std::string_view text, std::string_view tag);

}  // namespace vela
