// Post-processors (see post_processor.h).
#include "tokenizer/post_processor.h"

#include <map>

#include "core/error.h"

namespace vela {
using tjson = nlohmann::json;  // tokenizer files: ordered_json parses big objects in O(n^2)
namespace {

// A template piece: a special token's ids, or sequence A (0) / B (1).
struct Piece {
  std::vector<int32_t> ids;
  int sequence = -1;
};

class TemplateProcessor final : public PostProcessor {
 public:
  TemplateProcessor(std::vector<Piece> single, std::vector<Piece> pair)
      : single_(std::move(single)), pair_(std::move(pair)) {}
  void process(std::vector<int32_t>& ids, const std::vector<int32_t>* b) const override {
    const auto& tpl = b ? pair_ : single_;
    std::vector<int32_t> out;
    out.reserve(ids.size() + (b ? b->size() : 0) + 8);
    for (const auto& p : tpl) {
      if (p.sequence == 0)
        out.insert(out.end(), ids.begin(), ids.end());
      else if (p.sequence == 1 && b)
        out.insert(out.end(), b->begin(), b->end());
      else
        out.insert(out.end(), p.ids.begin(), p.ids.end());
    }
    ids = std::move(out);
  }
  std::vector<int32_t> prefix_ids() const override {
    std::vector<int32_t> r;
    for (const auto& p : single_) {
      if (p.sequence >= 0) break;
      r.insert(r.end(), p.ids.begin(), p.ids.end());
    }
    return r;
  }
  std::vector<int32_t> suffix_ids() const override {
    std::vector<int32_t> r;
    bool after = false;
    for (const auto& p : single_) {
      if (p.sequence >= 0) {
        after = true;
        r.clear();
        continue;
      }
      if (after) r.insert(r.end(), p.ids.begin(), p.ids.end());
    }
    return r;
  }

 private:
  std::vector<Piece> single_, pair_;
};

class NoopProcessor final : public PostProcessor {
 public:
  void process(std::vector<int32_t>&, const std::vector<int32_t>*) const override {}
};

class SequenceProcessor final : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> v) : v_(std::move(v)) {}
  void process(std::vector<int32_t>& ids, const std::vector<int32_t>* pair) const override {
    // Only the first processor that adds tokens may see the pair; later ones see the result.
    for (const auto& p : v_) {
      p->process(ids, pair);
      pair = nullptr;
    }
  }
  std::vector<int32_t> prefix_ids() const override {
    for (const auto& p : v_)
      if (auto r = p->prefix_ids(); !r.empty()) return r;
    return {};
  }
  std::vector<int32_t> suffix_ids() const override {
    for (const auto& p : v_)
      if (auto r = p->suffix_ids(); !r.empty()) return r;
    return {};
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> v_;
};

std::vector<Piece> parse_template(const tjson& tpl,
                                  const std::map<std::string, std::vector<int32_t>>& specials,
                                  const char* which) {
  std::vector<Piece> out;
  if (tpl.is_null()) return out;
  VELA_CHECK(tpl.is_array(), "TemplateProcessing '", which, "' must be an array");
  for (const auto& e : tpl) {
    Piece p;
    if (e.contains("Sequence")) {
      std::string id = e["Sequence"].value("id", std::string("A"));
      VELA_CHECK(id == "A" || id == "B", "TemplateProcessing: sequence id must be A or B, got '",
                 id, "'");
      p.sequence = id == "A" ? 0 : 1;
    } else if (e.contains("SpecialToken")) {
      std::string id = e["SpecialToken"].value("id", std::string());
      auto it = specials.find(id);
      VELA_CHECK(it != specials.end(), "TemplateProcessing: special token '", id,
                 "' is missing from special_tokens");
      p.ids = it->second;
    } else {
      VELA_THROW(InvalidArgument,
                 "TemplateProcessing: a template piece must be Sequence or SpecialToken");
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<int32_t> token_pair_id(const tjson& j, const char* key) {
  VELA_CHECK(
      j.contains(key) && j[key].is_array() && j[key].size() == 2 && j[key][1].is_number_integer(),
      "post_processor '", key, "' must be [token, id]");
  return {j[key][1].get<int32_t>()};
}

}  // namespace

std::unique_ptr<PostProcessor> PostProcessor::from_json(const tjson& j) {
  if (j.is_null()) return nullptr;
  VELA_CHECK(j.is_object() && j.contains("type") && j["type"].is_string(),
             "post_processor must be an object with a 'type'");
  std::string type = j["type"].get<std::string>();
  if (type == "ByteLevel") return std::make_unique<NoopProcessor>();
  if (type == "TemplateProcessing") {
    std::map<std::string, std::vector<int32_t>> specials;
    if (j.contains("special_tokens") && j["special_tokens"].is_object()) {
      for (auto it = j["special_tokens"].begin(); it != j["special_tokens"].end(); ++it) {
        VELA_CHECK(it.value().contains("ids") && it.value()["ids"].is_array(),
                   "TemplateProcessing special token '", it.key(), "' needs 'ids'");
        specials[it.key()] = it.value()["ids"].get<std::vector<int32_t>>();
      }
    }
    return std::make_unique<TemplateProcessor>(
        parse_template(j.value("single", tjson()), specials, "single"),
        parse_template(j.value("pair", tjson()), specials, "pair"));
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    auto cls = token_pair_id(j, "cls"), sep = token_pair_id(j, "sep");
    std::vector<Piece> single = {{cls, -1}, {{}, 0}, {sep, -1}};
    std::vector<Piece> pair = single;
    if (type == "RobertaProcessing") pair.push_back({sep, -1});
    pair.push_back({{}, 1});
    pair.push_back({sep, -1});
    return std::make_unique<TemplateProcessor>(std::move(single), std::move(pair));
  }
  if (type == "Sequence") {
    VELA_CHECK(j.contains("processors") && j["processors"].is_array(),
               "Sequence post_processor needs 'processors'");
    std::vector<std::unique_ptr<PostProcessor>> v;
    for (const auto& c : j["processors"]) {
      auto p = from_json(c);
      if (p) v.push_back(std::move(p));
    }
    return std::make_unique<SequenceProcessor>(std::move(v));
  }
  VELA_THROW(Unsupported, "post_processor type '", type, "' is not supported");
}

}  // namespace vela
