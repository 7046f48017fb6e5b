// make_strategy: the strategy a train config names; see strategy.h.
#include "train/strategies/strategy.h"

#include "core/error.h"
#include "train/strategies/dpo.h"
#include "train/strategies/grpo.h"
#include "train/strategies/seq.h"
#include "train/strategies/sft.h"
#include "train/trainer_config.h"

namespace vela {

std::unique_ptr<Strategy> make_strategy(const TrainerConfig& config) {
  const std::string s = config.effective_strategy();
  if (s == "seq") return std::make_unique<SeqStrategy>();
  if (s == "sft") return std::make_unique<SftStrategy>();
  if (s == "dpo") return std::make_unique<DpoStrategy>(config.dpo);
  if (s == "grpo") return std::make_unique<GrpoStrategy>(config.grpo);
  VELA_THROW(InvalidArgument, "train config: unknown strategy '", s, "' (seq, sft, dpo or grpo)");
}

}  // namespace vela
