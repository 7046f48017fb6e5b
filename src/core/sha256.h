// SHA-256 (FIPS 180-4): a small streaming implementation for checkpoint manifests, so vela needs no
// crypto dependency. Not constant-time and not meant for secrets; it checks file integrity.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace vela {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n_bytes);
  // Finishes the hash (the object must not be updated afterwards) and returns 32 raw bytes.
  std::array<uint8_t, 32> digest();
  // Finishes the hash and returns 64 lowercase hex characters.
  std::string hex_digest();

 private:
  uint32_t state_[8];
  uint8_t block_[64];
  size_t block_len_ = 0;
  uint64_t total_bytes_ = 0;
  bool finished_ = false;

  void compress(const uint8_t* block);
};

// Hex SHA-256 of a byte string.
std::string sha256_hex(const void* data, size_t n_bytes);
inline std::string sha256_hex(const std::string& s) { return sha256_hex(s.data(), s.size()); }
// Hex SHA-256 of a file's contents (streamed in 1 MiB reads); IoError when it cannot be read.
std::string sha256_file(const std::string& path, uint64_t* n_bytes = nullptr);

}  // namespace vela
