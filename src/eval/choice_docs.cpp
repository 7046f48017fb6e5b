// MMLU / ARC / HellaSwag records -> ChoiceDoc.
#include "eval/choice_docs.h"

#include "core/error.h"

namespace vela::eval {
namespace {

std::string strip(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
  return s;
}

// Python's str.capitalize on ASCII: first character upper, the rest lower.
std::string capitalize(std::string s) {
  for (size_t i = 0; i < s.size(); ++i) {
    char& c = s[i];
    if (i == 0 && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (i > 0 && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

// An answer given as an index (number or digit string) or a letter (A = 0) into n choices.
int32_t answer_index(const std::string& path, const JsonlRecord& rec, const std::string& field,
                     size_t n_choices, bool letters_allowed) {
  const json& v = require_field(path, rec, field);
  int64_t idx = -1;
  if (v.is_number_integer()) {
    idx = v.get<int64_t>();
  } else if (v.is_string()) {
    std::string s = strip(v.get<std::string>());
    bool digits = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
    if (digits && s.size() < 10) {
      idx = std::stoll(s);
    } else if (letters_allowed && s.size() == 1 && s[0] >= 'A' && s[0] <= 'Z') {
      idx = s[0] - 'A';
      if (idx >= static_cast<int64_t>(n_choices))
        record_error(path, rec, field,
                     "answer letter '" + s + "' is beyond the " + std::to_string(n_choices) +
                         " choices (A-" + std::string(1, static_cast<char>('A' + n_choices - 1)) +
                         ")");
    } else {
      record_error(path, rec, field,
                   "unknown answer '" + s + "' (expected an index" +
                       (letters_allowed ? std::string(" or a letter A-") +
                                              static_cast<char>('A' + n_choices - 1)
                                        : std::string()) +
                       ")");
    }
  } else {
    record_error(path, rec, field,
                 std::string("expected an index or a letter, got ") + v.type_name());
  }
  if (idx < 0 || idx >= static_cast<int64_t>(n_choices))
    record_error(path, rec, field,
                 "answer index " + std::to_string(idx) + " is out of range for " +
                     std::to_string(n_choices) + " choices");
  return static_cast<int32_t>(idx);
}

ChoiceDoc parse_mmlu(const std::string& path, const JsonlRecord& rec) {
  ChoiceDoc d;
  std::string question = require_string(path, rec, "question");
  std::vector<std::string> choices =
      require_string_list(path, rec, require_field(path, rec, "choices"), "choices", 2);
  if (choices.size() > 26) record_error(path, rec, "choices", "more than 26 choices");
  d.query = strip(question) + "\n";
  for (size_t i = 0; i < choices.size(); ++i) {
    d.query += std::string(1, static_cast<char>('A' + i)) + ". " + choices[i] + "\n";
    d.choices.push_back(std::string(1, static_cast<char>('A' + i)));
  }
  d.query += "Answer:";
  d.gold = answer_index(path, rec, "answer", choices.size(), true);
  auto it = rec.value.find("subject");
  if (it != rec.value.end() && it->is_string() && !it->get<std::string>().empty()) {
    d.subject = it->get<std::string>();
    d.description = "The following are multiple choice questions (with answers) about " +
                    replace_all(d.subject, "_", " ") + ".\n\n";
  }
  return d;
}

ChoiceDoc parse_arc(const std::string& path, const JsonlRecord& rec) {
  ChoiceDoc d;
  std::string question = require_string(path, rec, "question");
  const json& choices = require_field(path, rec, "choices");
  if (!choices.is_object())
    record_error(
        path, rec, "choices",
        std::string("expected {\"text\": [...], \"label\": [...]}, got ") + choices.type_name());
  if (!choices.contains("text")) record_error(path, rec, "choices.text", "missing");
  if (!choices.contains("label")) record_error(path, rec, "choices.label", "missing");
  d.choices = require_string_list(path, rec, choices["text"], "choices.text", 2);
  std::vector<std::string> labels =
      require_string_list(path, rec, choices["label"], "choices.label", 2);
  if (labels.size() != d.choices.size())
    record_error(path, rec, "choices",
                 std::to_string(d.choices.size()) + " texts but " + std::to_string(labels.size()) +
                     " labels");
  const json& key = require_field(path, rec, "answerKey");
  std::string k = key.is_string() ? strip(key.get<std::string>()) : key.dump();
  d.gold = -1;
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] == k) d.gold = static_cast<int32_t>(i);
  if (d.gold < 0) {
    std::string all;
    for (const auto& l : labels) all += (all.empty() ? "" : ", ") + l;
    record_error(path, rec, "answerKey", "'" + k + "' is not one of the labels [" + all + "]");
  }
  d.query = "Question: " + question + "\nAnswer:";
  return d;
}

ChoiceDoc parse_hellaswag(const std::string& path, const JsonlRecord& rec) {
  ChoiceDoc d;
  std::string ctx;
  if (rec.value.contains("ctx_a") || rec.value.contains("ctx_b")) {
    ctx = require_string(path, rec, "ctx_a") + " " + capitalize(require_string(path, rec, "ctx_b"));
  } else {
    ctx = require_string(path, rec, "ctx");
  }
  auto it = rec.value.find("activity_label");
  std::string query = ctx;
  if (it != rec.value.end() && it->is_string()) query = it->get<std::string>() + ": " + ctx;
  d.query = hellaswag_preprocess(query);
  for (const std::string& e :
       require_string_list(path, rec, require_field(path, rec, "endings"), "endings", 2))
    d.choices.push_back(hellaswag_preprocess(e));
  d.gold = answer_index(path, rec, "label", d.choices.size(), false);
  return d;
}

}  // namespace

std::string hellaswag_preprocess(const std::string& text) {
  std::string s = replace_all(strip(text), " [title]", ". ");
  std::string out;  // drop "[...]" (non-greedy, as re.sub("\\[.*?\\]", ""))
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '[') {
      size_t close = s.find(']', i + 1);
      if (close != std::string::npos) {
        i = close;
        continue;
      }
    }
    out += s[i];
  }
  return replace_all(out, "  ", " ");
}

ChoiceFormat parse_choice_format(const std::string& name) {
  if (name == "auto") return ChoiceFormat::kAuto;
  if (name == "mmlu") return ChoiceFormat::kMmlu;
  if (name == "arc") return ChoiceFormat::kArc;
  if (name == "hellaswag") return ChoiceFormat::kHellaswag;
  VELA_THROW(InvalidArgument, "--format must be auto, mmlu, arc or hellaswag, got '", name, "'");
}

const char* choice_format_name(ChoiceFormat f) {
  switch (f) {
    case ChoiceFormat::kMmlu:
      return "mmlu";
    case ChoiceFormat::kArc:
      return "arc";
    case ChoiceFormat::kHellaswag:
      return "hellaswag";
    default:
      return "auto";
  }
}

ChoiceFormat detect_choice_format(const std::string& path, const JsonlRecord& rec) {
  if (rec.value.contains("endings")) return ChoiceFormat::kHellaswag;
  auto it = rec.value.find("choices");
  if (it != rec.value.end() && it->is_object()) return ChoiceFormat::kArc;
  if (it != rec.value.end() && it->is_array()) return ChoiceFormat::kMmlu;
  record_error(path, rec, "",
               "not a known multiple-choice layout: expected \"choices\" (MMLU: a list, ARC: "
               "{text, label}) or \"endings\" (HellaSwag); see docs/eval.md");
}

ChoiceDoc parse_choice_doc(const std::string& path, const JsonlRecord& rec, ChoiceFormat format) {
  if (format == ChoiceFormat::kAuto) format = detect_choice_format(path, rec);
  ChoiceDoc d;
  switch (format) {
    case ChoiceFormat::kMmlu:
      d = parse_mmlu(path, rec);
      break;
    case ChoiceFormat::kArc:
      d = parse_arc(path, rec);
      break;
    default:
      d = parse_hellaswag(path, rec);
      break;
  }
  d.format = format;
  d.line = rec.line;
  return d;
}

}  // namespace vela::eval
