// BatchMasks: host fill (speculative groups walk their drafts), one upload (on a side stream on
// CUDA, overlapping the forward) and one ops::apply_token_bitmask per step.
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
  groups_.reserve(static_cast<size_t>(max_rows));
  mask_of_row_.assign(static_cast<size_t>(max_rows), -1);
  if (device.is_cuda()) {
    host_bits_ = Tensor::zeros_pinned({max_rows, n_words_}, DType::kI32);
    host_rows_ = Tensor::zeros_pinned({max_rows}, DType::kI32);
    device_bits_ = Tensor::zeros({max_rows, n_words_}, DType::kI32, device);
    device_rows_ = Tensor::zeros({max_rows}, DType::kI32, device);
    upload_ = std::make_unique<cuda::SideStream>(device.index);
  } else {
    host_bits_ = Tensor::zeros({max_rows, n_words_}, DType::kI32);
    host_rows_ = Tensor::zeros({max_rows}, DType::kI32);
  }
}

void BatchMasks::clear() {
  const int32_t* rows = host_rows_.data<int32_t>();
  for (int32_t k = 0; k < n_masks_; ++k) mask_of_row_[static_cast<size_t>(rows[k])] = -1;
  n_masks_ = 0;
  groups_.clear();
}

void BatchMasks::add(GrammarMatcher& m, int32_t row, const int32_t* drafts, int32_t n_drafts) {
  VELA_ASSERT(
      n_drafts >= 0 && n_masks_ + n_drafts < max_rows_ && row >= 0 && row + n_drafts < max_rows_,
      "more constrained rows than max_rows");
  VELA_CHECK(m.grammar().vocab().size() == vocab_size_,
             "constrained decoding: the grammar's "
             "vocabulary (",
             m.grammar().vocab().size(), ") differs from the model's (", vocab_size_, ")");
  groups_.push_back({&m, n_masks_, drafts, n_drafts});
  int32_t* rows = host_rows_.data<int32_t>();
  for (int32_t j = 0; j <= n_drafts; ++j) {
    rows[n_masks_] = row + j;
    mask_of_row_[static_cast<size_t>(row + j)] = n_masks_;
    ++n_masks_;
  }
}

void BatchMasks::fill() {
  auto* base = reinterpret_cast<uint32_t*>(host_bits_.data<int32_t>());
  const auto n_groups = static_cast<int64_t>(groups_.size());
  parallel_for(n_groups, 1, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      const Group& grp = groups_[static_cast<size_t>(g)];
      GrammarMatcher& m = *grp.matcher;
      const int32_t steps_before = m.n_steps();
      int32_t filled = 0;
      try {
        for (int32_t j = 0; j <= grp.n_drafts; ++j) {
          m.fill_next_token_bitmask(base + (grp.first + j) * n_words_);
          filled = j + 1;
          // Rows past a rejected draft allow nothing (not reached: drafts are cut to the grammar).
          if (j < grp.n_drafts && !m.accept_token(grp.drafts[j])) break;
        }
      } catch (const std::exception& e) {
        // A grammar past its limits (too ambiguous): this row allows nothing, so its sample ends
        // with an error (Scheduler::process_sample) and the other rows go on.
        VELA_LOG_WARN("[constrain] mask failed: ", e.what());
      }
      for (int32_t j = filled; j <= grp.n_drafts; ++j)
        std::memset(base + (grp.first + j) * n_words_, 0,
                    static_cast<size_t>(n_words_) * sizeof(uint32_t));
      m.rollback(m.n_steps() - steps_before);
    }
  });
}

const uint32_t* BatchMasks::row_bits(int32_t row) const {
  if (row < 0 || row >= max_rows_) return nullptr;
  const int32_t k = mask_of_row_[static_cast<size_t>(row)];
  if (k < 0) return nullptr;
  return reinterpret_cast<const uint32_t*>(host_bits_.data<int32_t>()) + k * n_words_;
}

void BatchMasks::apply(Tensor& logits) {
  if (n_masks_ == 0) return;
  if (!device_.is_cuda()) {
    Tensor bits = host_bits_.slice(0, 0, n_masks_), rows = host_rows_.slice(0, 0, n_masks_);
    ops::apply_token_bitmask(logits, bits, rows);
    return;
  }
  // The pinned host rows stay unchanged until the copy is done: the next fill() comes after this
  // step's sampler has synchronized with the engine's stream, which waited for the upload.
  Tensor bits = device_bits_.slice(0, 0, n_masks_), rows = device_rows_.slice(0, 0, n_masks_);
  {
    cuda::SideStream::Scope on_side(*upload_);
    cuda::copy_bytes_async(bits.data_ptr(), device_, host_bits_.data_ptr(), Device::cpu(),
                           bits.nbytes());
    cuda::copy_bytes_async(rows.data_ptr(), device_, host_rows_.data_ptr(), Device::cpu(),
                           rows.nbytes());
  }
  upload_->join();  // the engine's stream waits for the upload; the host does not
  ops::apply_token_bitmask(logits, bits, rows);
}

}  // namespace vela::constrain
