// DType names and sizes.
#include "core/dtype.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace vela {

size_t dtype_size(DType dt) {
  switch (dt) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kU8: return 1;
  }
  VELA_ASSERT(false, "bad dtype");
}

const char* dtype_name(DType dt) {
  switch (dt) {
    case DType::kF32: return "f32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU8: return "u8";
  }
  return "?";
}

DType parse_dtype(const std::string& s) {
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
  if (l == "f32" || l == "float32" || l == "float") return DType::kF32;
  if (l == "bf16" || l == "bfloat16") return DType::kBF16;
  if (l == "f16" || l == "float16" || l == "half") return DType::kF16;
  if (l == "i32" || l == "int32") return DType::kI32;
  if (l == "i64" || l == "int64") return DType::kI64;
  if (l == "u8" || l == "uint8") return DType::kU8;
  VELA_THROW(InvalidArgument, "unknown dtype '", s, "' (expected f32, bf16, f16, i32, i64 or u8)");
}

}  // namespace vela
