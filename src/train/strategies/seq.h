// seq: next-token cross-entropy, mean over the batch's target tokens (TrainableModel's fused
// LM-head loss, label smoothing included). The loss of pretraining; sft (strategies/sft.h) is the
// same loss over masked data.
#pragma once

#include "train/strategies/strategy.h"

namespace vela {

class SeqStrategy : public Strategy {
 public:
  const char* name() const override { return "seq"; }
  const char* data_kind() const override { return "seq"; }
  int64_t loss_units(const TrainBatch& batch) const override;
  MicroLoss forward_backward(TrainableModel& model, const TrainBatch& batch,
                             float loss_scale) override;
  MicroLoss evaluate(TrainableModel& model, const TrainBatch& batch) override;
};

}  // namespace vela
