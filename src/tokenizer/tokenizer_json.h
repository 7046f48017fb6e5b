// Reading a tokenizer.json fast. A big vocabulary (Qwen3: 151k tokens, 151k merges, 11 MB) made the
// JSON tree the slow part of loading: a node per token and per merge, built and then copied into
// the BPE tables. read_tokenizer_json() parses the file in one SAX pass that streams
// "model" -> "vocab" and "model" -> "merges" straight into BpeTables and builds the ordinary tree
// for everything else (normalizer, pre-tokenizer, added tokens, ... all small).
#pragma once

#include <string>

#include "core/json.h"
#include "tokenizer/bpe_model.h"

namespace vela {

struct TokenizerJson {
  nlohmann::json doc;  // the file without model.vocab / model.merges when they were streamed
  BpeTables bpe;       // has_vocab / has_merges: streamed
};

// A whole file as bytes; IoError naming it when it cannot be opened or read.
std::string read_file_bytes(const std::string& path);

// Throws InvalidArgument naming `path` when the file is not valid JSON, IoError when it cannot be
// read. Wrong-typed vocab ids or merges are recorded in `bpe` (BpeTables::check reports them).
TokenizerJson read_tokenizer_json(const std::string& path);

}  // namespace vela
