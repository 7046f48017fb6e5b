// safetensors read (memory-mapped, zero-copy) and write (atomic).
//
// Format: u64 little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets:
// [begin, end]}, "__metadata__": {str: str}}, then the data region. Offsets are relative to the
// data region. Supported dtypes: F32, BF16, F16, I32, I64, U8; anything else is an Unsupported
// error naming the tensor and the dtype. Every structural problem (truncated file, header length
// past the end, invalid JSON, offsets out of range, overlapping or size-mismatched, bad shape) is
// an IoError naming the file and the problem.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"
#include "core/mmap_file.h"
#include "core/tensor.h"

namespace vela {

struct SafetensorsEntry {
  DType dtype;
  Shape shape;
  size_t begin = 0;  // byte offsets into the file's data region
  size_t end = 0;
  int file_idx = 0;  // which shard
};

// Reads one file, or a sharded checkpoint through its `*.index.json` ({"weight_map": {name:
// file}}), or a directory holding `model.safetensors` or `model.safetensors.index.json`.
// Thread-safe for concurrent reads after open().
class SafetensorsReader {
 public:
  static SafetensorsReader open(const std::string& path);

  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  const SafetensorsEntry& entry(const std::string& name) const;
  // A CPU tensor viewing the mapped bytes (no copy); it keeps the mapping alive. The mapping is
  // read-only: clone() before writing into it. Unknown name: InvalidArgument.
  Tensor get(const std::string& name) const;
  // The "__metadata__" map of the first file (empty when absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::vector<std::string>& files() const { return paths_; }

 private:
  std::vector<std::shared_ptr<MappedFile>> files_;
  std::vector<size_t> data_starts_;  // byte offset of each file's data region
  std::vector<std::string> paths_;
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;

  void add_file(const std::string& path, const std::vector<std::string>* expected_names);
};

// Writes `tensors` (any device, any strides; copied to host) to `path` atomically (temp file +
// fsync + rename). Names must be unique. Tensors are stored in the given order, 8-byte aligned.
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace vela
