// vela::Error hierarchy and the checking macros.
//
// Bad input from a user or a file throws a vela::Error subclass through VELA_CHECK*, with a message
// that says what was wrong. Internal invariants use VELA_ASSERT (a bug, not bad input). Capacity
// outcomes (no free KV pages, queue full) are return values, never exceptions.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace vela {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};
class InvalidArgument : public Error { using Error::Error; };
class OutOfMemory : public Error { using Error::Error; };
class Unsupported : public Error { using Error::Error; };
class IoError : public Error { using Error::Error; };
class CudaError : public Error { using Error::Error; };
class InternalError : public Error { using Error::Error; };

namespace detail {
template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
template <typename E, typename... Args>
[[noreturn]] void throw_at(const char* file, int line, Args&&... args) {
  std::string msg = concat(std::forward<Args>(args)...);
  throw E(concat(msg, " [", file, ":", line, "]"));
}
}  // namespace detail

}  // namespace vela

// VELA_CHECK(cond, "message parts", ...) throws InvalidArgument when cond is false.
#define VELA_CHECK(cond, ...)                                                                  \
  do {                                                                                         \
    if (!(cond)) [[unlikely]]                                                                  \
      ::vela::detail::throw_at<::vela::InvalidArgument>(__FILE__, __LINE__, __VA_ARGS__);      \
  } while (0)

// VELA_CHECK_T(ErrorType, cond, ...) throws the given vela::Error subclass.
#define VELA_CHECK_T(ErrorType, cond, ...)                                                     \
  do {                                                                                         \
    if (!(cond)) [[unlikely]]                                                                  \
      ::vela::detail::throw_at<::vela::ErrorType>(__FILE__, __LINE__, __VA_ARGS__);            \
  } while (0)

#define VELA_THROW(ErrorType, ...) \
  ::vela::detail::throw_at<::vela::ErrorType>(__FILE__, __LINE__, __VA_ARGS__)

// VELA_ASSERT: an internal invariant. Always on (cheap); a failure is a bug in vela.
#define VELA_ASSERT(cond, ...)                                                                 \
  do {                                                                                         \
    if (!(cond)) [[unlikely]]                                                                  \
      ::vela::detail::throw_at<::vela::InternalError>(__FILE__, __LINE__,                      \
                                                      "internal assertion failed: " #cond " ", \
                                                      ##__VA_ARGS__);                          \
  } while (0)
