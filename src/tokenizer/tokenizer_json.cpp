// read_tokenizer_json (see tokenizer_json.h): one SAX pass with nlohmann's lexer. Containers other
// than model.vocab / model.merges become the usual tree, built on a stack of open containers (only
// the innermost one grows, so the pointers into it stay valid while it is open).
#include "tokenizer/tokenizer_json.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "core/error.h"

namespace vela {
using tjson = nlohmann::json;  // tokenizer files: ordered_json parses big objects in O(n^2)

namespace {

std::string read_whole_file(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) VELA_THROW(IoError, "cannot open '", path, "'");
  std::string text;
  char buf[1 << 16];
  if (std::fseek(f.get(), 0, SEEK_END) == 0) {
    long size = std::ftell(f.get());
    if (size > 0) text.reserve(static_cast<size_t>(size));
    std::rewind(f.get());
  }
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f.get())) > 0) text.append(buf, n);
  if (std::ferror(f.get())) VELA_THROW(IoError, "cannot read '", path, "'");
  return text;
}

class Reader final : public nlohmann::json_sax<tjson> {
 public:
  explicit Reader(TokenizerJson& out) : out_(out) {}

  bool null() override { return plain(tjson(nullptr)); }
  bool boolean(bool v) override { return plain(tjson(v)); }
  bool number_integer(number_integer_t v) override {
    return mode_ == Mode::kVocab ? vocab_id(v) : plain(tjson(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == Mode::kVocab) return vocab_id(v > INT32_MAX ? -1 : static_cast<int64_t>(v));
    return plain(tjson(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return plain(tjson(v)); }
  bool binary(binary_t&) override { return false; }  // JSON text has none
  bool string(string_t& s) override {
    if (mode_ == Mode::kMerges) {
      out_.bpe.merges.push_back(BpeModel::split_merge(s, out_.bpe.merges.size()));
      return true;
    }
    if (mode_ == Mode::kMergePair) {
      if (pair_size_ == 0) pair_.first = std::move(s);
      if (pair_size_ == 1) pair_.second = std::move(s);
      if (++pair_size_ > 2) bad_merge();
      return true;
    }
    return plain(tjson(std::move(s)));
  }
  bool key(string_t& k) override {
    if (mode_ == Mode::kVocab)
      vocab_key_ = std::move(k);
    else
      key_ = std::move(k);
    return true;
  }
  bool start_object(std::size_t) override {
    if (mode_ == Mode::kDom && at_model_field("vocab")) {
      mode_ = Mode::kVocab;
      out_.bpe.vocab.clear();
      out_.bpe.has_vocab = true;
      return true;
    }
    return open(tjson::object());
  }
  bool end_object() override {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kDom;
      return true;
    }
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    if (mode_ == Mode::kDom && at_model_field("merges")) {
      mode_ = Mode::kMerges;
      out_.bpe.merges.clear();
      out_.bpe.has_merges = true;
      return true;
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kMergePair;
      pair_size_ = 0;
      return true;
    }
    return open(tjson::array());
  }
  bool end_array() override {
    if (mode_ == Mode::kMergePair) {
      if (pair_size_ != 2) bad_merge();
      out_.bpe.merges.push_back(std::move(pair_));
      mode_ = Mode::kMerges;
      return true;
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kDom;
      return true;
    }
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    parse_error_ = e.what();
    return false;
  }
  const std::string& parse_error_message() const { return parse_error_; }

 private:
  enum class Mode { kDom, kVocab, kMerges, kMergePair };

  bool at_model_field(const char* name) const {
    return model_ != nullptr && !stack_.empty() && stack_.back() == model_ && key_ == name;
  }
  // A scalar: into the tree, or a wrong-typed entry of the streamed tables.
  bool plain(tjson v) {
    if (mode_ == Mode::kVocab) vocab_id(-1);
    if (mode_ != Mode::kDom) bad_merge();
    add(std::move(v));
    return true;
  }
  bool open(tjson container) {
    if (mode_ == Mode::kVocab) vocab_id(-1);
    if (mode_ != Mode::kDom) bad_merge();
    bool is_model = stack_.size() == 1 && stack_.back()->is_object() && key_ == "model";
    tjson* c = add(std::move(container));
    if (is_model && c->is_object()) model_ = c;
    stack_.push_back(c);
    return true;
  }
  tjson* add(tjson v) {
    if (stack_.empty()) {
      out_.doc = std::move(v);
      return &out_.doc;
    }
    tjson* top = stack_.back();
    if (top->is_array()) {
      top->push_back(std::move(v));
      return &top->back();
    }
    tjson& slot = (*top)[key_];  // a repeated key keeps its last value, as the tree parser does
    slot = std::move(v);
    return &slot;
  }
  bool vocab_id(int64_t id) {
    if (id < 0 || id > INT32_MAX)
      VELA_THROW(InvalidArgument, "BPE vocab: the id of '", vocab_key_,
                 "' is not an integer in [0, 2^31)");
    out_.bpe.vocab.insert_or_assign(std::move(vocab_key_), static_cast<int32_t>(id));
    return true;
  }
  [[noreturn]] void bad_merge() const {
    VELA_THROW(InvalidArgument, "BPE merge ", out_.bpe.merges.size(),
               " must be \"a b\" or [\"a\", \"b\"]");
  }

  TokenizerJson& out_;
  std::string parse_error_;
  std::vector<tjson*> stack_;  // open containers of the tree, innermost last
  tjson* model_ = nullptr;     // the top-level "model" object
  std::string key_, vocab_key_;
  Mode mode_ = Mode::kDom;
  std::pair<std::string, std::string> pair_;
  int pair_size_ = 0;
};

}  // namespace

TokenizerJson read_tokenizer_json(const std::string& path) {
  std::string text = read_whole_file(path);
  TokenizerJson out;
  out.bpe.vocab.reserve(text.size() / 64);  // ~75 bytes of file per token with its merge
  Reader reader(out);
  bool parsed;
  try {
    parsed = tjson::sax_parse(text, &reader);
  } catch (const Error& e) {
    VELA_THROW(InvalidArgument, "malformed tokenizer file '", path, "': ", e.what());
  }
  if (!parsed)
    VELA_THROW(InvalidArgument, "'", path, "' is not valid JSON: ", reader.parse_error_message());
  return out;
}

}  // namespace vela
