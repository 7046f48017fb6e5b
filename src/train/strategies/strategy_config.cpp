// DpoConfig / GrpoConfig parsing and validation; see strategy_config.h.
#include "train/strategies/strategy_config.h"

#include "core/error.h"
#include "train/config_value.h"

namespace vela {

DpoConfig DpoConfig::from_json(const json& j) {
  VELA_CHECK(j.is_object(), "train config: 'dpo' must be an object, got ", j.dump());
  DpoConfig c;
  for (const auto& [key, v] : j.items()) {
    const std::string k = "dpo." + key;
    if (key == "beta")
      read_config_value(v, k, c.beta);
    else if (key == "loss")
      read_config_value(v, k, c.loss);
    else if (key == "label_smoothing")
      read_config_value(v, k, c.label_smoothing);
    else if (key == "reference")
      read_config_value(v, k, c.reference);
    else
      VELA_THROW(InvalidArgument, "train config: unknown key '", k, "' (see docs/rl.md)");
  }
  return c;
}

json DpoConfig::to_json() const {
  return json{{"beta", beta},
              {"loss", loss},
              {"label_smoothing", label_smoothing},
              {"reference", reference}};
}

void DpoConfig::validate() const {
  VELA_CHECK(beta > 0, "train config: dpo.beta must be > 0, got ", beta);
  VELA_CHECK(loss == "sigmoid" || loss == "ipo",
             "train config: dpo.loss must be \"sigmoid\" or \"ipo\", got '", loss, "'");
  VELA_CHECK(label_smoothing >= 0 && label_smoothing < 0.5,
             "train config: dpo.label_smoothing must be in [0, 0.5), got ", label_smoothing);
  VELA_CHECK(loss == "sigmoid" || label_smoothing == 0,
             "train config: dpo.label_smoothing (cDPO) applies to the sigmoid loss only");
}

GrpoConfig GrpoConfig::from_json(const json& j) {
  VELA_CHECK(j.is_object(), "train config: 'grpo' must be an object, got ", j.dump());
  GrpoConfig c;
  for (const auto& [key, v] : j.items()) {
    const std::string k = "grpo." + key;
    if (key == "group_size")
      read_config_value(v, k, c.group_size);
    else if (key == "max_tokens")
      read_config_value(v, k, c.max_tokens);
    else if (key == "temperature")
      read_config_value(v, k, c.temperature);
    else if (key == "top_p")
      read_config_value(v, k, c.top_p);
    else if (key == "top_k")
      read_config_value(v, k, c.top_k);
    else if (key == "stop")
      read_config_value(v, k, c.stop);
    else if (key == "rollout_interval")
      read_config_value(v, k, c.rollout_interval);
    else if (key == "clip_eps")
      read_config_value(v, k, c.clip_eps);
    else if (key == "clip_eps_high")
      read_config_value(v, k, c.clip_eps_high);
    else if (key == "scale_rewards")
      read_config_value(v, k, c.scale_rewards);
    else if (key == "kl_coef")
      read_config_value(v, k, c.kl_coef);
    else if (key == "reference")
      read_config_value(v, k, c.reference);
    else if (key == "loss_agg")
      read_config_value(v, k, c.loss_agg);
    else if (key == "drop_stale")
      read_config_value(v, k, c.drop_stale);
    else if (key == "max_staleness")
      read_config_value(v, k, c.max_staleness);
    else if (key == "reward")
      c.reward = v;
    else if (key == "engine_max_seqs")
      read_config_value(v, k, c.engine_max_seqs);
    else if (key == "engine_page_size")
      read_config_value(v, k, c.engine_page_size);
    else
      VELA_THROW(InvalidArgument, "train config: unknown key '", k, "' (see docs/rl.md)");
  }
  return c;
}

json GrpoConfig::to_json() const {
  return json{{"group_size", group_size},
              {"max_tokens", max_tokens},
              {"temperature", temperature},
              {"top_p", top_p},
              {"top_k", top_k},
              {"stop", stop},
              {"rollout_interval", rollout_interval},
              {"clip_eps", clip_eps},
              {"clip_eps_high", clip_eps_high},
              {"scale_rewards", scale_rewards},
              {"kl_coef", kl_coef},
              {"reference", reference},
              {"loss_agg", loss_agg},
              {"drop_stale", drop_stale},
              {"max_staleness", max_staleness},
              {"reward", reward},
              {"engine_max_seqs", engine_max_seqs},
              {"engine_page_size", engine_page_size}};
}

void GrpoConfig::validate() const {
  VELA_CHECK(group_size >= 2, "train config: grpo.group_size must be >= 2 (GRPO's advantages are ",
             "relative to the other samples of the prompt's group; G = 1 gives every sample an ",
             "advantage of 0), got ", group_size);
  VELA_CHECK(max_tokens >= 1, "train config: grpo.max_tokens must be >= 1, got ", max_tokens);
  VELA_CHECK(temperature > 0, "train config: grpo.temperature must be > 0 (rollouts sample; the ",
             "behaviour and trainer log-probs are those of softmax(logits / temperature)), got ",
             temperature);
  VELA_CHECK(top_p > 0 && top_p <= 1, "train config: grpo.top_p must be in (0, 1], got ", top_p);
  VELA_CHECK(top_k >= 0, "train config: grpo.top_k must be >= 0, got ", top_k);
  VELA_CHECK(rollout_interval >= 1, "train config: grpo.rollout_interval must be >= 1, got ",
             rollout_interval);
  VELA_CHECK(clip_eps > 0 && clip_eps < 1, "train config: grpo.clip_eps must be in (0, 1), got ",
             clip_eps);
  VELA_CHECK(kl_coef >= 0, "train config: grpo.kl_coef must be >= 0, got ", kl_coef);
  VELA_CHECK(loss_agg == "token" || loss_agg == "sequence",
             "train config: grpo.loss_agg must be \"token\" or \"sequence\", got '", loss_agg, "'");
  VELA_CHECK(engine_max_seqs >= 0 && engine_page_size >= 1,
             "train config: grpo.engine_max_seqs must be >= 0 and grpo.engine_page_size >= 1");
}

}  // namespace vela
