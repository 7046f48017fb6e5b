// MappedFile and atomic file writing (POSIX).
#include "core/mmap_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace vela {

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  VELA_CHECK_T(IoError, fd >= 0, "cannot open '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    VELA_THROW(IoError, "cannot stat '", path, "': ", std::strerror(e));
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    ::close(fd);
    VELA_CHECK_T(IoError, p != MAP_FAILED, "cannot mmap '", path, "': ", std::strerror(e));
    f->data_ = p;
  } else {
    ::close(fd);
  }
  return f;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) munmap(data_, size_);
}

namespace {

// A temp name beside the target, unique per process and per call (pid + a counter), so concurrent
// writers of the same file never share a temp file.
std::string temp_path_for(const std::filesystem::path& target) {
  static std::atomic<uint64_t> counter{0};
  std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : ".";
  std::string name(".");
  name.append(target.filename().string()).append(".tmp.").append(std::to_string(getpid()));
  name.append(".").append(std::to_string(counter.fetch_add(1)));
  return (dir / name).string();
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(const std::string& path) : path_(path) {
  // O_EXCL so two writers never share a temp file; a name left by a dead process (same pid in
  // another PID namespace, or reused) just moves us on to the next counter value.
  for (int attempt = 0; attempt < 64; ++attempt) {
    tmp_path_ = temp_path_for(std::filesystem::path(path));
    fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ >= 0 || errno != EEXIST) break;
  }
  VELA_CHECK_T(IoError, fd_ >= 0, "cannot write '", path, "': creating temp file '", tmp_path_,
               "' failed: ", std::strerror(errno));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_) abort();
}

void AtomicFileWriter::abort() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
    ::unlink(tmp_path_.c_str());
  }
}

void AtomicFileWriter::write(const void* bytes, size_t n_bytes) {
  VELA_CHECK_T(IoError, fd_ >= 0 && !committed_, "write to '", path_, "' after commit or failure");
  const char* p = static_cast<const char*>(bytes);
  size_t left = n_bytes;
  while (left > 0) {
    ssize_t w = ::write(fd_, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = w < 0 ? errno : EIO;
      abort();
      VELA_THROW(IoError, "cannot write '", path_, "': write to temp file '", tmp_path_,
                 "' failed: ", std::strerror(e));
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  n_bytes_written_ += n_bytes;
}

void AtomicFileWriter::commit() {
  VELA_CHECK_T(IoError, fd_ >= 0 && !committed_, "commit of '", path_, "' twice or after failure");
  int fd = fd_;
  fd_ = -1;
  int rc = ::fsync(fd);
  int e = errno;
  if (::close(fd) != 0 && rc == 0) {
    rc = -1;
    e = errno;
  }
  if (rc != 0) {
    ::unlink(tmp_path_.c_str());
    VELA_THROW(IoError, "cannot write '", path_, "': fsync/close of '", tmp_path_,
               "' failed: ", std::strerror(e));
  }
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    e = errno;
    ::unlink(tmp_path_.c_str());
    VELA_THROW(IoError, "cannot write '", path_, "': rename from '", tmp_path_,
               "' failed: ", std::strerror(e));
  }
  committed_ = true;
  std::filesystem::path target(path_);
  std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : ".";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void write_file_atomic(const std::string& path, const void* bytes, size_t n_bytes) {
  AtomicFileWriter w(path);
  w.write(bytes, n_bytes);
  w.commit();
}

}  // namespace vela
