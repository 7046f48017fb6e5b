// Verification of draft tokens: which drafts the target accepts and which token follows them.
//
// The general rule (Leviathan et al., Chen et al.) for a draft x ~ q at a position where the
// target's sampling distribution is p: accept with probability min(1, p(x) / q(x)); on rejection
// draw from max(0, p - q) normalised; after k accepted drafts draw a bonus token from p. The
// emitted tokens are then distributed exactly as sampling from p alone.
//
// For a deterministic drafter (prompt lookup) q is a point mass on x, and the rule becomes: accept
// with probability p(x); on rejection draw from p with x removed, renormalised. Drawing y ~ p and
// accepting iff y == x is that rule exactly: P(accept) = p(x), and given y != x, y is distributed
// as p(.) / (1 - p(x)) over the tokens other than x. So the engine samples every verified position
// with its own sampler (the full pipeline: penalties, bias, temperature, top-k/p, min-p, on the
// context prompt + output + the drafts before it, with the Philox draw (seed, stream, step) that
// decoding without speculation would use at that step) and keeps the drafts up to the first
// mismatch. Greedy rows are the temperature -> 0 case of the same rule (y = argmax p).
// A consequence the tests check: speculative output equals non-speculative output token for token
// for the same seed (up to floating-point differences between the batched and the one-token
// forward), greedy or sampled.
#pragma once

#include <cstdint>

namespace vela {

// target[0 .. n_drafts] are the target's samples at the n_drafts + 1 verified positions (position
// j conditioned on drafts[0 .. j)); drafts[0 .. n_drafts) the point-mass drafts. Returns the number
// of accepted drafts a: the emitted tokens are target[0 .. a] (the a accepted drafts, which equal
// their samples, then the correction token target[a], or the bonus token when a == n_drafts).
int32_t accept_point_mass(const int32_t* target, const int32_t* drafts, int32_t n_drafts);

}  // namespace vela
