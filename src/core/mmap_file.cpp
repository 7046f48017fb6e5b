// MappedFile and atomic file writing (POSIX).
#include "core/mmap_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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

void write_file_atomic(const std::string& path, const void* bytes, size_t n_bytes) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmp_name(".");
  tmp_name.append(target.filename().string()).append(".tmp.").append(std::to_string(getpid()));
  std::string tmp = (dir / tmp_name).string();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  VELA_CHECK_T(IoError, fd >= 0, "cannot create '", tmp, "': ", std::strerror(errno));
  const char* p = static_cast<const char*>(bytes);
  size_t left = n_bytes;
  while (left > 0) {
    ssize_t w = ::write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      VELA_THROW(IoError, "write to '", tmp, "' failed: ", std::strerror(e));
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    VELA_THROW(IoError, "fsync/close of '", tmp, "' failed: ", std::strerror(e));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    VELA_THROW(IoError, "rename '", tmp, "' -> '", path, "' failed: ", std::strerror(e));
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace vela
