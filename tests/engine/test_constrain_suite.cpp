// The structured-output suite: every JSON Schema under fixtures/constrain/schemas (typical tool
// schemas, nesting, enums, arrays, anyOf, $defs / $ref recursion, formats, bounds) gets 100
// samples at temperature 1 from a random-weight model (one request with n = 100 per schema, all
// in flight together), and so does every regex and GBNF case of regex_grammar_cases.json. Every
// output must finish by the grammar (not by length) and pass the real oracles: ajv for JSON
// Schema, JavaScript RegExp for regexes, an independent check per grammar (constrain_validate.cjs).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "constrain_test_util.h"
#include "test_assets.h"

namespace vela {
namespace {

namespace fs = std::filesystem;

Request suite_request(const Constraint& c, uint64_t seed) {
  Request r;
  r.prompt = {3, 4, 5};
  r.params.temperature = 1.0f;
  r.params.n = 100;
  r.params.max_tokens = 1900;
  r.params.seed = seed;
  r.params.constraint = c;
  return r;
}

TEST(ConstrainSuite, HundredSamplesPerCaseValidateWithAjvAndRegExp) {
  const fs::path modules = test::assets_dir() / "node_modules";
  VELA_SKIP_UNLESS_ASSET(modules / "ajv" / "package.json");
  if (std::system("node --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "node not installed";
  const fs::path root = test::repo_root() / "tests";
  std::vector<fs::path> schema_files;
  for (const auto& e : fs::directory_iterator(root / "fixtures" / "constrain" / "schemas"))
    if (e.path().extension() == ".json") schema_files.push_back(e.path());
  std::sort(schema_files.begin(), schema_files.end());
  ASSERT_GE(schema_files.size(), 30u);
  json cases =
      json::parse(std::ifstream(root / "fixtures" / "constrain" / "regex_grammar_cases.json"));

  EngineConfig cfg;
  cfg.max_seqs = 256;
  cfg.max_ctx = 2048;
  cfg.n_kv_slots = 1 << 19;
  cfg.max_tokens_per_step = 4096;
  cfg.max_waiting = 1 << 16;  // all 5000 samples queued at once
  auto engine = test::json_test_engine(cfg);

  std::vector<Request> reqs;
  std::vector<json> schemas;
  for (size_t i = 0; i < schema_files.size(); ++i) {
    schemas.push_back(json::parse(std::ifstream(schema_files[i])));
    reqs.push_back(suite_request(Constraint::json_schema(schemas.back()), 100 + i));
  }
  for (const json& re : cases["regex"])
    reqs.push_back(suite_request(Constraint::regex(re.get<std::string>()), 500 + reqs.size()));
  for (const json& g : cases["grammar"])
    reqs.push_back(
        suite_request(Constraint::grammar(g["gbnf"].get<std::string>()), 900 + reqs.size()));

  auto t0 = std::chrono::steady_clock::now();
  std::vector<RequestResult> res = engine->generate(reqs);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int64_t n_tokens = 0;
  json out = {{"schemas", json::array()}, {"regex", json::array()}, {"grammar", json::array()}};
  for (size_t i = 0; i < res.size(); ++i) {
    json outputs = json::array();
    for (const Completion& c : res[i].completions) {
      EXPECT_EQ(c.finish_reason, FinishReason::kStop) << "case " << i << ": " << c.text;
      outputs.push_back(c.text);
      n_tokens += static_cast<int64_t>(c.tokens.size());
    }
    if (i < schemas.size()) {
      out["schemas"].push_back({{"name", schema_files[i].stem().string()},
                                {"schema", schemas[i]},
                                {"outputs", outputs}});
    } else if (i < schemas.size() + cases["regex"].size()) {
      out["regex"].push_back(
          {{"pattern", cases["regex"][i - schemas.size()]}, {"outputs", outputs}});
    } else {
      out["grammar"].push_back(
          {{"case", cases["grammar"][i - schemas.size() - cases["regex"].size()]},
           {"outputs", outputs}});
    }
  }
  std::printf("[constrain] suite: %zu cases x 100 samples, %lld tokens in %.1f s\n", res.size(),
              static_cast<long long>(n_tokens), secs);
  EXPECT_EQ(engine->check_integrity(), "");

  const fs::path file =
      fs::temp_directory_path() / ("vela_constrain_suite_" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << out.dump();
  const std::string cmd = "NODE_PATH='" + modules.string() + "' node '" +
                          (root / "engine" / "constrain_validate.cjs").string() + "' '" +
                          file.string() + "' 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string report;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) report.append(buf, n);
  const int rc = pclose(pipe);
  std::printf("%s", report.c_str());
  EXPECT_EQ(rc, 0) << "some outputs did not validate (see above); outputs in " << file;
  if (rc == 0) fs::remove(file);
}

}  // namespace
}  // namespace vela
