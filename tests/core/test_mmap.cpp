// MappedFile and atomic writes: contents, replacement, no leftover temp files, and errors that
// name the file.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "core/error.h"
#include "core/mmap_file.h"
#include "test_util.h"

namespace vela {
namespace {

using test::read_bytes;
using test::TempDir;
using test::write_bytes;

TEST(Mmap, WriteFileAtomicCreatesAndReplaces) {
  TempDir dir;
  std::string path = dir.file("data.bin");
  std::string first = "hello\0world", second(100000, 'x');
  first.push_back('\0');
  write_file_atomic(path, first.data(), first.size());
  EXPECT_EQ(read_bytes(path), first);
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"data.bin"});

  std::shared_ptr<MappedFile> old_map = MappedFile::open(path);
  write_file_atomic(path, second.data(), second.size());
  EXPECT_EQ(read_bytes(path), second);
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"data.bin"});
  // A mapping of the replaced file keeps seeing the old bytes (rename, not rewrite in place).
  EXPECT_EQ(std::string(old_map->data(), old_map->size()), first);

  write_file_atomic(path, nullptr, 0);
  EXPECT_EQ(read_bytes(path), "");
}

TEST(Mmap, MapContents) {
  TempDir dir;
  std::string path = dir.file("m.bin");
  std::string bytes;
  for (int i = 0; i < 5000; ++i) bytes.push_back(static_cast<char>(i * 7));
  write_bytes(path, bytes);
  std::shared_ptr<MappedFile> f = MappedFile::open(path);
  EXPECT_EQ(f->size(), bytes.size());
  EXPECT_EQ(f->path(), path);
  EXPECT_EQ(std::memcmp(f->data(), bytes.data(), bytes.size()), 0);
}

TEST(Mmap, EmptyFileMapsToSizeZero) {
  TempDir dir;
  std::string path = dir.file("empty.bin");
  write_bytes(path, "");
  std::shared_ptr<MappedFile> f = MappedFile::open(path);
  EXPECT_EQ(f->size(), 0u);
}

TEST(Mmap, MissingFileIsIoErrorNamingIt) {
  TempDir dir;
  std::string path = dir.file("does_not_exist.bin");
  EXPECT_THROW_WITH((void)MappedFile::open(path), IoError, path);
  EXPECT_THROW_WITH((void)MappedFile::open(dir.path().string()), IoError, dir.path().string());
}

TEST(Mmap, WriteIntoMissingDirectoryFails) {
  TempDir dir;
  std::string path = dir.file("nope/out.bin");
  EXPECT_THROW_WITH(write_file_atomic(path, "x", 1), IoError, path);
  EXPECT_TRUE(dir.listing().empty());
}

TEST(Mmap, StreamingWriter) {
  TempDir dir;
  std::string path = dir.file("s.bin");
  write_bytes(path, "old");
  {
    AtomicFileWriter w(path);
    w.write("abc", 3);
    w.write("", 0);
    w.write("defg", 4);
    EXPECT_EQ(w.n_bytes_written(), 7u);
    EXPECT_EQ(read_bytes(path), "old");   // nothing visible before commit
    EXPECT_EQ(dir.listing().size(), 2u);  // the target and one temp file
    w.commit();
    EXPECT_THROW(w.write("x", 1), IoError);
  }
  EXPECT_EQ(read_bytes(path), "abcdefg");
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"s.bin"});

  // Abandoned without commit (an exception midway): the old file stays, the temp file goes.
  try {
    AtomicFileWriter w(path);
    w.write("partial", 7);
    throw std::runtime_error("interrupted");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(read_bytes(path), "abcdefg");
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"s.bin"});
}

}  // namespace
}  // namespace vela
