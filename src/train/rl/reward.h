// Rewards for GRPO: a score per (prompt, completion, reference answer), built from the train
// config's "grpo"."reward" JSON. The string scorers are the ones `vela eval` uses
// (eval/scorers.h), so a reward and an eval metric of the same name agree.
//
//   {"type": "exact_match", "normalize": true}   1 if the completion equals the answer (SQuAD
//                                                normalisation unless normalize false), else 0
//   {"type": "last_number"}                      1 if the completion's last number equals the
//                                                answer's (canonical forms: "1,000" = "1000")
//   {"type": "gsm8k"}                            1 if the number after the completion's last
//                                                "####" (else its last number) equals the answer's
//   {"type": "regex", "pattern": P, "group": 1}  1 if capture `group` of P's first match in the
//                                                completion equals the answer (normalised)
//   {"type": "rouge_l"}                          ROUGE-L F1 of the completion against the answer
//   {"type": "json_valid"}                       1 if the completion is one JSON value, else 0
//   {"type": "length_penalty", "target": N, "scale": s}
//                                                -s * max(0, completion tokens - N)
//   {"type": "sum", "terms": [{"weight": w, "reward": {...}}, ...]}
//                                                the weighted sum of the terms
//   {"type": "http", "url": "http://host:port/path", "timeout_s": 30}
//                                                an external scorer (train/rl/reward_http.h)
// make_reward() throws InvalidArgument naming the bad key. score() is called from the trainer's
// thread with a whole rollout batch (one HTTP request per batch).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"

namespace vela {

struct RewardInput {
  std::string prompt;      // the rendered prompt text
  std::string completion;  // the sampled response text
  std::string answer;      // the record's reference answer ("" when none)
  int64_t n_completion_tokens = 0;
};

class Reward {
 public:
  virtual ~Reward() = default;
  // One score per input, in order.
  virtual std::vector<double> score(const std::vector<RewardInput>& batch) const = 0;
};

std::unique_ptr<Reward> make_reward(const json& spec);

}  // namespace vela
