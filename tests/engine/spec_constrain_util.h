// Shared by the constrained speculative-decoding tests (test_spec_constrained.cpp: prompt lookup;
// spec/test_draft_constrained.cpp: the draft model): the CPU fixture engine with a character
// tokenizer, a mix of constrained requests, the validity check of an output against its grammar
// (a GrammarMatcher over its tokens), the exact masked target distribution of a finite grammar
// (teacher forcing) with its chi-square test, and constrained requests cancelled mid-speculation.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/chi_square_util.h"
#include "engine/constrain_test_util.h"
#include "engine/engine.h"
#include "engine/spec/spec_config.h"
#include "engine/spec_test_util.h"

namespace vela::test {

inline std::vector<int32_t> encode(const Tokenizer& tok, const std::string& text) {
  return tok.encode(text, /*add_special_tokens=*/false);
}

inline bool allowed(const std::vector<uint32_t>& bits, int32_t id) {
  return (bits[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1u;
}

// draft: a draft model (cfg.speculative "draft=..."), or null.
inline std::unique_ptr<Engine> fixture_engine(const EngineConfig& cfg,
                                              std::unique_ptr<Transformer> draft = nullptr) {
  return std::make_unique<Engine>(Transformer::load(kSpecFixtureModel), fixture_char_tokenizer(),
                                  cfg, std::move(draft));
}

inline const char* kSchema = R"({"type":"object","properties":{
    "id":{"type":"integer","minimum":0,"maximum":99},
    "name":{"enum":["ab","ba","abc"]},
    "ok":{"type":"boolean"}},
  "required":["id","name","ok"],"additionalProperties":false})";

inline std::vector<Constraint> constraints() {
  return {Constraint::json_schema(json::parse(kSchema)), Constraint::regex("(ab|ba)+c-[0-9]{2}"),
          Constraint::choice(json::array({"red", "blue", "yes", "no"})),
          Constraint::grammar(R"G(root ::= "(" item ("," item)* ")"
item ::= [a-c]+ | root)G"),
          Constraint::json_object()};
}

// Repetitive prompts, so prompt lookup proposes what the grammar allows (and sometimes not).
inline std::vector<std::string> prompts() {
  return {R"({"id":12,"ok":true} {")", "ababc-12 babac-1", "red blue red blue ye",
          "(ab,(ba,c),ab)(ab,(b"};
}

// The tokens are a path through the grammar; a sample that stopped without a stop string or
// length ended it.
inline void expect_valid(Engine& engine, const Constraint& c, const Completion& x,
                         const std::string& at) {
  constrain::GrammarMatcher m(engine.compile_constraint(c));
  for (size_t i = 0; i < x.tokens.size(); ++i)
    ASSERT_TRUE(m.accept_token(x.tokens[i])) << at << ": token " << i << " of '" << x.text << "'";
  if (x.finish_reason == FinishReason::kStop && x.stop_reason.empty()) {
    EXPECT_TRUE(m.is_terminated() || m.can_terminate()) << at << ": '" << x.text << "'";
  }
}

inline std::vector<Request> constrained_requests(const Tokenizer& tok) {
  std::vector<Request> reqs;
  const auto cs = constraints();
  const auto ps = prompts();
  for (size_t i = 0; i < cs.size(); ++i) {
    for (int sampled = 0; sampled < 2; ++sampled) {
      Request r;
      r.prompt = encode(tok, ps[(i + static_cast<size_t>(sampled)) % ps.size()]);
      r.params.constraint = cs[i];
      r.params.max_tokens = 36;
      r.params.temperature = sampled ? 0.8f : 0.0f;
      r.params.seed = 40 + i;
      r.params.logprobs = true;
      r.params.top_logprobs = 2;
      if (i % 2 == 0) r.params.n = 2;
      if (i == 1 && sampled) r.params.repetition_penalty = 1.3f;
      if (i == 3 && !sampled) r.params.stop = {",a"};  // a stop string inside accepted drafts
      if (i == 0 && sampled) r.params.stop = {"\"ok"};
      reqs.push_back(r);
    }
  }
  return reqs;
}

// The constrained target distribution at the end of `seq`: softmax(logits / T) over the tokens
// the matcher allows there (the plain dense forward path).
inline std::vector<double> masked_probs(const Transformer& model, const std::vector<int32_t>& seq,
                                        constrain::GrammarMatcher& m, float T) {
  const int64_t t = static_cast<int64_t>(seq.size()), V = model.config.vocab_size;
  Tensor l = model.forward_dense(Tensor::from_vector(seq, {1, t}));
  const float* row = l.data<float>() + (t - 1) * V;
  std::vector<uint32_t> bits(static_cast<size_t>((V + 31) / 32));
  m.fill_next_token_bitmask(bits.data());
  float mx = -INFINITY;
  for (int32_t i = 0; i < V; ++i)
    if (allowed(bits, i)) mx = std::max(mx, row[i]);
  std::vector<double> p(static_cast<size_t>(V), 0.0);
  double sum = 0;
  for (int32_t i = 0; i < V; ++i)
    if (allowed(bits, i)) sum += p[static_cast<size_t>(i)] = std::exp((row[i] - mx) / T);
  for (double& x : p) x /= sum;
  return p;
}

// The exact joint distribution of a finite constraint's outputs (the engine stops a sample where
// its grammar is terminated), by teacher forcing under the masks.
inline void joint(const Transformer& model, std::vector<int32_t>& seq, constrain::GrammarMatcher& m,
                  float T, double prob, std::vector<int32_t>& path,
                  std::map<std::vector<int32_t>, double>& out) {
  if (m.is_terminated()) {
    out[path] = prob;
    return;
  }
  ASSERT_LT(path.size(), 8u) << "not a finite grammar";
  std::vector<double> p = masked_probs(model, seq, m, T);
  for (int32_t x = 0; x < static_cast<int32_t>(p.size()); ++x) {
    if (p[static_cast<size_t>(x)] == 0) continue;
    ASSERT_TRUE(m.accept_token(x));
    seq.push_back(x);
    path.push_back(x);
    joint(model, seq, m, T, prob * p[static_cast<size_t>(x)], path, out);
    path.pop_back();
    seq.pop_back();
    m.rollback(1);
  }
}

// n_draws seeded samples (seeds seed0, seed0 + 1, ...) at temperature 1 from `engine` of a
// three-character output under a regex whose second character's allowed set depends on the first
// (no multi-character token of the fixture vocabulary starts with d, e or f), checked against the
// exact masked joint target distribution of `model`: every sample must finish by the grammar and
// lie in its 18-outcome support; *p_value and *bins are the chi-square test's.
inline void constrained_chi_square(Engine& engine, const Transformer& model, int n_draws,
                                   uint64_t seed0, double* p_value, int* bins) {
  const float T = 1.0f;
  const Constraint c = Constraint::regex("(d[ef]|e[fd]|f[de])[def]");
  const std::vector<int32_t> prompt = encode(*engine.tokenizer(), "defdfedefedfdeffedfd");
  constrain::GrammarMatcher m(engine.compile_constraint(c));
  std::map<std::vector<int32_t>, double> expected;
  std::vector<int32_t> seq = prompt, path;
  joint(model, seq, m, T, 1.0, path, expected);
  ASSERT_EQ(expected.size(), 18u);
  std::vector<Request> reqs;
  for (int i = 0; i < n_draws; ++i) {
    Request r;
    r.prompt = prompt;
    r.params.constraint = c;
    r.params.temperature = T;
    r.params.max_tokens = 8;  // the grammar ends first: drafts past its end are cut
    r.params.seed = seed0 + static_cast<uint64_t>(i);
    reqs.push_back(r);
  }
  std::map<std::vector<int32_t>, int> observed;
  for (const RequestResult& r : engine.generate(reqs)) {
    const Completion& x = r.completions[0];
    ASSERT_EQ(x.finish_reason, FinishReason::kStop) << x.text << " " << x.error;
    ++observed[x.tokens];
  }
  for (const auto& [s, n] : observed)
    ASSERT_TRUE(expected.count(s)) << "a sample outside the grammar's support";
  const ChiSquare chi = pooled_chi_square(expected, observed, n_draws);
  *p_value = chi.p_value;
  *bins = chi.bins;
}

// Eight long constrained requests from a repetitive prompt (a regex and a JSON Schema in turn,
// greedy and sampled) submitted to `engine` (the random JSON-test model) and cancelled while they
// speculate (cancel_mid_speculation); then each output must be error-free and valid under its
// grammar.
inline void cancel_constrained_mid_speculation(Engine& engine) {
  const std::vector<Constraint> cs = {
      Constraint::regex("((ab|ba)+ )*c"),
      Constraint::json_schema(json::parse(R"({"type":"array","items":{"type":"string"}})"))};
  std::vector<RequestHandlePtr> handles;
  std::vector<Constraint> of;
  for (int i = 0; i < 8; ++i) {
    Request r;
    r.prompt = encode(*engine.tokenizer(), "ab ba ab ba ab");
    r.params.constraint = cs[static_cast<size_t>(i % 2)];
    r.params.max_tokens = 900;
    r.params.temperature = i % 4 < 2 ? 0.0f : 0.5f;
    r.params.seed = static_cast<uint64_t>(i);
    of.push_back(r.params.constraint);
    handles.push_back(engine.submit(r));
  }
  cancel_mid_speculation(engine, handles, /*may_finish=*/true);
  if (::testing::Test::HasFatalFailure()) return;
  for (size_t i = 0; i < handles.size(); ++i) {
    const Completion x = handles[i]->wait().completions[0];
    EXPECT_TRUE(x.error.empty()) << x.error;
    expect_valid(engine, of[i], x, "request " + std::to_string(i));
  }
}

}  // namespace vela::test
