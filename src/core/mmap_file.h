// MappedFile: a read-only memory map of a whole file. Tensors borrowed from it hold a shared_ptr
// to it, so the mapping lives as long as any view into it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace vela {

class MappedFile {
 public:
  // Maps `path` read-only; throws IoError naming the file when it cannot be opened or mapped.
  static std::shared_ptr<MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const { return static_cast<const char*>(data_); }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  void* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Writes `bytes` to `path` atomically: a temp file in the same directory, fsync, rename, fsync of
// the directory. A crash leaves either the old file or the new one, never a partial one.
void write_file_atomic(const std::string& path, const void* bytes, size_t n_bytes);

// The streaming form of write_file_atomic, for files too large to build in memory: the constructor
// creates a temp file beside `path`, write() appends to it, commit() fsyncs it, renames it over
// `path` and fsyncs the directory. Destroyed without a successful commit() (an exception midway),
// it removes the temp file and leaves `path` untouched. All failures throw IoError naming the file.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::string& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* bytes, size_t n_bytes);
  void commit();
  size_t n_bytes_written() const { return n_bytes_written_; }

 private:
  std::string path_;
  std::string tmp_path_;
  int fd_ = -1;
  size_t n_bytes_written_ = 0;
  bool committed_ = false;

  void abort();  // closes and removes the temp file
};

}  // namespace vela
