// Built-in rewards and the weighted sum; see reward.h.
#include "train/rl/reward.h"

#include <algorithm>
#include <functional>
#include <set>

#include "core/error.h"
#include "eval/scorers.h"
#include "train/rl/reward_http.h"

namespace vela {

namespace {

using Scorer = std::function<double(const RewardInput&)>;

// A reward that scores each input on its own.
class PerSampleReward final : public Reward {
 public:
  explicit PerSampleReward(Scorer f) : f_(std::move(f)) {}
  std::vector<double> score(const std::vector<RewardInput>& batch) const override {
    std::vector<double> out;
    out.reserve(batch.size());
    for (const RewardInput& in : batch) out.push_back(f_(in));
    return out;
  }

 private:
  Scorer f_;
};

class SumReward final : public Reward {
 public:
  void add(double w, std::unique_ptr<Reward> r) { terms_.emplace_back(w, std::move(r)); }
  std::vector<double> score(const std::vector<RewardInput>& batch) const override {
    std::vector<double> out(batch.size(), 0.0);
    for (const auto& [w, r] : terms_) {
      std::vector<double> s = r->score(batch);
      for (size_t i = 0; i < out.size(); ++i) out[i] += w * s[i];
    }
    return out;
  }

 private:
  std::vector<std::pair<double, std::unique_ptr<Reward>>> terms_;
};

void check_keys(const json& spec, const std::string& type, std::set<std::string> allowed) {
  allowed.insert("type");
  for (const auto& [k, v] : spec.items())
    VELA_CHECK(allowed.count(k), "grpo.reward: unknown key '", k, "' for type '", type, "'");
}

template <typename T>
T get(const json& spec, const char* key, T fallback) {
  if (!spec.contains(key)) return fallback;
  try {
    return spec[key].get<T>();
  } catch (const json::exception&) {
    VELA_THROW(InvalidArgument, "grpo.reward: bad value for '", key, "': ", spec[key].dump());
  }
}

// The reference answer's number: canonical when it is a number, else the last number in it.
std::optional<std::string> answer_number(const std::string& answer) {
  if (auto c = scoring::canonical_number(answer)) return c;
  return scoring::extract_gsm8k_answer(answer);
}

}  // namespace

std::unique_ptr<Reward> make_reward(const json& spec) {
  VELA_CHECK(spec.is_object() && spec.contains("type") && spec["type"].is_string(),
             "grpo.reward must be an object with a \"type\" (exact_match, last_number, gsm8k, "
             "regex, rouge_l, json_valid, length_penalty, sum, http), got ",
             spec.dump());
  const std::string type = spec["type"].get<std::string>();
  if (type == "exact_match") {
    check_keys(spec, type, {"normalize"});
    const bool norm = get<bool>(spec, "normalize", true);
    return std::make_unique<PerSampleReward>([norm](const RewardInput& in) {
      return scoring::exact_match(in.completion, in.answer, norm) ? 1.0 : 0.0;
    });
  }
  if (type == "last_number" || type == "gsm8k") {
    check_keys(spec, type, {});
    const bool gsm = type == "gsm8k";
    return std::make_unique<PerSampleReward>([gsm](const RewardInput& in) {
      auto got = gsm ? scoring::extract_gsm8k_answer(in.completion)
                     : scoring::extract_last_number(in.completion);
      auto want = answer_number(in.answer);
      return got && want && *got == *want ? 1.0 : 0.0;
    });
  }
  if (type == "regex") {
    check_keys(spec, type, {"pattern", "group"});
    VELA_CHECK(spec.contains("pattern") && spec["pattern"].is_string(),
               "grpo.reward: type regex needs a \"pattern\" string");
    const std::string pattern = spec["pattern"].get<std::string>();
    const int group = get<int>(spec, "group", 1);
    scoring::extract_regex("", pattern, group);  // a bad pattern fails here, not mid-run
    return std::make_unique<PerSampleReward>([pattern, group](const RewardInput& in) {
      auto got = scoring::extract_regex(in.completion, pattern, group);
      return got && scoring::exact_match(*got, in.answer) ? 1.0 : 0.0;
    });
  }
  if (type == "rouge_l") {
    check_keys(spec, type, {});
    return std::make_unique<PerSampleReward>(
        [](const RewardInput& in) { return scoring::rouge_l_f1(in.completion, in.answer); });
  }
  if (type == "json_valid") {
    check_keys(spec, type, {});
    return std::make_unique<PerSampleReward>(
        [](const RewardInput& in) { return scoring::is_valid_json(in.completion) ? 1.0 : 0.0; });
  }
  if (type == "length_penalty") {
    check_keys(spec, type, {"target", "scale"});
    const int64_t target = get<int64_t>(spec, "target", 0);
    const double scale = get<double>(spec, "scale", 0.01);
    VELA_CHECK(target >= 0 && scale >= 0,
               "grpo.reward: length_penalty needs target >= 0 and scale >= 0");
    return std::make_unique<PerSampleReward>([target, scale](const RewardInput& in) {
      return -scale * static_cast<double>(std::max<int64_t>(0, in.n_completion_tokens - target));
    });
  }
  if (type == "sum") {
    check_keys(spec, type, {"terms"});
    VELA_CHECK(spec.contains("terms") && spec["terms"].is_array() && !spec["terms"].empty(),
               "grpo.reward: type sum needs a non-empty \"terms\" array");
    auto sum = std::make_unique<SumReward>();
    for (const json& t : spec["terms"]) {
      VELA_CHECK(t.is_object() && t.contains("reward"),
                 "grpo.reward: each sum term is {\"weight\": w, \"reward\": {...}}, got ",
                 t.dump());
      for (const auto& [k, v] : t.items())
        VELA_CHECK(k == "weight" || k == "reward", "grpo.reward: unknown key '", k,
                   "' in a sum term");
      sum->add(get<double>(t, "weight", 1.0), make_reward(t["reward"]));
    }
    return sum;
  }
  if (type == "http") {
    check_keys(spec, type, {"url", "timeout_s"});
    VELA_CHECK(spec.contains("url") && spec["url"].is_string(),
               "grpo.reward: type http needs a \"url\" string");
    return std::make_unique<HttpReward>(spec["url"].get<std::string>(),
                                        get<double>(spec, "timeout_s", 30.0));
  }
  VELA_THROW(InvalidArgument, "grpo.reward: unknown type '", type,
             "' (exact_match, last_number, gsm8k, regex, rouge_l, json_valid, length_penalty, "
             "sum, http)");
}

}  // namespace vela
