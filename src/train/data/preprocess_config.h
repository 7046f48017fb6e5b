// PreprocessConfig: the declarative JSON that tells `vela preprocess` how JSONL records become
// token sequences. Parsing is strict: unknown keys, wrong types and out-of-range values throw
// InvalidArgument naming the key (a typo never silently changes the data). docs/data.md
// documents every key; examples/pretrain_prep.json and examples/sft_prep.json are complete
// examples.
//
//   {"tokenizer": "DIR",                 tokenizer.json [+ tokenizer_config.json for chat]
//    "format": "text" | "chat",
//    "sections": [{"field": "title", "train": false, "suffix": "\n"},
//                 {"field": "text"}],    text: fields -> sections, concatenated in this order
//    "chat": {"messages_field": "messages"} | {"instruction_field": "instruction",
//             "input_field": "input", "output_field": "output"}, "template_vars": {...}},
//    "add_bos": false, "add_eos": true, "bos_token": "...", "eos_token": "...",
//    "max_length": 2048, "truncation": "drop" | "truncate_left" | "truncate_right" | "split",
//    "packing": true, "packing_window": 64, "seq_len": 2048, "shard_tokens": 67108864, "threads":
//    0}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"

namespace vela {

// text: sections; chat: conversations (SFT); preference: a prompt with a chosen and a rejected
// response (DPO), written as two sequences per record; prompt: a prompt only, rendered with the
// generation prompt, plus a reference answer for the reward (GRPO), written to answers.jsonl.
enum class RecordFormat { kText, kChat, kPreference, kPrompt };

const char* format_name(RecordFormat f);
enum class Truncation { kDrop, kTruncateLeft, kTruncateRight, kSplit };

const char* truncation_name(Truncation t);

// One section of a text record: the field's string value, wrapped in prefix / suffix, tokenized
// on its own (section boundaries are token boundaries). train = false masks its tokens.
struct TextSection {
  std::string field;
  bool train = true;
  bool optional = false;  // a missing or null field is skipped instead of a bad record
  std::string prefix, suffix;
};

struct ChatFields {
  // Either a list of {"role", "content"} messages ...
  std::string messages_field;  // default "messages" when no instruction/input/output is set
  // ... or the instruction -> system, input -> user, output -> assistant mapping.
  std::string instruction_field, input_field, output_field;
  json template_vars = json::object();  // extra chat-template variables (enable_thinking, ...)
  // preference / prompt formats: the prompt is the record's messages_field (a message list), or
  // prompt_field (a string: one user turn; or a message list), or instruction_field / input_field
  // (system / user), the first one present; responses are chosen_field / rejected_field (a
  // string: one assistant turn; or a message list appended to the prompt), the reward's reference
  // answer answer_field (a string or a number).
  std::string prompt_field = "prompt", chosen_field = "chosen", rejected_field = "rejected";
  std::string answer_field = "answer";
  bool uses_role_mapping() const { return !output_field.empty(); }
};

struct PreprocessConfig {
  std::string tokenizer;  // directory (or tokenizer.json path)
  RecordFormat format = RecordFormat::kText;
  std::vector<TextSection> sections;  // text
  ChatFields chat;                    // chat
  bool add_bos = false;
  std::optional<bool> add_eos;  // default: true for text, false for chat (the template ends turns)
  std::string bos_token, eos_token;  // override the tokenizer's (e.g. "<|endoftext|>")
  int64_t max_length = 0;            // per document, in tokens; 0 = seq_len
  Truncation truncation = Truncation::kTruncateRight;
  bool packing = true;          // several documents per sequence, positions restarting at each
  int64_t packing_window = 64;  // open sequences first-fit packing chooses from (1 = next-fit)
  int64_t seq_len = 2048;
  int64_t shard_tokens = int64_t{1} << 26;  // tokens per shard file (sequences never straddle)
  int threads = 0;                          // 0 = all cores

  bool effective_add_eos() const { return add_eos.value_or(format == RecordFormat::kText); }
  int64_t effective_max_length() const { return max_length > 0 ? max_length : seq_len; }

  static PreprocessConfig from_json(const json& j);
  static PreprocessConfig from_file(const std::string& path);
  // The normalized config (every key, defaults filled in): what index.json records.
  json to_json() const;
};

}  // namespace vela
