// CPU paged attention against a double-precision reference: sequences bringing 1 (decode), a few
// (verify) and many (prefill chunks past the 16-query block) tokens after prior context, keys at
// scattered slots, grouped-query heads, head dims 40 .. 80, f32 / bf16 / f16; long prefills whose
// keys fill whole 64-key score tiles.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "core/rng.h"
#include "ops/attention.h"
#include "ops/op_test_util.h"

namespace vela {
namespace {

using test::random_tensor;
using test::to_doubles;

// paged_attention of sequences bringing q_lens[s] tokens after prior[s] keys, at every head dim of
// ds and every float dtype, against the double reference.
void check_paged(const std::vector<int32_t>& q_lens, const std::vector<int32_t>& prior,
                 int64_t max_ctx, const std::vector<int64_t>& ds) {
  const int64_t n_seqs = static_cast<int64_t>(q_lens.size()), n_heads = 6, n_kv = 2,
                n_rep = n_heads / n_kv;
  std::vector<int32_t> qo = {0}, lens;
  for (int64_t s = 0; s < n_seqs; ++s) {
    qo.push_back(qo.back() + q_lens[s]);
    lens.push_back(prior[s] + q_lens[s]);
  }
  const int64_t n_tokens = qo.back();
  const int64_t n_slots = n_seqs * max_ctx + 7;
  // Each sequence's positions map to a shuffled set of slots (rows of req_to_token in reverse).
  std::vector<int32_t> perm(static_cast<size_t>(n_slots));
  std::iota(perm.begin(), perm.end(), 0);
  Rng rng(5);
  for (size_t i = perm.size() - 1; i > 0; --i)
    std::swap(perm[i], perm[static_cast<size_t>(rng.uniform() * static_cast<float>(i + 1)) % (i + 1)]);
  std::vector<int32_t> r2t(static_cast<size_t>(n_seqs * max_ctx)), rows(n_seqs);
  for (int64_t s = 0; s < n_seqs; ++s) {
    rows[s] = static_cast<int32_t>(n_seqs - 1 - s);
    for (int64_t p = 0; p < max_ctx; ++p) r2t[rows[s] * max_ctx + p] = perm[s * max_ctx + p];
  }
  uint64_t seed = 40;
  for (int64_t d : ds) {
    for (DType dt : test::kFloatDTypes) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " d=" + std::to_string(d));
      Tensor q = random_tensor({n_tokens, n_heads, d}, dt, seed++, -2.0f, 2.0f);
      Tensor kc = random_tensor({n_slots, n_kv, d}, dt, seed++, -2.0f, 2.0f);
      Tensor vc = random_tensor({n_slots, n_kv, d}, dt, seed++);
      Tensor out = Tensor::empty({n_tokens, n_heads, d}, dt);
      const float scale = 1.0f / std::sqrt(static_cast<float>(d));
      ops::paged_attention(q, kc, vc, Tensor::from_vector(r2t, {n_seqs, max_ctx}),
                           Tensor::from_vector(rows), Tensor::from_vector(lens),
                           Tensor::from_vector(qo), scale, out);
      const std::vector<double> vq = to_doubles(q), vk = to_doubles(kc), vv = to_doubles(vc);
      std::vector<double> want(static_cast<size_t>(n_tokens * n_heads * d));
      for (int64_t s = 0; s < n_seqs; ++s) {
        for (int64_t t = qo[s]; t < qo[s + 1]; ++t) {
          const int64_t pos = prior[s] + (t - qo[s]);
          for (int64_t h = 0; h < n_heads; ++h) {
            const int64_t g = h / n_rep;
            std::vector<double> w(static_cast<size_t>(pos + 1));
            double mx = -INFINITY, total = 0;
            for (int64_t p = 0; p <= pos; ++p) {
              const int64_t slot = r2t[rows[s] * max_ctx + p];
              double dot = 0;
              for (int64_t i = 0; i < d; ++i)
                dot += vq[(t * n_heads + h) * d + i] * vk[(slot * n_kv + g) * d + i];
              w[p] = dot * scale;
              mx = std::max(mx, w[p]);
            }
            for (double& x : w) total += (x = std::exp(x - mx));
            for (int64_t i = 0; i < d; ++i) {
              double o = 0;
              for (int64_t p = 0; p <= pos; ++p)
                o += w[p] / total * vv[(r2t[rows[s] * max_ctx + p] * n_kv + g) * d + i];
              want[(t * n_heads + h) * d + i] = o;
            }
          }
        }
      }
      const double tol = dt == DType::kF32 ? 2e-5 : 4 * test::dtype_eps(dt);
      test::expect_close(to_doubles(out), want, tol, tol, "paged_attention");
    }
  }
}

TEST(PagedAttention, MatchesReferenceForDecodeVerifyAndChunkedPrefill) {
  check_paged({1, 5, 37, 16}, {20, 10, 0, 3}, 64, {64, 80});
}

// Prefill blocks whose keys fill whole 64-key score tiles (the register-tiled scores), and head
// dims whose P @ V ends in a 16- or 8-wide chunk on AVX2 (48, 40).
TEST(PagedAttention, MatchesReferenceForLongPrefillAndOddHeadDims) {
  check_paged({130, 1, 70}, {20, 150, 0}, 160, {40, 48, 64});
}

}  // namespace
}  // namespace vela
