// The speculative-decoding part of the Scheduler (its hooks in scheduler.cpp are marked "spec"):
// drafting a decode row (prompt lookup here, or the draft model for all rows at once after
// planning), queueing its verification sample rows, and accepting the drafts with the KV rollback
// of the rejected ones (target and draft). Kept apart so scheduler.cpp stays about scheduling.
// Constrained samples speculate too: their drafts are cut at the first token the grammar rejects
// (prompt lookup here; the draft model draws under the mask), each verify row is masked with the
// grammar state after the drafts before it (BatchMasks groups), and the matcher advances over the
// emitted tokens only (process_sample), so the output is what decoding without speculation makes.
#include <algorithm>
#include <array>

#include "engine/scheduler.h"
#include "engine/spec/draft_model.h"
#include "engine/spec/rejection.h"

namespace vela {

int32_t Scheduler::plan_drafts(Task& t, int32_t budget) {
  t.drafts.clear();
  if (!spec_->wants(t.params())) return 1;
  // Verifying m drafts emits up to m + 1 tokens, and writes KV at positions
  // [n_computed, n_computed + 1 + m): both stay within max_tokens and the context.
  const int32_t left = t.params().max_tokens - static_cast<int32_t>(t.output.size());
  const int32_t max_drafts = std::min({left - 1, budget - 1, cache_.max_ctx() - t.n_computed - 1,
                                       SpeculativeConfig::kMaxDraftTokens});
  if (max_drafts <= 0) return 1;
  if (draft_) {  // placeholders: propose_drafts() draws them once the batch is planned
    t.drafts.assign(static_cast<size_t>(std::min(spec_->config().k, max_drafts)), 0);
    return 1 + static_cast<int32_t>(t.drafts.size());
  }
  spec_->propose(t.prompt(), t.output, max_drafts, t.drafts);
  if (t.matcher && !t.drafts.empty())  // a draft the grammar rejects could never be accepted
    t.drafts.resize(static_cast<size_t>(
        t.matcher->accepted_prefix(t.drafts.data(), static_cast<int32_t>(t.drafts.size()))));
  return 1 + static_cast<int32_t>(t.drafts.size());
}

void Scheduler::propose_drafts() {
  std::vector<DraftModel::Job>& jobs = draft_->job_scratch();
  jobs.clear();
  for (size_t k = 0; k < items_.size(); ++k) {
    Task* t = item_tasks_[k];
    if (!t->drafts.empty())
      jobs.push_back({t, static_cast<int32_t>(t->drafts.size()), static_cast<int32_t>(k)});
  }
  if (jobs.empty()) return;
  draft_->propose(jobs);
  for (const DraftModel::Job& j : jobs) {
    if (!j.task->drafts.empty()) continue;
    // No draft KV for it: a plain decode row (its extra target slots stay reserved, unused).
    items_[static_cast<size_t>(j.item)].n_new = 1;
    items_[static_cast<size_t>(j.item)].n_logits = 1;
  }
}

void Scheduler::release_draft(const Task& t, bool record) {
  if (draft_) draft_->release(t, record);
}

void Scheduler::draft_stats(SpeculativeStats& s) const {
  DraftModel::Stats d = draft_->stats();
  s.draft_forwards = d.forwards;
  s.draft_seconds = d.seconds;
}

void Scheduler::queue_verify_rows(Task& t, int32_t logits_row) {
  // Row j samples position output.size() + j as if drafts[0 .. j) had been generated: the same
  // Philox step and (for penalties) the same context as decoding without speculation.
  const int32_t m = static_cast<int32_t>(t.drafts.size());
  const bool penalties = t.params().has_penalties();
  for (int32_t j = 0; j <= m; ++j) {
    const std::vector<int32_t>* ctx = &t.output;
    if (penalties && j > 0) {
      if (spec_ctx_used_ == spec_ctx_.size()) spec_ctx_.emplace_back();
      std::vector<int32_t>& c = spec_ctx_[spec_ctx_used_++];
      c.assign(t.output.begin(), t.output.end());
      c.insert(c.end(), t.drafts.begin(), t.drafts.begin() + j);
      ctx = &c;
    }
    sample_rows_.push_back(SamplerRow{&t.params(), &t.prompt(), ctx, t.seed,
                                      static_cast<uint64_t>(t.output.size() + j),
                                      static_cast<uint64_t>(t.index)});
    sample_tasks_.push_back(&t);
    sample_src_.push_back(logits_row + j);
  }
}

int64_t Scheduler::accept_drafts(Task& t, const SampleResult* results, const Tensor& logits,
                                 int32_t logits_row) {
  const int32_t m = static_cast<int32_t>(t.drafts.size());
  int32_t a = 0;
  const SampleResult* out = results;
  if (draft_ && !t.params().is_greedy()) {
    // The general rule: p from the target's rows (masked like the sampled rows: `results` are
    // sample rows of this step, and a constrained task's rows have masks), q kept by the draft.
    const auto sample_row = static_cast<int32_t>(results - sample_out_.data());
    a = draft_->verify(t, logits, logits_row, results, draft_emitted_,
                       t.matcher ? masks_.get() : nullptr, sample_row);
    out = draft_emitted_.data();
  } else {
    // Point mass (prompt lookup; greedy rows of a draft model: one-hot p and q).
    std::array<int32_t, SpeculativeConfig::kMaxDraftTokens + 1> sampled{};
    for (int32_t j = 0; j <= m; ++j) sampled[static_cast<size_t>(j)] = results[j].token;
    a = accept_point_mass(sampled.data(), t.drafts.data(), m);
  }
  // The step computed KV for the last token and the m drafts; keep the last token and the
  // accepted drafts, forget the rest (their slots stay reserved and are rewritten next step).
  const int32_t base = t.n_computed;
  cache_.truncate(t.id, base + 1 + a);
  if (draft_) draft_->accepted(t, t.n_tokens(), a);
  spec_->record(m, a, a + 1);
  int64_t n_emitted = 0;
  for (int32_t j = 0; j <= a; ++j) {
    // Before emitting token j, the KV covers tokens() up to the one it follows.
    t.n_computed = base + 1 + j;
    process_sample(t, out[j]);
    ++n_emitted;
    if (!t.request) break;  // finished (stop token or string, max_tokens): drop the rest
  }
  return n_emitted;
}

}  // namespace vela
