// Reading evaluation data: JSONL records with their line numbers, and field accessors whose errors
// name the file, the line (the record) and the field, e.g.
//   "data.jsonl:7: field 'answer': 5 is out of range for 4 choices".
// All errors are InvalidArgument (IoError when the file cannot be read). Plain functions, no state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"

namespace vela::eval {

struct JsonlRecord {
  json value;        // a JSON object
  int64_t line = 0;  // 1-based line in the file
};

// Every non-blank line of `path` as a JSON object, at most `limit` of them (< 0: all). Throws when
// the file cannot be opened, a line is not valid JSON or not an object, or there is no record.
// `where` ("field=value", empty: every record) keeps only the records whose string field equals
// value (the limit counts kept records).
std::vector<JsonlRecord> read_jsonl(const std::string& path, int64_t limit = -1,
                                    const std::string& where = "");

// The whole file as text (IoError when unreadable, InvalidArgument when empty).
std::string read_text_file(const std::string& path);

// "path:line: field 'name': " — the prefix of every record error.
std::string where(const std::string& path, const JsonlRecord& rec, const std::string& field = "");
[[noreturn]] void record_error(const std::string& path, const JsonlRecord& rec,
                               const std::string& field, const std::string& message);

// The field, which must exist (and not be null).
const json& require_field(const std::string& path, const JsonlRecord& rec, const std::string& name);
// A string field (throws naming the field when missing or of another type).
std::string require_string(const std::string& path, const JsonlRecord& rec,
                           const std::string& name);
// A list of strings; at least `min_size` entries.
std::vector<std::string> require_string_list(const std::string& path, const JsonlRecord& rec,
                                             const json& value, const std::string& name,
                                             size_t min_size);

}  // namespace vela::eval
