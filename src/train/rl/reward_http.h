// HttpReward: an external reward endpoint. One POST per rollout batch to `url` with
//   {"prompts": [...], "completions": [...], "answers": [...]}
// answered by {"scores": [number, ...]} (or a bare array) with one score per completion, in
// order. A timeout, a refused connection, a non-2xx status, a body that is not that JSON, a wrong
// number of scores or a non-finite score is an IoError naming the url and what was wrong (the
// training step fails and the run ends through on_error; published checkpoints stay intact).
#pragma once

#include <string>
#include <vector>

#include "train/rl/reward.h"

namespace vela {

class HttpReward final : public Reward {
 public:
  // url: "http://host[:port][/path]"; timeout_s bounds the connect and the whole answer.
  HttpReward(std::string url, double timeout_s);
  std::vector<double> score(const std::vector<RewardInput>& batch) const override;

 private:
  std::string url_, host_, path_;
  int port_ = 80;
  double timeout_s_;
};

}  // namespace vela
