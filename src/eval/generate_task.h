// `vela eval generate`: generation tasks through the Engine (batched, continuous batching), scored
// with the shared scorers (docs/eval.md "generate").
//
// Prompt: [k few-shot examples "<prompt> <target>" joined by "\n\n", then "\n\n"] + the document's
// prompt, where a prompt is --template with "{field}" replaced by the record's fields (default
// "Question: {question}\nAnswer:" when records have "question", else "{prompt}" / "{input}").
// With a chat template the whole text is one user message rendered with the generation prompt.
// Scorers (a document with several references takes the best):
//   exact_match  normalize_answer(pred) == normalize_answer(ref)
//   gsm8k        extract_gsm8k_answer(pred) == extract_gsm8k_answer(ref)   ("#### N", else last)
//   last_number  extract_last_number(pred) == canonical number of ref
//   regex        extract_regex(pred, R, group) vs the reference (or its own extraction when R
//                matches it), by exact_match, numbers compared canonically
//   rouge_l      rouge_l_f1(pred, ref)
// "auto" picks gsm8k when the first reference contains "####", else exact_match.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"
#include "engine/engine.h"
#include "tokenizer/chat_template.h"

namespace vela::eval {

struct GenerateOptions {
  std::string data;
  std::string prompt_template;  // "" = by the fields (see above)
  std::string target_field;     // "" = answer | target | reference | output (first present)
  std::string fewshot_file;
  int64_t num_fewshot = 0;
  uint64_t seed = 1234;         // few-shot selection and sampling (request i: seed + i)
  std::string scorer = "auto";  // auto | exact_match | gsm8k | last_number | regex | rouge_l
  std::string regex;            // for scorer regex
  int32_t regex_group = 1;
  int32_t max_tokens = 0;   // 0 = min(256, half the model's context)
  float temperature = 0;    // 0 = greedy
  bool stop_given = false;  // false: default stops ("\n\n", "Question:"; none with chat)
  std::vector<std::string> stop;
  int64_t limit = -1;
  std::string where;       // "field=value": only those records (see read_jsonl)
  int64_t max_batch = 64;  // requests in flight at once
  bool progress = true;
};

// Returns {"task": "generate", "metrics": {exact_match | rouge_l (+ _stderr), extracted},
// "counts", "config", "samples": [{line, prompt_tokens, output, extracted, references, score}]}.
json run_generate(Engine& engine, const ChatTemplate* chat, const GenerateOptions& options);

}  // namespace vela::eval
