// lm-eval-style (context, continuation) tokenization.
#include "eval/context_tokens.h"

#include "core/error.h"

namespace vela::eval {

void truncate_left(std::vector<int32_t>& ids, int64_t keep) {
  if (keep >= 0 && static_cast<int64_t>(ids.size()) > keep)
    ids.erase(ids.begin(), ids.end() - keep);
}

LoglikelihoodRequest encode_pair(const Tokenizer& tok, std::string context,
                                 std::string continuation, bool add_special_tokens,
                                 int64_t max_tokens) {
  size_t n_spaces = 0;
  while (n_spaces < context.size() && context[context.size() - 1 - n_spaces] == ' ') ++n_spaces;
  if (n_spaces > 0) {
    continuation = context.substr(context.size() - n_spaces) + continuation;
    context.resize(context.size() - n_spaces);
  }
  std::vector<int32_t> whole = tok.encode(context + continuation, add_special_tokens);
  std::vector<int32_t> ctx = tok.encode(context, add_special_tokens);
  std::vector<int32_t> cont;
  if (ctx.size() < whole.size()) {
    cont.assign(whole.begin() + static_cast<std::ptrdiff_t>(ctx.size()), whole.end());
  } else {
    cont = tok.encode(continuation, false);
  }
  VELA_CHECK(!cont.empty(), "the answer '", continuation, "' encodes to no token");
  if (ctx.empty()) {
    auto prefix = tok.bos_id() ? tok.bos_id() : tok.eos_id();
    VELA_CHECK(prefix.has_value(),
               "the context is empty and the tokenizer has no BOS or EOS token "
               "to condition the first answer token on");
    ctx.push_back(*prefix);
  }
  VELA_CHECK(static_cast<int64_t>(cont.size()) < max_tokens, "the answer '", continuation, "' (",
             cont.size(), " tokens) leaves no room for context in ", max_tokens, " tokens");
  truncate_left(ctx, max_tokens - static_cast<int64_t>(cont.size()));
  LoglikelihoodRequest r;
  r.first_target = static_cast<int32_t>(ctx.size());
  r.tokens = std::move(ctx);
  r.tokens.insert(r.tokens.end(), cont.begin(), cont.end());
  return r;
}

}  // namespace vela::eval
