// Decoders (see decoder.h), each matching Hugging Face's decode_chain.
#include "tokenizer/decoder.h"

#include "core/error.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace vela {
using tjson = nlohmann::json;  // tokenizer files: ordered_json parses big objects in O(n^2)
namespace {

// ByteLevel: tokens made only of byte-level chars become their bytes; any other token (an added
// token with a real space, say) keeps its UTF-8 bytes. Invalid UTF-8 becomes U+FFFD.
class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const auto& t : tokens) {
      size_t start = bytes.size();
      bool ok = true;
      size_t i = 0;
      while (i < t.size()) {
        int b = unicode::cp_to_byte(unicode::next_cp(t, i));
        if (b < 0) {
          ok = false;
          break;
        }
        bytes += static_cast<char>(b);
      }
      if (!ok) {
        bytes.resize(start);
        bytes += t;
      }
    }
    tokens.assign(1, unicode::utf8_lossy(bytes));
  }
};

bool parse_byte_token(const std::string& t, unsigned char* out) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return false;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  int h = hex(t[3]), l = hex(t[4]);
  if (h < 0 || l < 0) return false;
  *out = static_cast<unsigned char>(h * 16 + l);
  return true;
}

class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (unicode::find_invalid_utf8(pending) == std::string::npos) {
        out.push_back(pending);
      } else {
        for (size_t k = 0; k < pending.size(); ++k) out.push_back("\xEF\xBF\xBD");
      }
      pending.clear();
    };
    for (auto& t : tokens) {
      unsigned char b;
      if (parse_byte_token(t, &b)) {
        pending += static_cast<char>(b);
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string rep, bool prepend) : rep_(std::move(rep)), prepend_(prepend) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      size_t p = 0;
      while (p < t.size()) {
        if (t.compare(p, rep_.size(), rep_) == 0) {
          if (!(i == 0 && prepend_)) out += ' ';
          p += rep_.size();
        } else {
          out += t[p++];
        }
      }
      tokens[i] = std::move(out);
    }
  }
  bool edits_first_token() const override { return prepend_; }

 private:
  std::string rep_;
  bool prepend_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(Regex re, std::string content)
      : re_(std::move(re)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::pair<size_t, size_t>> m;
    for (auto& t : tokens) {
      m.clear();
      re_.find_all(t, m);
      if (m.empty()) continue;
      std::string out;
      size_t prev = 0;
      for (auto [b, e] : m) {
        out.append(t, prev, b - prev);
        out += content_;
        prev = e;
      }
      out.append(t, prev, std::string::npos);
      t = std::move(out);
    }
  }

 private:
  Regex re_;
  std::string content_;
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

// Strip: removes up to `start` leading and `stop` trailing occurrences of `content` per token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      size_t b = 0, e = t.size();
      for (size_t k = 0; k < start_ && t.compare(b, content_.size(), content_) == 0 && b < e; ++k)
        b += content_.size();
      for (size_t k = 0; k < stop_ && e >= b + content_.size() &&
                         t.compare(e - content_.size(), content_.size(), content_) == 0;
           ++k)
        e -= content_.size();
      t = t.substr(b, e - b);
    }
  }
  bool edits_first_token() const override { return start_ > 0; }

 private:
  std::string content_;
  size_t start_, stop_;
};

// BPEDecoder: the end-of-word suffix becomes a space (none after the last token).
class BpeSuffixDecoder final : public Decoder {
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      std::string rep = i + 1 == tokens.size() ? "" : " ";
      std::string out;
      size_t p = 0;
      while (true) {
        size_t f = suffix_.empty() ? std::string::npos : t.find(suffix_, p);
        if (f == std::string::npos) break;
        out.append(t, p, f - p);
        out += rep;
        p = f + suffix_.size();
      }
      out.append(t, p, std::string::npos);
      t = std::move(out);
    }
  }

 private:
  std::string suffix_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> v) : v_(std::move(v)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& d : v_) d->decode_chain(tokens);
  }
  bool edits_first_token() const override {
    for (const auto& d : v_)
      if (d->edits_first_token()) return true;
    return false;
  }

 private:
  std::vector<std::unique_ptr<Decoder>> v_;
};

}  // namespace

std::unique_ptr<Decoder> Decoder::from_json(const tjson& j) {
  if (j.is_null()) return nullptr;
  VELA_CHECK(j.is_object() && j.contains("type") && j["type"].is_string(),
             "decoder must be an object with a 'type'");
  std::string type = j["type"].get<std::string>();
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Metaspace") {
    std::string rep = j.contains("replacement") && j["replacement"].is_string()
                          ? j["replacement"].get<std::string>()
                          : "\xE2\x96\x81";
    bool prepend = true;
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string())
      prepend = j["prepend_scheme"].get<std::string>() != "never";
    if (j.contains("add_prefix_space") && j["add_prefix_space"].is_boolean() &&
        !j["add_prefix_space"].get<bool>())
      prepend = false;
    return std::make_unique<MetaspaceDecoder>(rep, prepend);
  }
  if (type == "Replace") {
    VELA_CHECK(j.contains("pattern") && j.contains("content") && j["content"].is_string(),
               "Replace decoder needs 'pattern' and 'content'");
    return std::make_unique<ReplaceDecoder>(pattern_from_json(j["pattern"], "Replace decoder"),
                                            j["content"].get<std::string>());
  }
  if (type == "Strip") {
    VELA_CHECK(j.contains("content") && j["content"].is_string(),
               "Strip decoder needs a 'content' string");
    return std::make_unique<StripDecoder>(j["content"].get<std::string>(),
                                          j.value("start", size_t{0}), j.value("stop", size_t{0}));
  }
  if (type == "BPEDecoder")
    return std::make_unique<BpeSuffixDecoder>(j.value("suffix", std::string("</w>")));
  if (type == "Sequence") {
    VELA_CHECK(j.contains("decoders") && j["decoders"].is_array(),
               "Sequence decoder needs a 'decoders' array");
    std::vector<std::unique_ptr<Decoder>> v;
    for (const auto& c : j["decoders"]) {
      auto d = from_json(c);
      if (d) v.push_back(std::move(d));
    }
    return std::make_unique<SequenceDecoder>(std::move(v));
  }
  VELA_THROW(Unsupported, "decoder type '", type, "' is not supported");
}

std::string run_decoder(const Decoder* decoder, std::vector<std::string> tokens) {
  if (!decoder) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  decoder->decode_chain(tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

}  // namespace vela
