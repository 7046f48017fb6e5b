// `vela eval choice`: multiple-choice by log-likelihood (docs/eval.md "choice"), as
// lm-evaluation-harness's output_type: multiple_choice. For each document the context is
// [description] + k few-shot examples ("<query> <gold choice>", "\n\n"-separated) + the query; each
// choice is scored as the continuation " <choice>" (lm-eval's target delimiter), tokenized as
// lm-eval does (encode(context + continuation), the continuation being what follows
// encode(context)). acc = mean[argmax_i ll_i == gold]; acc_norm = mean[argmax_i ll_i / bytes_i ==
// gold] with bytes_i the UTF-8 length of choice i (lm-eval divides by its length in characters:
// the same for ASCII). Ties go to the lower index. With a chat template the context becomes one
// user message rendered with the generation prompt and the continuation is the bare choice.
#pragma once

#include <cstdint>
#include <string>

#include "core/json.h"
#include "model/transformer.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace vela::eval {

struct ChoiceOptions {
  std::string data;
  std::string format = "auto";  // auto | mmlu | arc | hellaswag
  std::string fewshot_file;     // few-shot examples (e.g. MMLU's dev split); "" = none
  int64_t num_fewshot = 0;
  uint64_t seed = 1234;  // few-shot selection: document i draws from Rng(seed, i)
  int64_t limit = -1;
  int64_t batch_tokens = 0;  // 0 = automatic
  bool progress = true;
};

// Returns {"task": "choice", "metrics": {acc, acc_stderr, acc_norm, acc_norm_stderr}, "counts",
// "config", "subjects"? (MMLU), "samples": [{line, gold, pred, pred_norm, logprobs}]}.
// `chat` may be null (no template).
json run_choice(const Transformer& model, const Tokenizer& tokenizer, const ChatTemplate* chat,
                const ChoiceOptions& options);

}  // namespace vela::eval
