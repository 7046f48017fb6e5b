// Verification of draft tokens: which drafts the target accepts and which token follows them.
//
// The general rule (Leviathan et al., Chen et al.) for a draft x ~ q at a position where the
// target's sampling distribution is p: accept with probability min(1, p(x) / q(x)); on rejection
// draw from max(0, p - q) normalised; after k accepted drafts draw a bonus token from p. The
// emitted tokens are then distributed exactly as sampling from p alone: P(emit y) =
// q(y) min(1, p(y)/q(y)) + (1 - sum_x min(p(x), q(x))) max(0, p(y) - q(y)) / sum max(0, p - q)
// = min(p(y), q(y)) + max(0, p(y) - q(y)) = p(y). `verify_draft` is that rule on one position's
// p and q rows (draft-model speculation, spec/draft_model.h).
//
// For a deterministic drafter (prompt lookup) q is a point mass on x, and the rule becomes: accept
// with probability p(x); on rejection draw from p with x removed, renormalised. Drawing y ~ p and
// accepting iff y == x is that rule exactly: P(accept) = p(x), and given y != x, y is distributed
// as p(.) / (1 - p(x)) over the tokens other than x. So the engine samples every verified position
// with its own sampler (the full pipeline: penalties, bias, temperature, top-k/p, min-p, on the
// context prompt + output + the drafts before it, with the Philox draw (seed, stream, step) that
// decoding without speculation would use at that step) and keeps the drafts up to the first
// mismatch (`accept_point_mass`). Greedy rows are the temperature -> 0 case of the same rule
// (p and q one-hot: accept iff the argmaxes agree, else emit the target's argmax), for prompt
// lookup and draft models alike.
// A consequence the tests check: prompt-lookup output equals non-speculative output token for
// token for the same seed (up to floating-point differences between the batched and the one-token
// forward), greedy or sampled; draft-model output does for greedy rows.
#pragma once

#include <cstdint>

namespace vela {

// target[0 .. n_drafts] are the target's samples at the n_drafts + 1 verified positions (position
// j conditioned on drafts[0 .. j)); drafts[0 .. n_drafts) the point-mass drafts. Returns the number
// of accepted drafts a: the emitted tokens are target[0 .. a] (the a accepted drafts, which equal
// their samples, then the correction token target[a], or the bonus token when a == n_drafts).
int32_t accept_point_mass(const int32_t* target, const int32_t* drafts, int32_t n_drafts);

// One position of the general rule. p, q: [vocab] probability rows (each summing to 1; the
// target's and the draft's sampling distributions), x: the draft token, drawn from q (q[x] > 0).
// u_accept, u_residual: independent uniforms in [0, 1). Accepts iff u_accept * q[x] < p[x] (so with
// probability min(1, p[x] / q[x])) and returns x with *accepted = true; else returns a draw from
// max(0, p - q) normalised (inverse CDF in ascending id order at u_residual) with *accepted =
// false. When that residual has no mass (p == q up to rounding, where rejection has probability
// ~0), the draw is from p.
int32_t verify_draft(const float* p, const float* q, int64_t vocab, int32_t x, float u_accept,
                     float u_residual, bool* accepted);

// A draw from a probability row by inverse CDF in ascending id order at uniform u (the first id
// whose cumulative mass exceeds u * total); the last positive id when rounding leaves none.
int32_t sample_from_probs(const float* probs, int64_t vocab, float u);

// Philox streams of the draft-model rule's uniforms, above any sample index (the target's own
// draws use stream = sample index): stream = base + sample index, index = the output position.
constexpr uint64_t kDraftDrawStream = 1ull << 40;      // x ~ q
constexpr uint64_t kDraftAcceptStream = 2ull << 40;    // u_accept
constexpr uint64_t kDraftResidualStream = 3ull << 40;  // u_residual

}  // namespace vela
