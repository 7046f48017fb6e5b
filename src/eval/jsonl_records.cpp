// JSONL records with line numbers and field errors that name the record.
#include "eval/jsonl_records.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace vela::eval {

std::vector<JsonlRecord> read_jsonl(const std::string& path, int64_t limit,
                                    const std::string& where) {
  std::string where_field, where_value;
  if (!where.empty()) {
    size_t eq = where.find('=');
    VELA_CHECK(eq != std::string::npos && eq > 0, "--where must be FIELD=VALUE, got '", where, "'");
    where_field = where.substr(0, eq);
    where_value = where.substr(eq + 1);
  }
  std::ifstream f(path, std::ios::binary);
  VELA_CHECK_T(IoError, f.good(), "cannot open data file '", path, "'");
  std::vector<JsonlRecord> out;
  std::string line;
  int64_t line_no = 0;
  while ((limit < 0 || static_cast<int64_t>(out.size()) < limit) && std::getline(f, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    JsonlRecord rec;
    rec.line = line_no;
    try {
      rec.value = json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      VELA_THROW(InvalidArgument, path, ":", line_no, ": invalid JSON (", e.what(), ")");
    }
    VELA_CHECK(rec.value.is_object(), path, ":", line_no, ": each line must be a JSON object, got ",
               rec.value.type_name());
    if (!where_field.empty()) {
      const auto it = rec.value.find(where_field);
      if (it == rec.value.end() || !it->is_string() || it->get<std::string>() != where_value)
        continue;
    }
    out.push_back(std::move(rec));
  }
  VELA_CHECK(
      !out.empty(), path,
      where.empty() ? ": no records (the file is empty)" : ": no record matches --where " + where);
  return out;
}

std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  VELA_CHECK_T(IoError, f.good(), "cannot open data file '", path, "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  VELA_CHECK(!text.empty(), path, ": the file is empty");
  return text;
}

std::string where(const std::string& path, const JsonlRecord& rec, const std::string& field) {
  std::string s = path + ":" + std::to_string(rec.line) + ": ";
  if (!field.empty()) s += "field '" + field + "': ";
  return s;
}

void record_error(const std::string& path, const JsonlRecord& rec, const std::string& field,
                  const std::string& message) {
  VELA_THROW(InvalidArgument, where(path, rec, field), message);
}

const json& require_field(const std::string& path, const JsonlRecord& rec,
                          const std::string& name) {
  auto it = rec.value.find(name);
  if (it == rec.value.end() || it->is_null()) {
    std::string keys;
    for (const auto& [k, v] : rec.value.items()) keys += (keys.empty() ? "" : ", ") + k;
    record_error(path, rec, name, "missing (the record has: " + keys + ")");
  }
  return *it;
}

std::string require_string(const std::string& path, const JsonlRecord& rec,
                           const std::string& name) {
  const json& v = require_field(path, rec, name);
  if (!v.is_string())
    record_error(path, rec, name, std::string("expected a string, got ") + v.type_name());
  return v.get<std::string>();
}

std::vector<std::string> require_string_list(const std::string& path, const JsonlRecord& rec,
                                             const json& value, const std::string& name,
                                             size_t min_size) {
  if (!value.is_array())
    record_error(path, rec, name,
                 std::string("expected a list of strings, got ") + value.type_name());
  std::vector<std::string> out;
  for (size_t i = 0; i < value.size(); ++i) {
    if (!value[i].is_string())
      record_error(path, rec, name,
                   "entry " + std::to_string(i) + " is " + value[i].type_name() + ", not a string");
    out.push_back(value[i].get<std::string>());
  }
  if (out.size() < min_size)
    record_error(path, rec, name,
                 "needs at least " + std::to_string(min_size) + " entries, got " +
                     std::to_string(out.size()));
  return out;
}

}  // namespace vela::eval
