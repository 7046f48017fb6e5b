// Multiple-choice documents in the public JSONL layouts (docs/eval.md "choice"), turned into the
// prompts lm-evaluation-harness uses for them:
//   mmlu       {"question", "choices": [..], "answer": 0-3 | "A"-"D", "subject"?}
//              query "<question>\nA. <c0>\nB. <c1>...\nAnswer:", choices " A", " B", ...
//   arc        {"question", "choices": {"text": [..], "label": [..]}, "answerKey": label}
//              query "Question: <question>\nAnswer:", choices " <text>"
//   hellaswag  {"ctx" | "ctx_a" + "ctx_b", "activity_label"?, "endings": [..], "label": 0-3 | "0"}
//              query "<activity_label>: <ctx_a> <Ctx_b>" (lm-eval's preprocess), choices "
//              <ending>"
// parse_choice_doc throws InvalidArgument naming the file, line and field for missing fields, a
// wrong type, an answer index out of range or an unknown letter / label.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/jsonl_records.h"

namespace vela::eval {

enum class ChoiceFormat { kAuto, kMmlu, kArc, kHellaswag };
ChoiceFormat parse_choice_format(const std::string& name);  // auto | mmlu | arc | hellaswag
const char* choice_format_name(ChoiceFormat f);

struct ChoiceDoc {
  ChoiceFormat format = ChoiceFormat::kAuto;  // the detected layout
  std::string query;                          // the question as prompted (no few-shot, no answer)
  std::vector<std::string> choices;           // the answer texts as scored (without the " ")
  int32_t gold = 0;                           // index into choices
  std::string description;                    // a task preamble (MMLU: "The following are ...")
  std::string subject;                        // MMLU subject (for per-subject results), or ""
  int64_t line = 0;
};

// The layout of a record by its fields: "endings" -> hellaswag; "choices" an object -> arc; a
// list -> mmlu. Throws naming the record when none fits.
ChoiceFormat detect_choice_format(const std::string& path, const JsonlRecord& rec);
ChoiceDoc parse_choice_doc(const std::string& path, const JsonlRecord& rec, ChoiceFormat format);

// lm-evaluation-harness's HellaSwag text cleanup: strip, " [title]" -> ". ", drop "[...]", "  " ->
// " ".
std::string hellaswag_preprocess(const std::string& text);

}  // namespace vela::eval
