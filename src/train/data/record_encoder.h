// RecordEncoder: one JSONL record -> one tokenized document with its loss mask, by a
// PreprocessConfig. Bad records are results, not exceptions: encode() returns the reason
// ("invalid_json", "missing_field", "wrong_type", "template_error", ...) so the caller counts
// them; only an unusable config/tokenizer throws (from the constructor).
//
// text: each section is field value wrapped in its prefix/suffix, tokenized on its own, mask =
//   section.train; sections concatenate in config order, then optional BOS in front / EOS at the
//   end (EOS is trained: the model learns where a document ends).
// chat: messages (or instruction -> system, input -> user, output -> assistant) are rendered with
//   the tokenizer's chat template (ChatTemplate, as transformers' apply_chat_template; a record's
//   "tools" array is passed to the template too). The
//   trained spans are found by rendering prefixes: for assistant message i,
//     start_i = len(render(messages[:i], add_generation_prompt=true)) when that is a prefix of
//               the full render F = render(messages, add_generation_prompt=false); otherwise
//               where it first differs from F, provided render(messages[:i]) (the history) is a
//               prefix of F (Qwen3 renders a turn without a user query without the think block);
//     end_i   = len(render(messages[:i+1])) when that is a prefix of F; otherwise (templates that
//               render the last turn differently, e.g. Qwen3's empty <think> block) the end of the
//               message's content in F after start_i plus the end-of-turn text the template puts
//               after it (e.g. "<|im_end|>\n").
//   F is cut at every start_i / end_i and each piece is tokenized on its own; tokens of [start_i,
//   end_i) are trained (the assistant's reply, its end-of-turn marker, and for Qwen3's last turn
//   the think block), the rest masked. Pieces are cut right after the assistant header, which ends
//   at a special token or newline, so the concatenation equals tokenizing F whole for ChatML and
//   Llama 3 templates (tests/train/data check it with the real Qwen3 tokenizer).
// preference: prompt + chosen and prompt + rejected are each rendered like chat and only the last
//   assistant turn (the response) is trained; a record without the chosen or the rejected field
//   is bad ("missing_chosen" / "missing_rejected"; `vela preprocess` stops on those).
// prompt: the prompt rendered with the generation prompt (add_generation_prompt = true), no
//   trained tokens, and the record's reference answer.
// encode() is const and thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/json.h"
#include "train/data/preprocess_config.h"
#include "train/data/shard_writer.h"

namespace vela {

class Tokenizer;
class ChatTemplate;

struct EncodeResult {
  EncodedDoc doc;       // preference: prompt + chosen; prompt: the rendered prompt (mask 0)
  EncodedDoc rejected;  // preference: prompt + rejected
  std::string answer;   // prompt: the reference answer ("" when the record has none)
  std::string bad_reason;  // empty = ok
  std::string detail;      // human-readable detail for the first few bad records
  bool ok() const { return bad_reason.empty(); }
};

class RecordEncoder {
 public:
  // `tokenizer` (and `chat_template`, required for format chat) must outlive the encoder.
  RecordEncoder(const PreprocessConfig& config, const Tokenizer& tokenizer,
                const ChatTemplate* chat_template);

  EncodeResult encode(std::string_view line) const;
  EncodeResult encode_record(const json& record) const;

  std::optional<int32_t> bos_id() const { return bos_id_; }
  std::optional<int32_t> eos_id() const { return eos_id_; }

 private:
  EncodeResult encode_text(const json& record) const;
  EncodeResult encode_chat(const json& record) const;
  EncodeResult encode_messages(const json& messages, const json& tools) const;
  // preference / prompt formats (see ChatFields): the prompt's messages, or a bad result.
  EncodeResult prompt_messages(const json& record, json* messages) const;
  EncodeResult encode_preference(const json& record) const;
  EncodeResult encode_prompt(const json& record) const;
  void append(EncodedDoc& doc, std::string_view text, bool train) const;

  const PreprocessConfig& config_;
  const Tokenizer& tokenizer_;
  const ChatTemplate* chat_template_;
  std::optional<int32_t> bos_id_, eos_id_;
};

}  // namespace vela
