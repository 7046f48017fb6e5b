// Speculative decoding through the HTTP API: `"speculative": false` opts a request out (same
// greedy text either way), a bad value is a 400 naming the field, and /stats and /metrics carry
// the acceptance counters; prompt lookup and a draft model. A tiny random model with the Qwen3
// vocabulary; skips without the fetched Qwen3 tokenizer.
#include <httplib.h>

#include <thread>

#include "core/json.h"
#include "engine/engine.h"
#include "server/http_server.h"
#include "server_test_util.h"
#include "tiny_server.h"

namespace vela {
namespace {

TEST(SpecServer, OptOutStatsAndMetrics) {
  VELA_SKIP_UNLESS_ASSET(test::qwen3_dir() / "tokenizer.json");
  EngineConfig ec;
  ec.speculative = SpeculativeConfig::parse("ngram,k=4");
  auto engine = test::tiny_engine(ec);
  test::ServerThread server(*engine);
  httplib::Client cl = server.client();
  auto complete = [&](const json& extra) {
    json body = {{"prompt", "one two three one two three one two three one two"},
                 {"max_tokens", 48},
                 {"temperature", 0},
                 {"ignore_eos", true}};
    body.update(extra);
    return cl.Post("/v1/completions", body.dump(), "application/json");
  };
  auto off = complete({{"speculative", false}});
  ASSERT_TRUE(off && off->status == 200);
  json s0 = json::parse(cl.Get("/stats")->body)["engine"]["speculative"];
  EXPECT_EQ(s0["verify_rows"], 0) << "an opted-out request speculated";
  auto on = complete(json::object());
  ASSERT_TRUE(on && on->status == 200);
  EXPECT_EQ(json::parse(on->body)["choices"][0]["text"],
            json::parse(off->body)["choices"][0]["text"]);
  json s1 = json::parse(cl.Get("/stats")->body)["engine"]["speculative"];
  EXPECT_GT(s1["verify_rows"].get<int64_t>(), 0) << s1.dump();
  EXPECT_GT(s1["draft_tokens"].get<int64_t>(), 0);
  EXPECT_GE(s1["tokens_per_step"].get<double>(), 1.0);
  std::string metrics = cl.Get("/metrics")->body;
  EXPECT_NE(metrics.find("vela_spec_acceptance_rate"), std::string::npos);
  EXPECT_NE(metrics.find("vela_spec_draft_tokens_total " +
                         std::to_string(s1["draft_tokens"].get<int64_t>())),
            std::string::npos);
  auto bad = complete({{"speculative", "yes"}});
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("speculative must be true or false"), std::string::npos) << bad->body;
}

// A draft model behind the API: greedy text equal to the opted-out request's, sampled requests
// served, the draft counters in /stats and /metrics, no KV left behind.
TEST(SpecServer, DraftModelThroughTheApi) {
  VELA_SKIP_UNLESS_ASSET(test::qwen3_dir() / "tokenizer.json");
  EngineConfig ec;
  ec.speculative.method = SpeculativeConfig::Method::kDraft;
  ec.speculative.k = 3;
  // The draft: the same random weights (so drafts are accepted) as a separate model.
  auto engine = test::tiny_engine(ec, std::make_unique<Transformer>(test::tiny_qwen3_model()));
  test::ServerThread server(*engine);
  httplib::Client cl = server.client();
  auto complete = [&](const json& extra) {
    json body = {{"prompt", "one two three four"}, {"max_tokens", 32}, {"ignore_eos", true}};
    body.update(extra);
    return cl.Post("/v1/completions", body.dump(), "application/json");
  };
  auto off = complete({{"temperature", 0}, {"speculative", false}});
  auto on = complete({{"temperature", 0}});
  ASSERT_TRUE(off && off->status == 200 && on && on->status == 200);
  EXPECT_EQ(json::parse(on->body)["choices"][0]["text"],
            json::parse(off->body)["choices"][0]["text"]);
  auto sampled = complete({{"temperature", 0.9}, {"seed", 5}, {"n", 2}});
  ASSERT_TRUE(sampled && sampled->status == 200) << (sampled ? sampled->body : "");
  EXPECT_EQ(json::parse(sampled->body)["usage"]["completion_tokens"], 64);
  json s = json::parse(cl.Get("/stats")->body)["engine"]["speculative"];
  EXPECT_GT(s["verify_rows"].get<int64_t>(), 0) << s.dump();
  EXPECT_GT(s["draft_forwards"].get<int64_t>(), 0);
  EXPECT_GT(s["accepted_tokens"].get<int64_t>(), 0);
  EXPECT_GT(s["draft_seconds"].get<double>(), 0.0);
  std::string metrics = cl.Get("/metrics")->body;
  EXPECT_NE(metrics.find("vela_spec_draft_forwards_total " +
                         std::to_string(s["draft_forwards"].get<int64_t>())),
            std::string::npos);
  EXPECT_EQ(engine->check_integrity(), "");
}

}  // namespace
}  // namespace vela
