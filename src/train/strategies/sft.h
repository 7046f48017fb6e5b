// sft: supervised fine-tuning — seq's token-mean cross-entropy over the trained sections only
// (assistant turns): the dataset (kind "sft") already masks the prompt, so the loss is seq's.
#pragma once

#include "train/strategies/seq.h"

namespace vela {

class SftStrategy final : public SeqStrategy {
 public:
  const char* name() const override { return "sft"; }
  const char* data_kind() const override { return "sft"; }
};

}  // namespace vela
