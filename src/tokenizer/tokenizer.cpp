// Tokenizer facade (see tokenizer.h): loading, the encode pipeline, decode.
#include "tokenizer/tokenizer.h"

#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer/unicode.h"

namespace vela {
using tjson = nlohmann::json;  // tokenizer files: ordered_json parses big objects in O(n^2)

namespace fs = std::filesystem;

Tokenizer::Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

namespace {

tjson parse_json_file(const std::string& path) {
  std::string text = read_file_bytes(path);
  try {
    return tjson::parse(text);
  } catch (const tjson::parse_error& e) {
    VELA_THROW(InvalidArgument, "'", path, "' is not valid JSON: ", e.what());
  }
}

// A bos/eos entry of tokenizer_config.json: "text" or {"content": "text"}.
std::optional<std::string> config_token(const tjson& c, const char* key) {
  if (!c.is_object() || !c.contains(key)) return std::nullopt;
  const tjson& v = c[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

tjson Tokenizer::gpt2_files_to_json(const std::string& vocab_path, const std::string& merges_path) {
  tjson vocab = parse_json_file(vocab_path);
  VELA_CHECK(vocab.is_object(), "'", vocab_path, "' must be a JSON object of token -> id");
  std::string merges_text = read_file_bytes(merges_path);
  tjson merges = tjson::array();
  std::istringstream in(merges_text);
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (first && line.rfind("#version", 0) == 0) {
      first = false;
      continue;
    }
    first = false;
    if (line.empty()) continue;
    merges.push_back(line);
  }
  tjson j = {{"version", "1.0"},
             {"truncation", nullptr},
             {"padding", nullptr},
             {"added_tokens", tjson::array()}};
  if (vocab.contains("<|endoftext|>")) {
    j["added_tokens"].push_back({{"id", vocab["<|endoftext|>"]},
                                 {"content", "<|endoftext|>"},
                                 {"single_word", false},
                                 {"lstrip", false},
                                 {"rstrip", false},
                                 {"normalized", true},
                                 {"special", true}});
  }
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "ByteLevel"},
                        {"add_prefix_space", false},
                        {"trim_offsets", true},
                        {"use_regex", true}};
  j["post_processor"] = {{"type", "ByteLevel"},
                         {"add_prefix_space", true},
                         {"trim_offsets", false},
                         {"use_regex", true}};
  j["decoder"] = {{"type", "ByteLevel"},
                  {"add_prefix_space", true},
                  {"trim_offsets", true},
                  {"use_regex", true}};
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", ""},
                {"end_of_word_suffix", ""},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"vocab", std::move(vocab)},
                {"merges", std::move(merges)}};
  return j;
}

Tokenizer Tokenizer::from_file(const std::string& path) {
  fs::path p(path);
  VELA_CHECK_T(IoError, fs::exists(p), "tokenizer path '", path, "' does not exist");
  fs::path dir = fs::is_directory(p) ? p : p.parent_path();
  tjson j;
  std::string source;
  TokenizerJson file;  // tokenizer.json: its vocab and merges read without a JSON tree
  BpeTables* tables = nullptr;
  if (fs::is_directory(p)) {
    if (fs::exists(p / "tokenizer.json")) {
      source = (p / "tokenizer.json").string();
      file = read_tokenizer_json(source);
      tables = &file.bpe;
    } else if (fs::exists(p / "vocab.json") && fs::exists(p / "merges.txt")) {
      source = (p / "vocab.json").string();
      j = gpt2_files_to_json(source, (p / "merges.txt").string());
    } else if (fs::exists(p / "encoder.json") && fs::exists(p / "vocab.bpe")) {
      source = (p / "encoder.json").string();
      j = gpt2_files_to_json(source, (p / "vocab.bpe").string());
    } else {
      VELA_THROW(
          IoError, "directory '", path,
          "' has no tokenizer.json (nor vocab.json + merges.txt, nor encoder.json + vocab.bpe)");
    }
  } else {
    source = path;
    file = read_tokenizer_json(source);
    tables = &file.bpe;
  }
  Tokenizer t = build(tables ? file.doc : j, source, tables);
  fs::path cfg = dir / "tokenizer_config.json";
  if (!dir.empty() && fs::exists(cfg)) {
    try {
      t.set_special_ids(tjson::parse(read_file_bytes(cfg.string())));
    } catch (const tjson::parse_error&) {
      // A broken config only loses the bos/eos names; the tokenizer itself is fine.
    }
  }
  return t;
}

Tokenizer Tokenizer::from_json(const tjson& j, const std::string& source) {
  return build(j, source, nullptr);
}

Tokenizer Tokenizer::build(const tjson& j, const std::string& source, BpeTables* tables) {
  Tokenizer t;
  try {
    VELA_CHECK(j.is_object(), "the top level must be a JSON object");
    VELA_CHECK(j.contains("model"), "missing 'model'");
    t.model_ =
        std::make_unique<BpeModel>(tables ? BpeModel::from_json(j["model"], std::move(*tables))
                                          : BpeModel::from_json(j["model"]));
    t.normalizer_ = Normalizer::from_json(j.value("normalizer", tjson()));
    t.pre_tokenizer_ = PreTokenizer::from_json(j.value("pre_tokenizer", tjson()));
    t.post_processor_ = PostProcessor::from_json(j.value("post_processor", tjson()));
    t.decoder_ = Decoder::from_json(j.value("decoder", tjson()));
    t.added_ = std::make_unique<AddedTokens>();
    const Normalizer* norm = t.normalizer_.get();
    t.added_->build(AddedTokens::parse(j.value("added_tokens", tjson())),
                    [norm](const std::string& s) {
                      if (!norm) return s;
                      NormalizedText nt{s, true};
                      norm->normalize(nt);
                      return nt.text;
                    });
  } catch (const Unsupported& e) {
    VELA_THROW(Unsupported, source, ": ", e.what());
  } catch (const Error& e) {
    VELA_THROW(InvalidArgument, "malformed tokenizer file '", source, "': ", e.what());
  } catch (const tjson::exception& e) {
    VELA_THROW(InvalidArgument, "malformed tokenizer file '", source, "': ", e.what());
  }
  t.set_special_ids(tjson::object());
  return t;
}

void Tokenizer::set_special_ids(const tjson& config) {
  auto id_of = [this](const std::optional<std::string>& name) -> std::optional<int32_t> {
    if (!name) return std::nullopt;
    return token_to_id(*name);
  };
  if (auto b = id_of(config_token(config, "bos_token"))) bos_id_ = b;
  if (auto e = id_of(config_token(config, "eos_token"))) eos_id_ = e;
  if (!bos_id_ && post_processor_) {
    auto pre = post_processor_->prefix_ids();
    if (!pre.empty()) bos_id_ = pre.front();
  }
  if (!eos_id_ && post_processor_) {
    auto suf = post_processor_->suffix_ids();
    if (!suf.empty()) eos_id_ = suf.back();
  }
  // Conventional names, only when they are special tokens: in byte-level vocabularies such as
  // Qwen3's, "<s>" and "</s>" are ordinary merged text tokens, not sequence markers.
  auto special_named = [&](const char* name) -> std::optional<int32_t> {
    auto id = id_of(std::string(name));
    return id && is_special(*id) ? id : std::nullopt;
  };
  for (const char* name : {"<|begin_of_text|>", "<s>", "<bos>"})
    if (!bos_id_) bos_id_ = special_named(name);
  for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"})
    if (!eos_id_) eos_id_ = special_named(name);
}

void Tokenizer::encode_text(std::string_view text, bool at_origin,
                            std::vector<int32_t>& ids) const {
  NormalizedText nt{std::string(text), at_origin};
  if (normalizer_) normalizer_->normalize(nt);
  std::vector<Segment> segs;
  added_->split(nt.text, true, segs);
  for (const Segment& s : segs) {
    if (s.token_id >= 0) {
      ids.push_back(s.token_id);
      continue;
    }
    if (s.text.empty()) continue;
    NormalizedText piece{std::string(s.text), nt.at_origin && s.text.data() == nt.text.data()};
    auto run_model = [this, &ids](NormalizedText&& w) { model_->tokenize(w.text, ids); };
    if (pre_tokenizer_)
      pre_tokenizer_->pre_tokenize(std::move(piece), run_model);
    else
      run_model(std::move(piece));
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  size_t bad = unicode::find_invalid_utf8(text);
  VELA_CHECK(bad == std::string_view::npos, "encode: input is not valid UTF-8 (byte offset ", bad,
             ")");
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<Segment> segs;
  added_->split(text, false, segs);
  for (const Segment& s : segs) {
    if (s.token_id >= 0)
      ids.push_back(s.token_id);
    else
      encode_text(s.text, s.text.data() == text.data(), ids);
  }
  if (add_special_tokens && post_processor_) post_processor_->process(ids, nullptr);
  return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (const AddedToken* a = added_->find_id(id)) {
      if (skip_special_tokens && a->special) continue;
      tokens.push_back(a->content);
    } else if (const std::string* t = model_->id_to_token(id)) {
      if (skip_special_tokens && is_special(id)) continue;
      tokens.push_back(*t);
    }
  }
  return run_decoder(decoder_.get(), std::move(tokens));
}

std::string Tokenizer::decode_tokens(const std::vector<std::string>& tokens) const {
  return run_decoder(decoder_.get(), tokens);
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const AddedToken* a = added_->find_content(token)) return a->id;
  return model_->token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (const AddedToken* a = added_->find_id(id)) return a->content;
  if (const std::string* t = model_->id_to_token(id)) return *t;
  return std::nullopt;
}

int32_t Tokenizer::vocab_size() const {
  int32_t m = model_->max_id();
  for (const auto& a : added_->tokens()) m = std::max(m, a.id);
  return m + 1;
}

bool Tokenizer::is_special(int32_t id) const {
  if (const AddedToken* a = added_->find_id(id)) return a->special;
  // Hugging Face checks the token *string* against the special set.
  if (const std::string* t = model_->id_to_token(id)) {
    const AddedToken* a = added_->find_content(*t);
    return a && a->special;
  }
  return false;
}

bool Tokenizer::decoder_edits_first_token() const {
  return decoder_ && decoder_->edits_first_token();
}

std::vector<std::pair<std::string, int32_t>> Tokenizer::added_tokens() const {
  std::vector<std::pair<std::string, int32_t>> r;
  for (const auto& a : added_->tokens()) r.emplace_back(a.content, a.id);
  return r;
}

}  // namespace vela
