// Sampler: host-side validation and packing of the rows (params, logit bias, penalty histories),
// the count-table bookkeeping, and the one upload / one download per step around ops::sample. On
// CUDA the staging buffers are pinned, uploads are asynchronous and cuda::StreamEvents keep the
// host from rewriting a buffer still in flight; on the CPU the staging buffers are the "device"
// buffers and nothing is copied.
#include "engine/runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/cuda/cuda_api.h"
#include "core/env.h"
#include "core/error.h"
#include "ops/sampling.h"

namespace vela {

namespace {

// Rounds a byte count up to 16 so that the next region stays aligned.
int64_t align16(int64_t bytes) { return (bytes + 15) / 16 * 16; }

int64_t params_bytes(int32_t max_rows) {
  return align16(static_cast<int64_t>(max_rows) *
                 static_cast<int64_t>(sizeof(ops::SampleRowParams)));
}

const std::vector<int32_t>& or_empty(const std::vector<int32_t>* v) {
  static const std::vector<int32_t> kEmpty;
  return v ? *v : kEmpty;
}

}  // namespace

int32_t argmax_lower_id(const float* row, int64_t n) {
  int64_t best = -1;
  for (int64_t i = 0; i < n; ++i)
    if (row[i] == row[i] && (best < 0 || row[i] > row[best])) best = i;
  return best < 0 ? 0 : static_cast<int32_t>(best);
}

Sampler::Sampler(int64_t vocab_size, int32_t max_rows, Device device, int32_t max_slots,
                 int64_t max_entries)
    : vocab_size_(vocab_size),
      max_rows_(max_rows),
      max_slots_(max_slots > 0 ? max_slots : max_rows),
      device_(device) {
  VELA_CHECK(vocab_size > 0 && vocab_size <= (int64_t{1} << 30),
             "Sampler: vocab_size must be in [1, 2^30], got ", vocab_size);
  VELA_CHECK(max_rows > 0, "Sampler: max_rows must be >= 1, got ", max_rows);
  VELA_CHECK(max_slots >= 0, "Sampler: max_slots must be >= 0, got ", max_slots);
  VELA_CHECK(max_entries >= 0, "Sampler: max_entries must be >= 0, got ", max_entries);
#if !defined(VELA_HAS_CUDA)
  if (device.is_cuda())
    VELA_THROW(Unsupported, "Sampler on ", device.str(), ": this build has no CUDA backend");
#endif
  if (device.is_cuda()) {
    for (auto& e : upload_done_) e = std::make_unique<cuda::StreamEvent>(device.index);
    reset_done_ = std::make_unique<cuda::StreamEvent>(device.index);
    // Side copies: the copies' own start latency (3-6 us each, CUPTI trace on an H100) leaves the
    // engine stream's step-to-step path.
    static const bool side = env_int("VELA_SIDE_COPIES", 1, 0, 1) != 0;
    if (side) {
      up_ = std::make_unique<cuda::SideStream>(device.index);
      down_ = std::make_unique<cuda::SideStream>(device.index);
      launched_ = std::make_unique<cuda::StreamEvent>(device.index);
      read_back_ = std::make_unique<cuda::StreamEvent>(device.index);
      staged_ = std::make_unique<cuda::StreamEvent>(device.index);
    }
  }
  alloc_upload(max_entries > 0 ? max_entries
                               : std::max<int64_t>(vocab_size, int64_t{1024} * max_rows));
  counts_ = Tensor::zeros({0, vocab_size}, DType::kI32, device);
  work_ = Tensor::zeros({max_rows_, vocab_size}, DType::kF32, device);
  out_dev_ = Tensor::zeros({ops::kSampleOutRows, max_rows_}, DType::kI32, device);
  for (Readback& r : readback_) {
    r.host = device.is_cpu() ? Tensor::zeros({ops::kSampleOutRows, max_rows_}, DType::kI32)
                             : Tensor::zeros_pinned({ops::kSampleOutRows, max_rows_}, DType::kI32);
    if (device.is_cuda()) r.ready = std::make_unique<cuda::StreamEvent>(device.index);
    r.top_logprobs.assign(static_cast<size_t>(max_rows_), -1);
  }
  mark_.assign(static_cast<size_t>(vocab_size), 0);
  touched_.reserve(static_cast<size_t>(vocab_size));
  slot_used_.assign(static_cast<size_t>(max_slots_), 0);
  row_top_logprobs_.assign(static_cast<size_t>(max_rows_), -1);
}

Sampler::~Sampler() = default;

void Sampler::alloc_upload(int64_t max_entries) {
  for (auto& e : upload_done_)
    if (e) e->synchronize();  // the old host buffers have left
  max_entries_ = max_entries;
  const int64_t p_bytes = params_bytes(max_rows_);
  const int64_t up_bytes = p_bytes + max_entries_ * 2 * 4;
  upload_dev_ = Tensor::zeros({up_bytes}, DType::kU8, device_);
  params_dev_ = Tensor::alias(upload_dev_.storage(), 0, {p_bytes}, DType::kU8);
  entries_dev_ = Tensor::alias(upload_dev_.storage(), p_bytes, {max_entries_, 2}, DType::kI32);
  for (Tensor& h : upload_host_)
    h = device_.is_cpu() ? upload_dev_ : Tensor::zeros_pinned({up_bytes}, DType::kU8);
  // The launches that read the old buffer, the zero-fill and whatever last used the new block ran
  // on the current stream; the side stream's first copy must not overtake them (rare: start and
  // growth only).
  if (up_) cuda::synchronize(device_.index);
}

void Sampler::ensure_counts() {
  if (counts_.size(0) == max_slots_) return;
  counts_ = Tensor::zeros({max_slots_, vocab_size_}, DType::kI32, device_);
  const int64_t n_reset = 3 + 2 * vocab_size_;
  reset_dev_ = Tensor::zeros({n_reset}, DType::kI32, device_);
  reset_host_ = device_.is_cpu() ? reset_dev_ : Tensor::zeros_pinned({n_reset}, DType::kI32);
}

void Sampler::upload(const Tensor& host, Tensor& dev, size_t bytes) {
  if (device_.is_cpu() || bytes == 0) return;
  cuda::copy_bytes_async(dev.data_ptr(), device_, host.data_ptr(), Device::cpu(), bytes);
}

int32_t Sampler::pack_history(const SamplerRow& row, int32_t* entries, int32_t at) {
  // Distinct tokens with (output count << 1) | in_prompt, in first-seen order.
  touched_.clear();
  for (int32_t t : or_empty(row.prompt)) {
    if (mark_[t] == 0) touched_.push_back(t);
    mark_[t] |= 1;
  }
  for (int32_t t : or_empty(row.output)) {
    if (mark_[t] == 0) touched_.push_back(t);
    mark_[t] += 2;
  }
  for (int32_t t : touched_) {
    entries[2 * at] = t;
    entries[2 * at + 1] = mark_[t];
    mark_[t] = 0;
    ++at;
  }
  return at;
}

void Sampler::reset_slot(int32_t slot, const std::vector<int32_t>& prompt,
                         const std::vector<int32_t>& output) {
  VELA_CHECK(slot >= 0 && slot < max_slots_, "Sampler::reset_slot: slot ", slot, " is outside [0, ",
             max_slots_, ")");
  auto check = [&](const std::vector<int32_t>& tokens, const char* what) {
    for (int32_t t : tokens)
      VELA_CHECK(t >= 0 && t < vocab_size_, "Sampler: ", what, " token id ", t,
                 " is outside the vocabulary [0, ", vocab_size_, ")");
  };
  check(prompt, "prompt");
  check(output, "output");
  ensure_counts();
  if (reset_done_) reset_done_->synchronize();
  int32_t* h = reset_host_.data<int32_t>();
  SamplerRow row{nullptr, &prompt, &output, 0, 0};
  const int32_t n_entries = pack_history(row, h + 3, 0);
  h[0] = slot;
  h[1] = 0;
  h[2] = n_entries;
  upload(reset_host_, reset_dev_, static_cast<size_t>(3 + 2 * n_entries) * sizeof(int32_t));
  Tensor resets = reset_dev_.slice(0, 0, 3).view({1, 3});
  Tensor entries = reset_dev_.slice(0, 3, 3 + 2 * vocab_size_).view({vocab_size_, 2});
  ops::sample_reset_counts(counts_, resets, 1, entries);
  if (reset_done_) reset_done_->record();
}

void Sampler::stage(const std::vector<SamplerRow>& rows, const std::vector<int32_t>* slots) {
  n_staged_ = -1;  // a failed stage leaves nothing to launch
  const auto n_rows = static_cast<int32_t>(rows.size());
  VELA_CHECK(rows.size() <= static_cast<size_t>(max_rows_), "Sampler: ", rows.size(),
             " rows exceed max_rows ", max_rows_);
  VELA_CHECK(slots == nullptr || slots->size() == rows.size(),
             "Sampler: ", slots ? slots->size() : 0, " slots for ", rows.size(), " rows");
  // Validate everything before writing anything; bound the entries this step needs.
  int64_t n_entries = 0;
  for (int32_t r = 0; r < n_rows; ++r) {
    const SamplerRow& row = rows[static_cast<size_t>(r)];
    VELA_CHECK(row.params != nullptr, "Sampler: row ", r, " has no SamplingParams");
    row.params->validate();
    for (const auto& [id, bias] : row.params->logit_bias)
      VELA_CHECK(id >= 0 && id < vocab_size_, "Sampler: logit_bias token id ", id,
                 " is outside the vocabulary [0, ", vocab_size_, ")");
    n_entries += static_cast<int64_t>(row.params->logit_bias.size());
    const bool from_history =
        row.params->has_penalties() && (slots == nullptr || (*slots)[static_cast<size_t>(r)] < 0);
    if (!from_history) continue;
    for (const auto* tokens : {row.prompt, row.output}) {
      const char* what = tokens == row.prompt ? "prompt" : "output";
      for (int32_t t : or_empty(tokens))
        VELA_CHECK(t >= 0 && t < vocab_size_, "Sampler: ", what, " token id ", t,
                   " is outside the vocabulary [0, ", vocab_size_, ")");
      n_entries += static_cast<int64_t>(or_empty(tokens).size());
    }
  }
  VELA_CHECK(n_entries < std::numeric_limits<int32_t>::max(), "Sampler: ", n_entries,
             " logit-bias and history entries in one step");
  if (slots != nullptr) {
    std::fill(slot_used_.begin(), slot_used_.end(), 0);
    for (int32_t r = 0; r < n_rows; ++r) {
      const int32_t s = (*slots)[static_cast<size_t>(r)];
      const bool penalized = rows[static_cast<size_t>(r)].params->has_penalties();
      VELA_CHECK(s >= -1 && s < max_slots_, "Sampler: row ", r, " slot ", s, " is outside [-1, ",
                 max_slots_, ")");
      VELA_CHECK(!penalized || s >= 0, "Sampler: row ", r,
                 " has penalties but no count-table slot");
      if (s < 0) continue;
      VELA_CHECK(!slot_used_[static_cast<size_t>(s)], "Sampler: slot ", s,
                 " is used by two rows of one step");
      slot_used_[static_cast<size_t>(s)] = 1;
    }
    ensure_counts();
  }
  if (n_entries > max_entries_) alloc_upload(std::max(n_entries, 2 * max_entries_));

  // The other buffer: the last stage()'s upload may still wait behind a forward in flight.
  upload_at_ = (upload_at_ + 1) % kBuffers;
  const size_t u = static_cast<size_t>(upload_at_);
  if (upload_done_[u]) upload_done_[u]->synchronize();
  auto* base = static_cast<uint8_t*>(upload_host_[u].data_ptr());
  auto* packed = reinterpret_cast<ops::SampleRowParams*>(base);
  auto* entries = reinterpret_cast<int32_t*>(base + params_bytes(max_rows_));
  int32_t at = 0;
  any_logprobs_ = false;
  for (int32_t r = 0; r < n_rows; ++r) {
    const SamplerRow& row = rows[static_cast<size_t>(r)];
    const SamplingParams& sp = *row.params;
    const int32_t slot = slots ? (*slots)[static_cast<size_t>(r)] : -1;
    ops::SampleRowParams p;
    if (sp.is_greedy()) {
      p.flags |= ops::kSampleGreedy;
    } else {
      p.inv_temperature = 1.0f / sp.temperature;
      p.top_p = sp.top_p;
      p.min_p = sp.min_p;
      p.top_k = (sp.top_k > 0 && sp.top_k < vocab_size_) ? sp.top_k : 0;
    }
    if (sp.repetition_penalty != 1.0f) p.flags |= ops::kSampleRepetition;
    if (sp.frequency_penalty != 0.0f || sp.presence_penalty != 0.0f)
      p.flags |= ops::kSampleFreqPresence;
    p.presence = sp.presence_penalty;
    p.frequency = sp.frequency_penalty;
    p.repetition = sp.repetition_penalty;
    p.slot = slot;
    if (sp.has_penalties() && slot >= 0) p.flags |= ops::kSampleUpdateCounts;
    if (sp.logprobs) {
      p.flags |= ops::kSampleLogprobs;
      if (sp.logprobs_mode == LogprobsMode::kTempered) p.flags |= ops::kSampleLogprobsTempered;
      p.n_top_logprobs = std::min(sp.top_logprobs, ops::kSampleMaxTopLogprobs);
      any_logprobs_ = true;
      row_top_logprobs_[static_cast<size_t>(r)] =
          static_cast<int32_t>(std::min<int64_t>(p.n_top_logprobs, vocab_size_));
    } else {
      row_top_logprobs_[static_cast<size_t>(r)] = -1;
    }
    p.bias_begin = at;
    for (const auto& [id, b] : sp.logit_bias) {
      entries[2 * at] = id;
      std::memcpy(&entries[2 * at + 1], &b, 4);
      ++at;
    }
    p.bias_end = at;
    p.pen_begin = at;
    if (sp.has_penalties() && slot < 0) at = pack_history(row, entries, at);
    p.pen_end = at;
    if (row.want_probs) p.flags |= ops::kSampleProbs;
    p.seed = row.seed;
    p.stream = row.stream;
    p.step = row.step;
    std::memcpy(packed + r, &p, sizeof(p));
  }
  const size_t bytes = at > 0 ? static_cast<size_t>(params_bytes(max_rows_)) + size_t{8} * at
                              : sizeof(ops::SampleRowParams) * static_cast<size_t>(n_rows);
  if (up_) {
    cuda::SideStream::Scope on_side(*up_);
    launched_->make_current_stream_wait();  // the last launch has read the old params
    upload(upload_host_[u], upload_dev_, bytes);
    upload_done_[u]->record();
    staged_->record();
  } else {
    upload(upload_host_[u], upload_dev_, bytes);
    if (upload_done_[u]) upload_done_[u]->record();
  }
  n_staged_ = n_rows;
}

void Sampler::launch(const Tensor& logits, const Tensor& chunk_max, Tensor* next_ids) {
  VELA_CHECK(n_staged_ >= 0, "Sampler::launch: no rows staged");
  VELA_CHECK(logits.defined() && logits.dim() == 2 && logits.dtype() == DType::kF32,
             "Sampler: logits must be f32 [n_rows, vocab], got ",
             logits.defined() ? logits.str() : std::string("undefined"));
  VELA_CHECK(logits.size(1) == vocab_size_ && logits.size(0) == n_staged_, "Sampler: logits ",
             logits.str(), " must have ", vocab_size_, " columns and ", n_staged_,
             " rows (the staged rows)");
  VELA_CHECK(logits.device() == device_, "Sampler: logits on ", logits.device().str(),
             ", sampler on ", device_.str());
  if (up_) {
    // One event for every upload: a captured launch's external wait then follows the latest.
    staged_->make_current_stream_wait();
    read_back_->make_current_stream_wait();
  }
  ops::sample(logits, params_dev_, entries_dev_, counts_, work_, out_dev_, chunk_max, next_ids);
  // Not in a capture (a replay is marked by the download() after it).
  launch_marked_ = launched_ && !cuda::current_stream_capturing(device_.index);
  if (launch_marked_) launched_->record();
}

void Sampler::finish(std::vector<SampleResult>& out) { collect(download(), out); }

int Sampler::download() {
  VELA_CHECK(n_staged_ >= 0, "Sampler::download: no rows staged since the last download()");
  const int ticket = next_readback_;
  Readback& rb = readback_[static_cast<size_t>(ticket)];
  VELA_CHECK(rb.n < 0, "Sampler::download: ", kBuffers, " read-backs are outstanding already");
  next_readback_ = (next_readback_ + 1) % kBuffers;
  const int32_t n = n_staged_;
  // Ids only: the first n of row 0; with logprobs: every row of the table.
  const size_t bytes = any_logprobs_ ? out_dev_.nbytes() : sizeof(int32_t) * static_cast<size_t>(n);
  if (down_) {
    // A captured launch's replay is enqueued before this call, unmarked: mark it here.
    if (!launch_marked_) launched_->record();
    launch_marked_ = false;
    cuda::SideStream::Scope on_side(*down_);
    launched_->make_current_stream_wait();
    cuda::copy_bytes_async(rb.host.data_ptr(), Device::cpu(), out_dev_.data_ptr(), device_, bytes);
    rb.ready->record();
    read_back_->record();
  } else if (device_.is_cuda()) {
    cuda::copy_bytes_async(rb.host.data_ptr(), Device::cpu(), out_dev_.data_ptr(), device_, bytes);
    rb.ready->record();
  } else {
    std::memcpy(rb.host.data_ptr(), out_dev_.data_ptr(), bytes);
  }
  rb.n = n;
  std::copy_n(row_top_logprobs_.begin(), n, rb.top_logprobs.begin());
  n_staged_ = -1;
  return ticket;
}

void Sampler::collect(int ticket, std::vector<SampleResult>& out) {
  VELA_CHECK(ticket >= 0 && ticket < kBuffers && readback_[static_cast<size_t>(ticket)].n >= 0,
             "Sampler::collect: ticket ", ticket, " has no read-back outstanding");
  Readback& rb = readback_[static_cast<size_t>(ticket)];
  if (rb.ready) rb.ready->synchronize();
  const int32_t n = rb.n;
  if (out.size() != static_cast<size_t>(n)) out.resize(static_cast<size_t>(n));
  const int32_t* h = rb.host.data<int32_t>();
  const int64_t s = max_rows_;
  for (int32_t r = 0; r < n; ++r) {
    SampleResult& res = out[static_cast<size_t>(r)];
    res.token = h[ops::kSampleOutToken * s + r];
    res.logprob = 0.0f;
    res.top_logprobs.clear();
    const int32_t k = rb.top_logprobs[static_cast<size_t>(r)];
    if (k < 0) continue;
    std::memcpy(&res.logprob, &h[ops::kSampleOutLogprob * s + r], 4);
    for (int32_t j = 0; j < k; ++j) {
      float lp;
      std::memcpy(&lp, &h[(ops::kSampleOutTopLogprobs + j) * s + r], 4);
      res.top_logprobs.emplace_back(h[(ops::kSampleOutTopIds + j) * s + r], lp);
    }
  }
  rb.n = -1;
}

void Sampler::abandon() {
  for (Readback& rb : readback_) {
    if (rb.n >= 0 && rb.ready) rb.ready->synchronize();
    rb.n = -1;
  }
  // A launch not yet downloaded may still write its ids (next_ids) and read its params.
  if (launched_) launched_->synchronize();
  n_staged_ = -1;
}

void Sampler::sample(const Tensor& logits, const std::vector<SamplerRow>& rows,
                     std::vector<SampleResult>& out) {
  stage(rows);
  launch(logits);
  finish(out);
}

void Sampler::distribution(const Tensor& logits, const std::vector<SamplerRow>& rows, float* probs,
                           float* processed) {
  VELA_CHECK(device_.is_cpu(), "Sampler::distribution: a CPU sampler only, this one is on ",
             device_.str());
  const size_t row_bytes = static_cast<size_t>(vocab_size_) * sizeof(float);
  dist_rows_.assign(rows.begin(), rows.end());
  for (SamplerRow& r : dist_rows_) r.want_probs = true;
  sample(logits, dist_rows_, dist_out_);
  for (size_t r = 0; r < rows.size(); ++r)
    std::memcpy(probs + static_cast<int64_t>(r) * vocab_size_,
                work_.data<float>() + static_cast<int64_t>(r) * work_.stride(0), row_bytes);
  if (processed == nullptr) return;
  sample(logits, rows, dist_out_);  // without want_probs: work_ holds the processed logits
  for (size_t r = 0; r < rows.size(); ++r) {
    const SamplingParams& p = *rows[r].params;
    const bool modified = p.has_penalties() || !p.logit_bias.empty();
    const float* src = modified ? work_.data<float>() + static_cast<int64_t>(r) * work_.stride(0)
                                : logits.data<float>() + static_cast<int64_t>(r) * logits.stride(0);
    std::memcpy(processed + static_cast<int64_t>(r) * vocab_size_, src, row_bytes);
  }
}

Tensor Sampler::device_tokens() const {
  return out_dev_.slice(0, ops::kSampleOutToken, ops::kSampleOutToken + 1).view({max_rows_});
}

}  // namespace vela
