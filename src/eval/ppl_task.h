// `vela eval ppl`: perplexity and bits per byte of a model over a text file or the documents of a
// JSONL file, with a sliding window (docs/eval.md "ppl").
//
// Each document is tokenized on its own (with the tokenizer's special tokens, e.g. a BOS) and
// scored with windows of at most max_length tokens that start every `stride` tokens; a window
// scores only the tokens no earlier window reached, each conditioned on the rest of the window
// before it (Hugging Face's "perplexity of fixed-length models", lm-evaluation-harness's rolling
// log-likelihood). The first token of a document has no context and is not scored, so a document
// of n tokens contributes n - 1 scored tokens, while all its bytes and words count.
#pragma once

#include <cstdint>
#include <string>

#include "core/json.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"

namespace vela::eval {

struct PplOptions {
  std::string data;             // a text file (one document) or JSONL (one per record)
  std::string format = "auto";  // auto (by extension: .jsonl / .json -> jsonl) | text | jsonl
  std::string field = "text";   // the JSONL field holding the text
  int64_t max_length = 0;       // window length in tokens; 0 = the model's max_position_embeddings
  int64_t stride = 0;           // tokens between window starts; 0 = max_length (disjoint windows)
  int64_t limit = -1;           // at most this many documents (< 0: all)
  int64_t batch_tokens = 0;     // tokens per forward; 0 = automatic (see loglikelihood.h)
  bool progress = true;         // progress bar on stderr
};

// Returns {"task": "ppl", "metrics": {...}, "counts": {...}, "config": {...}, "documents": [...]}
// (docs/eval.md lists the keys). Throws InvalidArgument naming the file and record for bad data.
json run_ppl(const Transformer& model, const Tokenizer& tokenizer, const PplOptions& options);

// The default batch token budget: about 1 GiB of f32 logits, at least one full window.
int64_t default_batch_tokens(const ModelConfig& config, int64_t longest);

}  // namespace vela::eval
