// seq strategy: the token-mean cross-entropy; see seq.h.
#include "train/strategies/seq.h"

#include "train/trainable_model.h"

namespace vela {

int64_t SeqStrategy::loss_units(const TrainBatch& b) const {
  if (b.n_target_tokens > 0) return b.n_target_tokens;
  int64_t n = 0;
  for (int32_t t : b.targets.to_vector<int32_t>()) n += t != kIgnoreIndex;
  return n;
}

MicroLoss SeqStrategy::forward_backward(TrainableModel& model, const TrainBatch& batch,
                                        float loss_scale) {
  LossStats s = model.forward_backward(batch, loss_scale);
  return {s.loss_sum, s.n_tokens};
}

MicroLoss SeqStrategy::evaluate(TrainableModel& model, const TrainBatch& batch) {
  LossStats s = model.evaluate(batch);
  return {s.loss_sum, s.n_tokens};
}

}  // namespace vela
