// Shared by the LoRA engine tests (CPU and CUDA): a PEFT adapter with random A and B (B large
// enough to change greedy tokens) for a base model directory, saved the way training saves one,
// and greedy requests through a named adapter.
#pragma once

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"
#include "core/rng.h"
#include "engine/request.h"
#include "model/lora_adapter.h"

namespace vela::test {

inline void make_lora_adapter(const std::string& dir, const std::string& base_dir, int64_t r,
                              double alpha, std::vector<std::string> modules, uint64_t seed) {
  Transformer m = Transformer::load(base_dir);
  LoraConfig c;
  c.r = r;
  c.alpha = alpha;
  c.target_modules = std::move(modules);
  c = LoraConfig::from_train_json(c.to_train_json());
  std::vector<LoraParam> params = attach_lora_for_training(m, c, seed);
  Rng rng(seed + 10);
  for (LoraParam& p : params) {
    if (p.name.find("lora_B") == std::string::npos) continue;
    float* d = p.value.data<float>();
    for (int64_t i = 0; i < p.value.numel(); ++i) d[i] = (2 * rng.uniform() - 1) * 0.8f;
  }
  save_lora_adapter(m, c, dir, base_dir);
}

// The committed PEFT-parity fixture (tests/fixtures/lora/qwen3_qknorm_r4): the prompt, and vela's
// logits [n_prompt, vocab] for base + adapter through the serving path (per-row slots, CPU f32).
inline const std::vector<int32_t> kLoraFixturePrompt = {5, 17, 99, 3, 42, 8, 120, 64, 1, 77, 31};
inline const char* const kLoraFixtureDir = "fixtures/lora/qwen3_qknorm_r4";

inline std::vector<float> lora_fixture_logits(const std::string& base_dir,
                                              const std::string& adapter_dir) {
  Transformer m = Transformer::load(base_dir);
  attach_lora_adapters(m, {{"x", adapter_dir}});
  m.lora_adapters->reserve_rows(64, Device::cpu());
  int32_t* s = m.lora_adapters->rows->host.data<int32_t>();
  for (int i = 0; i < 64; ++i) s[i] = 0;
  const auto t = static_cast<int64_t>(kLoraFixturePrompt.size());
  return m.forward_dense(Tensor::from_vector(kLoraFixturePrompt, {1, t})).to_vector<float>();
}

// Writes the fixture: DIR/adapter (random A and B, seed 7, saved by save_lora_adapter as training
// saves one: deterministic, the same bytes on any machine) and DIR/vela_logits.json.
inline void write_lora_fixture(const std::string& out, const std::string& base_dir) {
  const std::string dir = out + "/adapter";
  make_lora_adapter(dir, base_dir, 4, 8.0, {"all-linear"}, 7);
  json j = {{"base", base_dir},
            {"prompt_ids", kLoraFixturePrompt},
            {"vocab", 128},
            {"logits", lora_fixture_logits(base_dir, dir)}};
  std::ofstream(out + "/vela_logits.json") << j.dump() << "\n";
}

// A greedy request of exactly max_tokens tokens (EOS ignored) with logprobs, through the adapter
// named `lora` ("" for the base model).
inline Request greedy_lora_request(std::vector<int32_t> prompt, int max_tokens,
                                   const std::string& lora) {
  Request r;
  r.prompt = std::move(prompt);
  r.params.temperature = 0;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  r.params.logprobs = true;
  r.lora = lora;
  return r;
}

}  // namespace vela::test
