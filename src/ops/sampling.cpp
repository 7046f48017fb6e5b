// sample / sample_reset_counts: shape, dtype and device checks, then dispatch to the CPU
// implementation (ops/cpu/sampling.cpp) or the CUDA kernels (ops/cuda/sampling.cu).
#include "ops/sampling.h"

#include "ops/checks.h"
#include "ops/dispatch.h"

namespace vela::ops {

namespace {

void check_chunk_max(const char* op, const Tensor& logits, const Tensor& chunk_max) {
  check_rank(op, "chunk_max", chunk_max, 2);
  check_dtype(op, "chunk_max", chunk_max, DType::kI64);
  VELA_CHECK(chunk_max.stride(1) == 1, op, ": chunk_max ", chunk_max.str(),
             " must have unit column stride");
  const int64_t chunks = argmax_chunk_count(logits.size(1));
  VELA_CHECK(chunk_max.size(0) >= logits.size(0) && chunk_max.size(1) >= chunks, op, ": chunk_max ",
             chunk_max.str(), " must be [>= ", logits.size(0), ", >= ", chunks, "] for logits ",
             logits.str());
  check_same_device(op, "chunk_max", chunk_max, "logits", logits);
}

}  // namespace

void argmax_chunks(const Tensor& logits, Tensor& chunk_max) {
  const char* op = "argmax_chunks";
  check_defined(op, "logits", logits);
  check_rank(op, "logits", logits, 2);
  check_dtype(op, "logits", logits, DType::kF32);
  VELA_CHECK(logits.size(1) >= 1 && logits.size(1) <= (int64_t{1} << 30) &&
                 (logits.size(1) == 1 || logits.stride(1) == 1),
             op, ": logits ", logits.str(),
             " must have between 1 and 2^30 columns and unit column stride");
  check_defined(op, "chunk_max", chunk_max);
  check_chunk_max(op, logits, chunk_max);
  if (logits.size(0) == 0) return;
  VELA_DISPATCH(logits.device(), argmax_chunks, logits, chunk_max);
}

void sample(const Tensor& logits, const Tensor& params, const Tensor& entries, Tensor& counts,
            Tensor& work, Tensor& out, const Tensor& chunk_max, Tensor* next_ids) {
  const char* op = "sample";
  check_defined(op, "logits", logits);
  check_rank(op, "logits", logits, 2);
  check_dtype(op, "logits", logits, DType::kF32);
  const int64_t n_rows = logits.size(0), vocab = logits.size(1);
  VELA_CHECK(vocab >= 1 && vocab <= (int64_t{1} << 30), "sample: logits ", logits.str(),
             " must have between 1 and 2^30 columns");
  VELA_CHECK(vocab == 1 || logits.stride(1) == 1, "sample: logits ", logits.str(),
             " must have unit column stride");
  check_defined(op, "params", params);
  check_dtype(op, "params", params, DType::kU8);
  check_contiguous(op, "params", params);
  VELA_CHECK(params.numel() >= n_rows * static_cast<int64_t>(sizeof(SampleRowParams)),
             "sample: params ", params.str(), " hold fewer than ", n_rows, " rows");
  check_defined(op, "entries", entries);
  check_rank(op, "entries", entries, 2);
  check_dtype(op, "entries", entries, DType::kI32);
  check_contiguous(op, "entries", entries);
  VELA_CHECK(entries.size(1) == 2, "sample: entries ", entries.str(), " must be [n, 2]");
  check_defined(op, "counts", counts);
  check_rank(op, "counts", counts, 2);
  check_dtype(op, "counts", counts, DType::kI32);
  check_contiguous(op, "counts", counts);
  VELA_CHECK(counts.size(1) == vocab, "sample: counts ", counts.str(), " do not have ", vocab,
             " columns");
  check_defined(op, "work", work);
  check_rank(op, "work", work, 2);
  check_dtype(op, "work", work, DType::kF32);
  check_contiguous(op, "work", work);
  VELA_CHECK(work.size(0) >= n_rows && work.size(1) == vocab, "sample: work ", work.str(),
             " must be [>= ", n_rows, ", ", vocab, "]");
  check_defined(op, "out", out);
  check_rank(op, "out", out, 2);
  check_dtype(op, "out", out, DType::kI32);
  check_contiguous(op, "out", out);
  VELA_CHECK(out.size(0) == kSampleOutRows && out.size(1) >= n_rows, "sample: out ", out.str(),
             " must be [", kSampleOutRows, ", >= ", n_rows, "]");
  check_same_device(op, "params", params, "logits", logits);
  check_same_device(op, "entries", entries, "logits", logits);
  check_same_device(op, "counts", counts, "logits", logits);
  check_same_device(op, "work", work, "logits", logits);
  check_same_device(op, "out", out, "logits", logits);
  if (chunk_max.defined()) check_chunk_max(op, logits, chunk_max);
  int32_t* ids = nullptr;
  if (next_ids != nullptr) {
    check_defined(op, "next_ids", *next_ids);
    check_dtype(op, "next_ids", *next_ids, DType::kI32);
    check_contiguous(op, "next_ids", *next_ids);
    check_same_device(op, "next_ids", *next_ids, "logits", logits);
    VELA_CHECK(next_ids->numel() >= n_rows, "sample: next_ids ", next_ids->str(),
               " hold fewer than ", n_rows, " rows");
    ids = next_ids->data<int32_t>();
  }
  if (n_rows == 0) return;
  VELA_DISPATCH(logits.device(), sample, logits, params, entries, counts, work, out, chunk_max,
                ids);
}

void sample_reset_counts(Tensor& counts, const Tensor& resets, int32_t n_resets,
                         const Tensor& entries) {
  const char* op = "sample_reset_counts";
  check_defined(op, "counts", counts);
  check_rank(op, "counts", counts, 2);
  check_dtype(op, "counts", counts, DType::kI32);
  check_contiguous(op, "counts", counts);
  check_defined(op, "resets", resets);
  check_rank(op, "resets", resets, 2);
  check_dtype(op, "resets", resets, DType::kI32);
  check_contiguous(op, "resets", resets);
  VELA_CHECK(resets.size(1) == 3 && resets.size(0) >= n_resets && n_resets >= 0,
             "sample_reset_counts: resets ", resets.str(), " must be [>= ", n_resets, ", 3]");
  check_defined(op, "entries", entries);
  check_rank(op, "entries", entries, 2);
  check_dtype(op, "entries", entries, DType::kI32);
  check_contiguous(op, "entries", entries);
  VELA_CHECK(entries.size(1) == 2, "sample_reset_counts: entries ", entries.str(),
             " must be [n, 2]");
  check_same_device(op, "resets", resets, "counts", counts);
  check_same_device(op, "entries", entries, "counts", counts);
  if (n_resets == 0) return;
  VELA_DISPATCH(counts.device(), sample_reset_counts, counts, resets, n_resets, entries);
}

}  // namespace vela::ops
