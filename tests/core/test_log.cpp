// Logging: level names, and that the level gates what reaches stderr (and whether the message
// arguments are evaluated at all).
#include <gtest/gtest.h>

#include "core/log.h"
#include "test_util.h"

namespace vela {
namespace {

// Restores the process-wide level when a test ends.
class LogLevelGuard {
 public:
  LogLevelGuard() : saved_(log_level()) {}
  ~LogLevelGuard() { set_log_level(saved_); }

 private:
  LogLevel saved_;
};

TEST(Log, ParseLevel) {
  EXPECT_EQ(parse_log_level("debug"), LogLevel::kDebug);
  EXPECT_EQ(parse_log_level("info"), LogLevel::kInfo);
  EXPECT_EQ(parse_log_level("warn"), LogLevel::kWarn);
  EXPECT_EQ(parse_log_level("warning"), LogLevel::kWarn);
  EXPECT_EQ(parse_log_level("error"), LogLevel::kError);
  EXPECT_EQ(parse_log_level("off"), LogLevel::kOff);
  EXPECT_EQ(parse_log_level("none"), LogLevel::kOff);
  EXPECT_THROW_WITH((void)parse_log_level("verbose"), InvalidArgument, "'verbose'",
                    "debug|info|warn|error|off");
  EXPECT_THROW_WITH((void)parse_log_level(""), InvalidArgument, "unknown log level");
}

TEST(Log, LevelGatesOutput) {
  LogLevelGuard guard;
  int n_evaluated = 0;
  auto counted = [&] { return ++n_evaluated; };

  set_log_level(LogLevel::kWarn);
  EXPECT_EQ(log_level(), LogLevel::kWarn);
  testing::internal::CaptureStderr();
  VELA_LOG_DEBUG("hidden debug ", counted());
  VELA_LOG_INFO("hidden info ", counted());
  VELA_LOG_WARN("[test] shown warn ", 42);
  VELA_LOG_ERROR("[test] shown error ", 1.5);
  std::string out = testing::internal::GetCapturedStderr();
  EXPECT_EQ(n_evaluated, 0);  // gated messages are not even formatted
  EXPECT_EQ(out.find("hidden"), std::string::npos) << out;
  EXPECT_NE(out.find("[test] shown warn 42"), std::string::npos) << out;
  EXPECT_NE(out.find("[test] shown error 1.5"), std::string::npos) << out;
  EXPECT_NE(out.find("[vela warn"), std::string::npos) << out;
  EXPECT_NE(out.find("[vela error"), std::string::npos) << out;

  set_log_level(LogLevel::kDebug);
  testing::internal::CaptureStderr();
  VELA_LOG_DEBUG("now shown ", counted());
  out = testing::internal::GetCapturedStderr();
  EXPECT_EQ(n_evaluated, 1);
  EXPECT_NE(out.find("[vela debug"), std::string::npos) << out;
  EXPECT_NE(out.find("now shown 1"), std::string::npos) << out;

  set_log_level(LogLevel::kOff);
  testing::internal::CaptureStderr();
  VELA_LOG_ERROR("silenced");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace vela
