// StopChecker (stop strings over a text stream) and StopCondition (the per-token stop rules).
// The held-back text is at most (longest stop string - 1) bytes plus an incomplete UTF-8 tail, so
// each push scans a short buffer.
#include "engine/stop_checker.h"

#include <algorithm>
#include <utility>

namespace vela {

namespace {

// Length of an incomplete UTF-8 sequence at the end of `s` (0 when s ends on a whole character or
// on bytes that cannot start one: those are passed through as they are).
size_t incomplete_utf8_tail(const std::string& s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(n, 4); ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t want = (c & 0x80) == 0      ? 1
                  : (c & 0xE0) == 0xC0 ? 2
                  : (c & 0xF0) == 0xE0 ? 3
                  : (c & 0xF8) == 0xF0 ? 4
                                       : 1;
    return back < want ? back : 0;
  }
  return 0;
}

}  // namespace

StopChecker::StopChecker(std::vector<std::string> stop_strings) {
  for (std::string& s : stop_strings) {
    if (s.empty()) continue;
    max_stop_bytes_ = std::max(max_stop_bytes_, s.size());
    stops_.push_back(std::move(s));
  }
}

std::string StopChecker::push(std::string_view text) {
  if (stopped_) return {};
  pending_.append(text);

  // A stop string that completes now must end inside `text`: everything emitted earlier was
  // checked. Pick the one that ends first.
  size_t best_end = std::string::npos, best_pos = std::string::npos;
  const std::string* best = nullptr;
  for (const std::string& s : stops_) {
    size_t pos = pending_.find(s);
    if (pos == std::string::npos) continue;
    size_t end = pos + s.size();
    if (end < best_end || (end == best_end && pos < best_pos)) {
      best_end = end;
      best_pos = pos;
      best = &s;
    }
  }
  if (best != nullptr) {
    std::string out = pending_.substr(0, best_pos);
    matched_ = *best;
    stopped_ = true;
    pending_.clear();
    return out;
  }

  // Hold back the longest suffix that a later increment could complete into a stop string.
  size_t hold = 0;
  if (max_stop_bytes_ > 0) {
    for (size_t k = std::min(pending_.size(), max_stop_bytes_ - 1); k > 0 && hold == 0; --k) {
      std::string_view suffix = std::string_view(pending_).substr(pending_.size() - k);
      for (const std::string& s : stops_) {
        if (s.size() > k && std::string_view(s).substr(0, k) == suffix) {
          hold = k;
          break;
        }
      }
    }
  }
  hold = std::max(hold, incomplete_utf8_tail(pending_));
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopChecker::flush() {
  if (stopped_) return {};
  std::string out = std::move(pending_);
  pending_.clear();
  return out;
}

StopCondition::StopCondition(const SamplingParams& params, std::vector<int32_t> eos_token_ids)
    : eos_token_ids_(std::move(eos_token_ids)),
      stop_token_ids_(params.stop_token_ids),
      ignore_eos_(params.ignore_eos),
      max_tokens_(params.max_tokens),
      strings_(params.stop) {}

bool StopCondition::is_stop_token(int32_t token) const {
  if (!ignore_eos_ &&
      std::find(eos_token_ids_.begin(), eos_token_ids_.end(), token) != eos_token_ids_.end())
    return true;
  return std::find(stop_token_ids_.begin(), stop_token_ids_.end(), token) != stop_token_ids_.end();
}

StopDecision StopCondition::step(int32_t token, int32_t n_generated, std::string_view text) {
  StopDecision d;
  if (finished_) return d;
  if (is_stop_token(token)) {
    d.text = strings_.flush();
    d.finish = FinishReason::kStop;
  } else {
    d.text = strings_.push(text);
    if (strings_.stopped()) {
      d.finish = FinishReason::kStop;
      d.stop_reason = strings_.matched();
    } else if (n_generated >= max_tokens_) {
      d.text += strings_.flush();
      d.finish = FinishReason::kLength;
    }
  }
  finished_ = d.finish.has_value();
  return d;
}

std::string StopCondition::finish() {
  if (finished_) return {};
  finished_ = true;
  return strings_.flush();
}

}  // namespace vela
