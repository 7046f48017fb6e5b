// Verification rules: point-mass prefix matching and the general min(1, p/q) rule.
#include "engine/spec/rejection.h"

#include <algorithm>

#include "core/error.h"

namespace vela {

int32_t accept_point_mass(const int32_t* target, const int32_t* drafts, int32_t n_drafts) {
  int32_t a = 0;
  while (a < n_drafts && target[a] == drafts[a]) ++a;
  return a;
}

int32_t sample_from_probs(const float* probs, int64_t vocab, float u) {
  double total = 0.0;
  for (int64_t i = 0; i < vocab; ++i) total += probs[i];
  const double target = static_cast<double>(u) * total;
  double cum = 0.0;
  int32_t last = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (!(probs[i] > 0.0f)) continue;
    cum += probs[i];
    last = static_cast<int32_t>(i);
    if (cum > target) return last;
  }
  return last;
}

int32_t verify_draft(const float* p, const float* q, int64_t vocab, int32_t x, float u_accept,
                     float u_residual, bool* accepted) {
  VELA_CHECK(x >= 0 && x < vocab, "verify_draft: draft token ", x, " outside [0, ", vocab, ")");
  if (static_cast<double>(u_accept) * q[x] < p[x]) {
    *accepted = true;
    return x;
  }
  *accepted = false;
  // Residual max(0, p - q), drawn without materialising it: two passes over the row.
  double total = 0.0;
  for (int64_t i = 0; i < vocab; ++i) total += std::max(0.0f, p[i] - q[i]);
  if (!(total > 0.0)) return sample_from_probs(p, vocab, u_residual);
  const double target = static_cast<double>(u_residual) * total;
  double cum = 0.0;
  int32_t last = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    const float r = std::max(0.0f, p[i] - q[i]);
    if (!(r > 0.0f)) continue;
    cum += r;
    last = static_cast<int32_t>(i);
    if (cum > target) return last;
  }
  return last;
}

}  // namespace vela
