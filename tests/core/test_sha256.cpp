// SHA-256 against the FIPS 180-2 appendix vectors (one block, two blocks, a million 'a'), plus
// streaming in odd-sized pieces and the file helper.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/error.h"
#include "core/sha256.h"
#include "test_util.h"

namespace vela {
namespace {

TEST(Sha256, Fips180Vectors) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, StreamingMatchesOneShot) {
  std::string data;
  for (int i = 0; i < 5000; ++i) data.push_back(static_cast<char>((i * 131) & 0xff));
  std::string want = sha256_hex(data);
  for (size_t piece : {1, 3, 55, 56, 63, 64, 65, 1000}) {
    Sha256 h;
    for (size_t pos = 0; pos < data.size(); pos += piece)
      h.update(data.data() + pos, std::min(piece, data.size() - pos));
    EXPECT_EQ(h.hex_digest(), want) << "piece " << piece;
  }
}

TEST(Sha256, FileHelper) {
  test::TempDir dir;
  std::string path = (dir.path() / "x.bin").string();
  std::string data(3 * 1024 * 1024 + 17, 'q');
  std::ofstream(path, std::ios::binary) << data;
  uint64_t n = 0;
  EXPECT_EQ(sha256_file(path, &n), sha256_hex(data));
  EXPECT_EQ(n, data.size());
  EXPECT_THROW(sha256_file((dir.path() / "missing").string()), IoError);
}

}  // namespace
}  // namespace vela
