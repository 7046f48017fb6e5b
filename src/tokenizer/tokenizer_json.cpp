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

std::string read_file_bytes(const std::string& path) {
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

namespace {

class Reader final : public nlohmann::json_sax<tjson> {
 public:
  explicit Reader(TokenizerJson& out) : out_(out), bpe_(out.bpe) {}

  bool null() override { return plain(tjson(nullptr)); }
  bool boolean(bool v) override { return plain(tjson(v)); }
  bool number_integer(number_integer_t v) override {
    if (mode_ == Mode::kVocab) return vocab_id(v, true);
    return plain(tjson(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == Mode::kVocab) return vocab_id(v > INT32_MAX ? -1 : static_cast<int64_t>(v), true);
    return plain(tjson(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return plain(tjson(v)); }
  bool binary(binary_t&) override { return false; }  // JSON text has none
  bool string(string_t& s) override {
    if (mode_ == Mode::kMerges) {
      if (!bpe_.merges_error.empty()) return true;  // the first bad merge is the one reported
      if (auto pair = BpeModel::split_merge(s))
        bpe_.merges.push_back(std::move(*pair));
      else
        bpe_.merges_error = BpeModel::split_merge_error(s, bpe_.merges.size());
      return true;
    }
    if (mode_ == Mode::kMergePair) {
      if (pair_size_ == 0) pair_.first = std::move(s);
      if (pair_size_ == 1) pair_.second = std::move(s);
      ++pair_size_;
      return true;
    }
    return plain(tjson(std::move(s)));
  }
  bool key(string_t& k) override {
    if (mode_ == Mode::kVocab)
      vocab_key_ = std::move(k);
    else if (mode_ == Mode::kDom)
      key_ = std::move(k);
    return true;
  }
  bool start_object(std::size_t) override {
    if (mode_ == Mode::kDom && at_model_field("vocab")) {
      bpe_.reset_vocab();  // a repeated "vocab" replaces the earlier one
      bpe_.has_vocab = true;
      mode_ = Mode::kVocab;
      return true;
    }
    return open(tjson::object());
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override {
    if (mode_ == Mode::kDom && at_model_field("merges")) {
      bpe_.reset_merges();
      bpe_.has_merges = true;
      mode_ = Mode::kMerges;
      return true;
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kMergePair;
      pair_size_ = 0;
      pair_bad_ = false;
      return true;
    }
    return open(tjson::array());
  }
  bool end_array() override {
    if (mode_ == Mode::kMergePair) {
      mode_ = Mode::kMerges;
      if (!bpe_.merges_error.empty()) return true;
      if (pair_bad_ || pair_size_ != 2)
        bpe_.merges_error = BpeModel::bad_merge_error(bpe_.merges.size());
      else
        bpe_.merges.push_back(std::move(pair_));
      return true;
    }
    return close();
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    parse_error_ = e.what();
    return false;
  }
  const std::string& parse_error_message() const { return parse_error_; }

 private:
  // kSkip: inside a container where a table entry was expected (recorded as bad), until it ends.
  enum class Mode { kDom, kVocab, kMerges, kMergePair, kSkip };

  bool at_model_field(const char* name) const {
    return model_ != nullptr && !stack_.empty() && stack_.back() == model_ && key_ == name;
  }
  // A wrong-typed entry of a streamed table (recorded; reported after the model's type check).
  void bad_entry() {
    if (mode_ == Mode::kVocab) vocab_id(-1, false);
    if (mode_ == Mode::kMerges && bpe_.merges_error.empty())
      bpe_.merges_error = BpeModel::bad_merge_error(bpe_.merges.size());
    if (mode_ == Mode::kMergePair) pair_bad_ = true;
  }
  bool plain(tjson v) {
    if (mode_ == Mode::kSkip) return true;
    if (mode_ != Mode::kDom) {
      bad_entry();
      return true;
    }
    add(std::move(v));
    return true;
  }
  bool open(tjson container) {
    if (mode_ != Mode::kDom) {  // a container where a table entry belongs: skip it whole
      if (mode_ != Mode::kSkip) {
        bad_entry();
        skip_return_ = mode_;
        mode_ = Mode::kSkip;
      }
      ++skip_depth_;
      return true;
    }
    const bool is_model = stack_.size() == 1 && key_ == "model";
    tjson* c = add(std::move(container));
    if (is_model) model_ = c->is_object() ? c : nullptr;
    stack_.push_back(c);
    return true;
  }
  bool close() {
    if (mode_ == Mode::kSkip) {
      if (--skip_depth_ == 0) mode_ = skip_return_;
    } else if (mode_ == Mode::kVocab || mode_ == Mode::kMerges) {
      mode_ = Mode::kDom;
    } else {
      stack_.pop_back();
    }
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
    // A repeated key keeps its last value, as the tree parser does: a "model", "vocab" or
    // "merges" that replaces a streamed one drops its tables.
    if (stack_.size() == 1 && key_ == "model") {
      bpe_.reset_vocab();
      bpe_.reset_merges();
      model_ = nullptr;
    }
    if (top == model_ && key_ == "vocab") bpe_.reset_vocab();
    if (top == model_ && key_ == "merges") bpe_.reset_merges();
    tjson& slot = (*top)[key_];
    slot = std::move(v);
    return &slot;
  }
  bool vocab_id(int64_t id, bool integer) {
    bpe_.set_id(std::move(vocab_key_), id, integer);
    return true;
  }

  TokenizerJson& out_;
  BpeTables& bpe_;
  std::string parse_error_;
  std::vector<tjson*> stack_;  // open containers of the tree, innermost last
  tjson* model_ = nullptr;     // the top-level "model" object
  std::string key_, vocab_key_;
  Mode mode_ = Mode::kDom, skip_return_ = Mode::kDom;
  int skip_depth_ = 0;
  std::pair<std::string, std::string> pair_;
  int pair_size_ = 0;
  bool pair_bad_ = false;
};

}  // namespace

TokenizerJson read_tokenizer_json(const std::string& path) {
  std::string text = read_file_bytes(path);
  TokenizerJson out;
  out.bpe.vocab.reserve(text.size() / 64);  // ~75 bytes of file per token with its merge
  Reader reader(out);
  const bool parsed = tjson::sax_parse(text, &reader);
  if (!parsed)
    VELA_THROW(InvalidArgument, "'", path, "' is not valid JSON: ", reader.parse_error_message());
  return out;
}

}  // namespace vela
