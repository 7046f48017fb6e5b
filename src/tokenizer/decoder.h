// Decoders of a tokenizer.json ("decoder" field): ByteLevel, ByteFallback, Metaspace, Replace,
// Fuse, Strip, BPEDecoder, Sequence. A decoder rewrites the list of token strings (decode_chain);
// the final text is their concatenation. Immutable and thread-safe once built.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/json.h"

namespace vela {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
  // True when the decoder may drop a leading space of the first token (Metaspace with prepend,
  // Strip): streaming decode then needs a prefix window (see streaming_decoder.h).
  virtual bool edits_first_token() const { return false; }
  // nullptr for JSON null; throws Unsupported naming an unknown type.
  static std::unique_ptr<Decoder> from_json(const nlohmann::json& j);
};

// Decodes with `decoder` (or joins with " " when null, as Hugging Face does).
std::string run_decoder(const Decoder* decoder, std::vector<std::string> tokens);

}  // namespace vela
