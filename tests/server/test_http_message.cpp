// parse_target (request-target -> decoded path + query parameters) and HttpRequest::header.
#include <gtest/gtest.h>

#include "server/http_message.h"

namespace vela {
namespace {

TEST(HttpMessage, ParsesPathAndQuery) {
  std::string path;
  std::map<std::string, std::string> params;
  ASSERT_TRUE(parse_target("/stats?check=1&x=a%20b+c&flag", path, params));
  EXPECT_EQ(path, "/stats");
  EXPECT_EQ(params["check"], "1");
  EXPECT_EQ(params["x"], "a b c");
  EXPECT_EQ(params.count("flag"), 1u);
  ASSERT_TRUE(parse_target("/v1/models%2Fx", path, params));
  EXPECT_EQ(path, "/v1/models/x");
  EXPECT_TRUE(params.empty());
  ASSERT_TRUE(parse_target("/a+b", path, params));
  EXPECT_EQ(path, "/a+b") << "'+' is a space only in the query";
}

TEST(HttpMessage, RefusesBadTargets) {
  std::string path;
  std::map<std::string, std::string> params;
  EXPECT_FALSE(parse_target("", path, params));
  EXPECT_FALSE(parse_target("http://host/x", path, params));
  EXPECT_FALSE(parse_target("/bad%zz", path, params));
  EXPECT_FALSE(parse_target("/trunc%4", path, params));
  EXPECT_FALSE(parse_target("/q?k=%", path, params));
}

TEST(HttpMessage, HeaderLookupIgnoresCase) {
  HttpRequest r;
  r.headers = {{"Content-Type", "application/json"}, {"X-Api-Key", "k1"}, {"x-api-key", "k2"}};
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_EQ(r.header("X-API-KEY"), "k1");
  EXPECT_EQ(r.header("Authorization"), "");
}

}  // namespace
}  // namespace vela
