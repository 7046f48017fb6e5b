// safetensors reading (mmap, zero-copy views, strict header validation) and atomic streaming write.
// Every structural problem is an IoError "safetensors '<file>': <problem>"; a dtype vela cannot
// hold is Unsupported naming the tensor and the dtype.
#include "core/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>

#include "core/error.h"

namespace vela {
namespace {

namespace fs = std::filesystem;

constexpr const char* kMetadataKey = "__metadata__";

std::optional<DType> dtype_from_st(const std::string& s) {
  if (s == "F32") return DType::kF32;
  if (s == "BF16") return DType::kBF16;
  if (s == "F16") return DType::kF16;
  if (s == "I32") return DType::kI32;
  if (s == "I64") return DType::kI64;
  if (s == "U8") return DType::kU8;
  return std::nullopt;
}

const char* dtype_to_st(DType dt) {
  switch (dt) {
    case DType::kF32:
      return "F32";
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
    case DType::kI32:
      return "I32";
    case DType::kI64:
      return "I64";
    case DType::kU8:
      return "U8";
  }
  VELA_ASSERT(false, "bad dtype");
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

template <typename... Args>
[[noreturn]] void file_error(const std::string& path, Args&&... args) {
  VELA_THROW(IoError, "safetensors '", path, "': ", std::forward<Args>(args)...);
}

// A JSON number that is a non-negative integer fitting in uint64 (safetensors offsets and extents).
bool as_u64(const json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(v.get<int64_t>());
    return true;
  }
  return false;
}

// Parses a JSON document from [first, last), naming `path` on failure. A key repeated within one
// object (two tensors with one name) is an error, not "last one wins".
json parse_json(const std::string& path, const char* first, const char* last, const char* what) {
  std::string duplicate;
  std::vector<std::set<std::string>> keys;  // one set per open object
  json::parser_callback_t check_dups = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (event == json::parse_event_t::key && !keys.empty() && parsed.is_string()) {
      if (!keys.back().insert(parsed.get<std::string>()).second && duplicate.empty())
        duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json j;
  try {
    j = json::parse(first, last, check_dups);
  } catch (const json::exception& e) {
    file_error(path, what, " is not valid JSON (", e.what(), ")");
  }
  if (!j.is_object()) file_error(path, what, " is not a JSON object");
  if (!duplicate.empty()) file_error(path, what, " lists '", duplicate, "' more than once");
  return j;
}

// Returns numel * elem_bytes, or nullopt on overflow.
std::optional<uint64_t> byte_size(const Shape& shape, size_t elem_bytes) {
  uint64_t n = elem_bytes;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return std::nullopt;
  }
  return n;
}

struct IndexShard {
  std::string path;
  std::vector<std::string> names;  // tensors the index maps to this shard
};

// Reads a `*.index.json`: {"metadata": {...}, "weight_map": {name: shard_file}}. Returns the shards
// in order of first mention, each listed once, with shard paths relative to the index's directory.
std::vector<IndexShard> read_index(const std::string& index_path) {
  std::shared_ptr<MappedFile> f = MappedFile::open(index_path);
  json j = parse_json(index_path, f->data(), f->data() + f->size(), "index");
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object())
    file_error(index_path, "index has no \"weight_map\" object");
  if (j.contains("metadata") && !j["metadata"].is_object() && !j["metadata"].is_null())
    file_error(index_path, "index \"metadata\" is not an object");
  fs::path dir = fs::path(index_path).parent_path();
  std::vector<IndexShard> shards;
  std::map<std::string, size_t> shard_idx;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it->is_string())
      file_error(index_path, "weight_map entry '", it.key(), "' is not a file name string");
    std::string file = it->get<std::string>();
    if (file.empty()) file_error(index_path, "weight_map entry '", it.key(), "' names no file");
    auto [pos, inserted] = shard_idx.emplace(file, shards.size());
    if (inserted) shards.push_back({(dir / file).string(), {}});
    shards[pos->second].names.push_back(it.key());
  }
  if (shards.empty()) file_error(index_path, "index \"weight_map\" is empty");
  return shards;
}

}  // namespace

SafetensorsReader SafetensorsReader::open(const std::string& path) {
  SafetensorsReader r;
  std::error_code ec;
  std::string target = path;
  if (fs::is_directory(path, ec)) {
    fs::path single = fs::path(path) / "model.safetensors";
    fs::path index = fs::path(path) / "model.safetensors.index.json";
    if (fs::exists(single, ec)) {
      target = single.string();
    } else if (fs::exists(index, ec)) {
      target = index.string();
    } else {
      VELA_THROW(IoError, "safetensors directory '", path,
                 "' holds neither model.safetensors nor model.safetensors.index.json");
    }
  }
  if (ends_with(target, ".json")) {
    std::vector<IndexShard> shards = read_index(target);
    for (const IndexShard& s : shards) r.add_file(s.path, &s.names);
  } else {
    r.add_file(target, nullptr);
  }
  return r;
}

void SafetensorsReader::add_file(const std::string& path,
                                 const std::vector<std::string>* expected_names) {
  std::shared_ptr<MappedFile> f = MappedFile::open(path);
  const size_t file_bytes = f->size();
  if (file_bytes < 8)
    file_error(path, "file is ", file_bytes, " bytes, shorter than the 8-byte header length");
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i)
    header_bytes = (header_bytes << 8) | static_cast<unsigned char>(f->data()[i]);
  if (header_bytes > file_bytes - 8)
    file_error(path, "header length ", header_bytes, " runs past the end of the file (", file_bytes,
               " bytes)");
  const size_t data_start = 8 + static_cast<size_t>(header_bytes);
  const size_t data_bytes = file_bytes - data_start;
  json header = parse_json(path, f->data() + 8, f->data() + data_start, "header");

  const int file_idx = static_cast<int>(files_.size());
  std::vector<std::pair<std::string, SafetensorsEntry>> found;
  std::map<std::string, std::string> metadata;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == kMetadataKey) {
      if (v.is_null()) continue;
      if (!v.is_object()) file_error(path, "\"__metadata__\" is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m->is_string())
          file_error(path, "\"__metadata__\" value of '", m.key(), "' is not a string");
        metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    if (!v.is_object()) file_error(path, "entry of tensor '", name, "' is not an object");
    auto dt = v.find("dtype");
    auto sh = v.find("shape");
    auto off = v.find("data_offsets");
    if (dt == v.end()) file_error(path, "tensor '", name, "' has no \"dtype\"");
    if (sh == v.end()) file_error(path, "tensor '", name, "' has no \"shape\"");
    if (off == v.end()) file_error(path, "tensor '", name, "' has no \"data_offsets\"");
    if (!dt->is_string()) file_error(path, "tensor '", name, "' has a non-string \"dtype\"");
    if (!sh->is_array())
      file_error(path, "tensor '", name, "' has a \"shape\" that is not an array");
    if (!off->is_array() || off->size() != 2)
      file_error(path, "tensor '", name, "' has \"data_offsets\" that is not a [begin, end] array");

    SafetensorsEntry e;
    std::string dt_name = dt->get<std::string>();
    std::optional<DType> dtype = dtype_from_st(dt_name);
    if (!dtype)
      VELA_THROW(Unsupported, "safetensors '", path, "': tensor '", name, "' has dtype ", dt_name,
                 ", which vela does not support (F32, BF16, F16, I32, I64, U8)");
    e.dtype = *dtype;
    if (static_cast<int>(sh->size()) > Shape::kMaxDims)
      VELA_THROW(Unsupported, "safetensors '", path, "': tensor '", name, "' has rank ", sh->size(),
                 ", more than vela's maximum of ", Shape::kMaxDims);
    for (const json& d : *sh) {
      if (!d.is_number_integer())
        file_error(path, "tensor '", name, "' has a non-integer extent in \"shape\" ", sh->dump());
      if (d.is_number_unsigned() ? d.get<uint64_t>() > uint64_t{std::numeric_limits<int64_t>::max()}
                                 : d.get<int64_t>() < 0)
        file_error(path, "tensor '", name, "' has a negative or too large extent in \"shape\" ",
                   sh->dump());
      e.shape.push_back(d.get<int64_t>());
    }
    uint64_t begin = 0, end = 0;
    if (!as_u64((*off)[0], &begin) || !as_u64((*off)[1], &end))
      file_error(path, "tensor '", name, "' has \"data_offsets\" ", off->dump(),
                 " that are not non-negative integers");
    if (begin > end)
      file_error(path, "tensor '", name, "' has data_offsets begin ", begin, " > end ", end);
    if (end > data_bytes)
      file_error(path, "tensor '", name, "' has data_offsets end ", end,
                 " past the end of the data region (", data_bytes, " bytes)");
    std::optional<uint64_t> need = byte_size(e.shape, dtype_size(e.dtype));
    if (!need || *need != end - begin)
      file_error(path, "tensor '", name, "' holds ", end - begin, " bytes but its shape ",
                 e.shape.str(), " of ", dt_name, " needs ",
                 need ? std::to_string(*need) : std::string("more than 2^64"), " (size mismatch)");
    e.begin = static_cast<size_t>(begin);
    e.end = static_cast<size_t>(end);
    e.file_idx = file_idx;
    found.emplace_back(name, e);
  }

  // No two tensors may share bytes (empty tensors occupy none).
  std::vector<const std::pair<std::string, SafetensorsEntry>*> by_begin;
  for (const auto& p : found)
    if (p.second.end > p.second.begin) by_begin.push_back(&p);
  std::sort(by_begin.begin(), by_begin.end(),
            [](auto* a, auto* b) { return a->second.begin < b->second.begin; });
  for (size_t i = 1; i < by_begin.size(); ++i) {
    const auto& prev = *by_begin[i - 1];
    const auto& cur = *by_begin[i];
    if (cur.second.begin < prev.second.end)
      file_error(path, "tensors '", prev.first, "' [", prev.second.begin, ", ", prev.second.end,
                 ") and '", cur.first, "' [", cur.second.begin, ", ", cur.second.end, ") overlap");
  }

  // A shard must hold exactly the tensors its index maps to it.
  if (expected_names != nullptr) {
    std::set<std::string> expected(expected_names->begin(), expected_names->end());
    for (const auto& p : found)
      if (!expected.count(p.first))
        file_error(path, "tensor '", p.first,
                   "' is in this shard but the index maps it to another file (or not at all)");
    std::set<std::string> present;
    for (const auto& p : found) present.insert(p.first);
    for (const std::string& n : *expected_names)
      if (!present.count(n))
        file_error(path, "tensor '", n,
                   "' is listed in the index for this shard but missing from it");
  }
  for (const auto& p : found) {
    auto prev = entries_.find(p.first);
    if (prev != entries_.end())
      file_error(path, "tensor '", p.first, "' is also in '", paths_[prev->second.file_idx],
                 "' (duplicate name across shards)");
  }

  for (auto& p : found) entries_.emplace(std::move(p.first), p.second);
  if (files_.empty()) metadata_ = std::move(metadata);
  files_.push_back(std::move(f));
  data_starts_.push_back(data_start);
  paths_.push_back(path);
}

std::vector<std::string> SafetensorsReader::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& kv : entries_) out.push_back(kv.first);
  return out;
}

const SafetensorsEntry& SafetensorsReader::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    std::string where = paths_.empty() ? std::string("<no file>") : paths_[0];
    if (paths_.size() > 1) where += " (+" + std::to_string(paths_.size() - 1) + " shards)";
    VELA_THROW(InvalidArgument, "no tensor '", name, "' in safetensors checkpoint ", where);
  }
  return it->second;
}

Tensor SafetensorsReader::get(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  const std::shared_ptr<MappedFile>& f = files_[e.file_idx];
  // The mapping is read-only: writing through the returned tensor faults (clone() it first).
  char* p = const_cast<char*>(f->data()) + data_starts_[e.file_idx] + e.begin;
  return Tensor::from_blob(p, e.shape, e.dtype, Device::cpu(), f);
}

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Validate everything before touching the disk, so a bad call leaves any existing file alone.
  std::set<std::string> seen;
  for (const auto& [name, t] : tensors) {
    VELA_CHECK(name != kMetadataKey, "save_safetensors: '", name, "' is a reserved name (", path,
               ")");
    VELA_CHECK(seen.insert(name).second, "save_safetensors: duplicate tensor name '", name, "' (",
               path, ")");
    VELA_CHECK(t.defined(), "save_safetensors: tensor '", name, "' is undefined (", path, ")");
  }

  json header = json::object();
  if (!metadata.empty()) {
    json m = json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header[kMetadataKey] = std::move(m);
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    json shape = json::array();
    for (int64_t d : t.shape()) shape.push_back(d);
    uint64_t end = offset + t.nbytes();
    header[name] = {{"dtype", dtype_to_st(t.dtype())},
                    {"shape", std::move(shape)},
                    {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {  // e.g. a name or metadata value that is not UTF-8
    VELA_THROW(InvalidArgument, "save_safetensors: cannot encode the header of '", path,
               "' (tensor names and metadata must be UTF-8): ", e.what());
  }
  // Pad with spaces so the data region starts 8-byte aligned (as the reference writer does).
  text.append((8 - text.size() % 8) % 8, ' ');
  unsigned char len[8];
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));

  AtomicFileWriter w(path);
  w.write(len, sizeof(len));
  w.write(text.data(), text.size());
  // One tensor at a time: peak extra memory is one host copy of the largest non-host tensor.
  for (const auto& [name, t] : tensors) {
    if (t.numel() == 0) continue;
    Tensor host = t.to(Device::cpu()).contiguous();
    w.write(host.data_ptr(), host.nbytes());
  }
  VELA_ASSERT(w.n_bytes_written() == 8 + text.size() + offset, "safetensors size mismatch");
  w.commit();
}

}  // namespace vela
