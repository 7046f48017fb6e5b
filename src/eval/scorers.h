// Pure string scorers shared by `vela eval generate` and the RL rewards (src/train/rl/): answer
// normalisation, exact match, number / regex answer extraction, ROUGE-L and a JSON validity check.
//
// Everything here is a pure function of its arguments: no state is shared between calls except a
// per-thread cache of compiled regexes, so all functions are thread-safe. Text is treated as bytes;
// only ASCII letters are case-folded and only ASCII punctuation is stripped, so UTF-8 passes
// through unchanged. Only extract_regex throws (InvalidArgument for a pattern that does not
// compile, or a group the pattern does not have).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace vela::scoring {

// SQuAD-style answer normalisation (the `normalize_answer` of the SQuAD v1.1 evaluation script, as
// lm-evaluation-harness and most EM/F1 metrics use it), in this order:
//   1. lowercase (ASCII),
//   2. remove ASCII punctuation (!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~),
//   3. remove the articles "a", "an", "the" as whole words,
//   4. collapse runs of whitespace into one space and trim both ends.
// "The  Cat's hat!" -> "cats hat".
std::string normalize_answer(std::string_view text);

// Whether `pred` equals `ref`. With `normalize` (the default) both go through normalize_answer
// first; without, the strings are compared byte for byte after trimming leading and trailing
// whitespace only.
bool exact_match(std::string_view pred, std::string_view ref, bool normalize = true);

// The canonical form of a decimal number written as in "-3", "1,234", "2.50", "007", ".5":
// thousands separators removed, leading zeros of the integer part and trailing zeros of the
// fraction dropped (with the point when nothing is left after it), "-0" -> "0", ".5" -> "0.5".
// nullopt when `number` is not such a number (it must be the whole string).
std::optional<std::string> canonical_number(std::string_view number);

// The last number in `text`, in canonical form (see canonical_number). A number is an optional
// '-' sign, then digits (with ',' thousands groups only when every group has exactly three digits,
// so "1,234" is one number but "1, 2" is two) and an optional fraction ".digits". A '-' counts as a
// sign only when no digit comes right before it ("5-3" holds 5 and 3; "x = -3" holds -3). A point
// not followed by a digit ends the number ("costs 5." -> "5"). nullopt when there is no number.
std::optional<std::string> extract_last_number(std::string_view text);

// The GSM8K answer: the first number after the last "####" marker (the reference solutions end in
// "#### 72"), else the last number in the text (a model that forgot the marker). Canonical form.
std::optional<std::string> extract_gsm8k_answer(std::string_view text);

// Capture group `group` (0: the whole match) of the FIRST match of the PCRE2 `pattern` in `text`
// (lm-evaluation-harness's regex filter with its default group_select 0); nullopt when the pattern
// does not match or the group did not take part in the match. The pattern is compiled with UTF and
// invalid-UTF tolerance (model output may be cut in the middle of a character). Throws
// InvalidArgument when the pattern does not compile or has fewer than `group` groups.
std::optional<std::string> extract_regex(std::string_view text, const std::string& pattern,
                                         int group = 1);

// ROUGE-L F1 (the `rougeL` of Google's rouge-score without stemming): the longest common
// subsequence of the two token sequences, precision = lcs / n_pred, recall = lcs / n_ref,
// F1 = 2PR / (P + R). Tokens are the maximal runs of ASCII letters/digits and non-ASCII bytes after
// ASCII lowercasing (whitespace and ASCII punctuation separate tokens). 0 when either side has no
// tokens (rouge-score's convention), including when both are empty.
double rouge_l_f1(std::string_view pred, std::string_view ref);

// Whether `text` is one complete JSON value (RFC 8259; surrounding whitespace allowed).
bool is_valid_json(std::string_view text);

}  // namespace vela::scoring
