// Tokenizing a (context, continuation) pair the way lm-evaluation-harness does for log-likelihood
// requests: trailing spaces of the context move to the continuation, the pair is encoded as one
// text, and the continuation's tokens are what follows the context's own encoding. When the context
// encodes to nothing (no BOS, empty text) the tokenizer's BOS (else EOS) id is the context, as
// lm-eval's prefix token. Long contexts are cut from the left so the whole fits in max_tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/loglikelihood.h"
#include "tokenizer/tokenizer.h"

namespace vela::eval {

// Throws InvalidArgument when the continuation encodes to no token, or alone exceeds max_tokens
// - 1.
LoglikelihoodRequest encode_pair(const Tokenizer& tokenizer, std::string context,
                                 std::string continuation, bool add_special_tokens,
                                 int64_t max_tokens);

// Left-truncates a prompt so it leaves room for max_new tokens in a context of max_ctx.
void truncate_left(std::vector<int32_t>& ids, int64_t keep);

}  // namespace vela::eval
