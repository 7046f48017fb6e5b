// VELA_* environment switches (core/env.h): default-on switches, opt-in flags and clamped integers,
// with a clear error for a value that is not a number.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/env.h"
#include "core/error.h"

namespace vela {
namespace {

constexpr const char* kVar = "VELA_TEST_ENV_SWITCH";

class EnvTest : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv(kVar); }
};

TEST_F(EnvTest, EnabledUnlessZero) {
  unsetenv(kVar);
  EXPECT_TRUE(env_enabled(kVar));
  for (const char* v : {"1", "yes", ""}) {
    setenv(kVar, v, 1);
    EXPECT_TRUE(env_enabled(kVar)) << v;
  }
  for (const char* v : {"0", "0ff"}) {
    setenv(kVar, v, 1);
    EXPECT_FALSE(env_enabled(kVar)) << v;
  }
}

TEST_F(EnvTest, OptedInOnlyByOne) {
  unsetenv(kVar);
  EXPECT_FALSE(env_opted_in(kVar));
  setenv(kVar, "0", 1);
  EXPECT_FALSE(env_opted_in(kVar));
  setenv(kVar, "1", 1);
  EXPECT_TRUE(env_opted_in(kVar));
}

TEST_F(EnvTest, IntegerClampedOrFallbackOrError) {
  unsetenv(kVar);
  EXPECT_EQ(env_int(kVar, 2, 0, 8), 2);
  setenv(kVar, "", 1);
  EXPECT_EQ(env_int(kVar, 2, 0, 8), 2);
  setenv(kVar, "5", 1);
  EXPECT_EQ(env_int(kVar, 2, 0, 8), 5);
  setenv(kVar, "99", 1);
  EXPECT_EQ(env_int(kVar, 2, 0, 8), 8);
  setenv(kVar, "-3", 1);
  EXPECT_EQ(env_int(kVar, 2, 0, 8), 0);
  for (const char* v : {"two", "4x", "99999999999999999999999"}) {
    setenv(kVar, v, 1);
    try {
      env_int(kVar, 2, 0, 8);
      ADD_FAILURE() << v << " was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("VELA_TEST_ENV_SWITCH"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace vela
