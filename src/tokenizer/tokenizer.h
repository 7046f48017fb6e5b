// Tokenizer: a Hugging Face tokenizer.json (byte-level BPE family) loaded into vela. Owns the
// pipeline: added tokens -> normalizer -> pre-tokenizer -> BPE model -> post-processor, and the
// decoder for the way back. Token ids and text match the Hugging Face `tokenizers` library exactly
// (tests/tokenizer/ compare against it). All const methods are thread-safe; loading throws IoError
// (unreadable file), InvalidArgument (malformed file: the message names the file) or Unsupported
// (a component type vela does not implement: the message names it).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"

namespace vela {

class AddedTokens;
class BpeModel;
struct BpeTables;
class Decoder;
class Normalizer;
class PostProcessor;
class PreTokenizer;

class Tokenizer {
 public:
  // `path`: a tokenizer.json, or a directory holding one (or GPT-2's vocab.json + merges.txt /
  // encoder.json + vocab.bpe). A tokenizer_config.json beside it supplies bos/eos names.
  static Tokenizer from_file(const std::string& path);
  // From a parsed tokenizer.json; `source` names it in error messages.
  static Tokenizer from_json(const nlohmann::json& j, const std::string& source = "tokenizer.json");
  // The tokenizer.json equivalent of GPT-2's vocab.json/encoder.json + merges.txt/vocab.bpe.
  static nlohmann::json gpt2_files_to_json(const std::string& vocab_path,
                                           const std::string& merges_path);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Text (UTF-8; invalid UTF-8 throws InvalidArgument) -> ids. add_special_tokens applies the
  // post-processor (e.g. Llama 3.1's BOS).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;
  // Ids -> text. Unknown ids are skipped (as Hugging Face does).
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;
  // The decoder applied to the given token strings (used by StreamingDecoder).
  std::string decode_tokens(const std::vector<std::string>& tokens) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int32_t id) const;
  // One past the largest id (model vocab and added tokens): the embedding table size needed.
  int32_t vocab_size() const;
  bool is_special(int32_t id) const;
  // Decoding can drop a leading space of the first token (Metaspace, Strip decoders).
  bool decoder_edits_first_token() const;

  std::optional<int32_t> bos_id() const { return bos_id_; }
  std::optional<int32_t> eos_id() const { return eos_id_; }
  // Every added token (special or not), in file order.
  std::vector<std::pair<std::string, int32_t>> added_tokens() const;

 private:
  Tokenizer();
  // from_json, with the BPE vocab / merges already read when `tables` is set (from_file).
  static Tokenizer build(const nlohmann::json& j, const std::string& source, BpeTables* tables);
  void encode_text(std::string_view text, bool at_origin, std::vector<int32_t>& ids) const;
  void set_special_ids(const nlohmann::json& config);

  std::unique_ptr<AddedTokens> added_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<PostProcessor> post_processor_;
  std::unique_ptr<Decoder> decoder_;
  std::optional<int32_t> bos_id_, eos_id_;
};

}  // namespace vela
