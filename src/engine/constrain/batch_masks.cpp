// BatchMasks: host fill, one upload and one ops::apply_token_bitmask per step.
#include "engine/constrain/batch_masks.h"

#include <cstring>
#include <exception>

#include "core/error.h"
#include "core/log.h"
#include "core/parallel.h"
#include "ops/token_bitmask.h"

namespace vela::constrain {

BatchMasks::BatchMasks(int64_t vocab_size, int32_t max_rows, Device device)
    : vocab_size_(vocab_size),
      n_words_((vocab_size + 31) / 32),
      max_rows_(max_rows),
      device_(device) {
  if (device.is_cuda()) {
    host_bits_ = Tensor::zeros_pinned({max_rows, n_words_}, DType::kI32);
    host_rows_ = Tensor::zeros_pinned({max_rows}, DType::kI32);
    device_bits_ = Tensor::zeros({max_rows, n_words_}, DType::kI32, device);
    device_rows_ = Tensor::zeros({max_rows}, DType::kI32, device);
  } else {
    host_bits_ = Tensor::zeros({max_rows, n_words_}, DType::kI32);
    host_rows_ = Tensor::zeros({max_rows}, DType::kI32);
  }
}

void BatchMasks::add(GrammarMatcher& m, int32_t row) {
  VELA_ASSERT(n_masks_ < max_rows_, "more constrained rows than max_rows");
  VELA_CHECK(m.grammar().vocab().size() == vocab_size_,
             "constrained decoding: the grammar's "
             "vocabulary (",
             m.grammar().vocab().size(), ") differs from the model's (", vocab_size_, ")");
  matchers_.push_back(&m);
  host_rows_.data<int32_t>()[n_masks_] = row;
  ++n_masks_;
}

void BatchMasks::fill() {
  auto* base = reinterpret_cast<uint32_t*>(host_bits_.data<int32_t>());
  parallel_for(n_masks_, 1, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k) {
      uint32_t* bits = base + k * n_words_;
      try {
        matchers_[static_cast<size_t>(k)]->fill_next_token_bitmask(bits);
      } catch (const std::exception& e) {
        // A grammar past its limits (too ambiguous): this row allows nothing, so its sample ends
        // with an error (Scheduler::process_sample) and the other rows go on.
        std::memset(bits, 0, static_cast<size_t>(n_words_) * sizeof(uint32_t));
        VELA_LOG_WARN("[constrain] mask failed: ", e.what());
      }
    }
  });
}

void BatchMasks::apply(Tensor& logits) {
  if (n_masks_ == 0) return;
  if (!device_.is_cuda()) {
    Tensor bits = host_bits_.slice(0, 0, n_masks_), rows = host_rows_.slice(0, 0, n_masks_);
    ops::apply_token_bitmask(logits, bits, rows);
    return;
  }
  Tensor bits = device_bits_.slice(0, 0, n_masks_), rows = device_rows_.slice(0, 0, n_masks_);
  bits.copy_(host_bits_.slice(0, 0, n_masks_));
  rows.copy_(host_rows_.slice(0, 0, n_masks_));
  ops::apply_token_bitmask(logits, bits, rows);
}

}  // namespace vela::constrain
