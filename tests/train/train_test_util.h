// Helpers for the training tests: tiny random models, fixture models, fixed TrainBatches with
// packed documents and ignored targets, the small Trainer run of the resume tests, and scratch
// directories with their files' bytes.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/rng.h"
#include "model/model_config.h"
#include "model/transformer.h"
#include "train/train_batch.h"
#include "train/trainer_config.h"

namespace vela::test {

// A tiny llama-style config: GQA (2 heads, 1 KV head), q/k/v/o biases optional, QK-norm optional.
inline ModelConfig tiny_config(bool bias, bool qk_norm, bool tied, int64_t vocab = 23) {
  json j = {{"model_type", qk_norm ? "qwen3" : "llama"},
            {"vocab_size", vocab},
            {"hidden_size", 8},
            {"intermediate_size", 12},
            {"num_hidden_layers", 2},
            {"num_attention_heads", 2},
            {"num_key_value_heads", 1},
            {"head_dim", 4},
            {"max_position_embeddings", 32},
            {"rms_norm_eps", 1e-5},
            {"rope_theta", 10000.0},
            {"attention_bias", bias},
            {"tie_word_embeddings", tied}};
  return ModelConfig::from_json(j, "tiny_config");
}

// Overwrites every element of a CPU f32 tensor with lo + (hi - lo) * uniform.
inline void fill_uniform(Tensor& t, Rng& rng, float lo, float hi) {
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = lo + (hi - lo) * rng.uniform();
}

// A random f32 CPU model with weights large enough for visible gradients, norms away from 1 and
// random biases (so a missing term in any backward shows).
inline Transformer tiny_model(const ModelConfig& cfg, uint64_t seed) {
  Transformer m = Transformer::random(cfg, DType::kF32, Device::cpu(), seed, 0.4f);
  Rng rng(seed + 1);
  for (DecoderBlock& b : m.blocks) {
    fill_uniform(b.input_norm, rng, 0.6f, 1.4f);
    fill_uniform(b.post_norm, rng, 0.6f, 1.4f);
    if (b.attn.qkv.bias.defined()) fill_uniform(b.attn.qkv.bias, rng, -0.3f, 0.3f);
    if (b.attn.o.bias.defined()) fill_uniform(b.attn.o.bias, rng, -0.3f, 0.3f);
    if (b.attn.q_norm.defined()) {
      fill_uniform(b.attn.q_norm, rng, 0.6f, 1.4f);
      fill_uniform(b.attn.k_norm, rng, 0.6f, 1.4f);
    }
  }
  fill_uniform(m.final_norm, rng, 0.6f, 1.4f);
  return m;
}

// [2, seq] batch: row 0 one document with its first 2 targets ignored; row 1 three packed documents
// (positions restart, the last token of each has no target).
inline TrainBatch packed_batch(int64_t vocab, int64_t seq = 8, uint64_t seed = 7,
                               bool with_doc_ids = true) {
  Rng rng(seed);
  std::vector<int32_t> ids(2 * seq), targets(2 * seq, kIgnoreIndex), docs(2 * seq, 0);
  for (auto& v : ids) v = static_cast<int32_t>(rng.uniform() * static_cast<float>(vocab)) % vocab;
  for (int64_t t = 0; t + 1 < seq; ++t) targets[t] = ids[t + 1];
  targets[0] = targets[1] = kIgnoreIndex;
  const int64_t lens[3] = {seq / 4, seq / 2, seq - seq / 4 - seq / 2};
  int64_t start = seq;
  for (int d = 0; d < 3; ++d) {
    for (int64_t i = 0; i < lens[d]; ++i) {
      docs[start + i] = d;
      if (i + 1 < lens[d]) targets[start + i] = ids[start + i + 1];
    }
    start += lens[d];
  }
  TrainBatch b;
  b.ids = Tensor::from_vector(ids, {2, seq});
  b.targets = Tensor::from_vector(targets, {2, seq});
  if (with_doc_ids) b.doc_ids = Tensor::from_vector(docs, {2, seq});
  return b;
}

// The small Trainer run of the resume tests over the token shards at `data` (sequences of 16,
// batches of 3, a tenth held out, seed 5), into `out`: 2 micro-batches a step, a log line every
// step, a checkpoint every 4, no progress bar, a cosine schedule. The caller sets the length, the
// optimizer and the rates.
inline TrainerConfig small_trainer_config(const std::string& data, const std::string& out) {
  TrainerConfig c;
  c.out_dir = out;
  c.grad_accum = 2;
  c.log_every = 1;
  c.save_every = 4;
  c.progress = false;
  c.data.kind = "seq";
  c.data.path = data;
  c.data.batch_size = 3;
  c.data.seq_len = 16;
  c.data.seed = 5;
  c.data.validation_fraction = 0.1;
  c.schedule.kind = "cosine";
  return c;
}

// A fresh directory under the system temp dir (one per object in this process), removed on
// destruction.
struct TmpDir {
  std::filesystem::path path;
  TmpDir() {
    static int n = 0;
    path = std::filesystem::temp_directory_path() /
           ("vela_train_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TmpDir() { std::filesystem::remove_all(path); }
  std::string str() const { return path.string(); }
};

// The whole content of the file at p (empty if it cannot be read).
inline std::string file_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace vela::test
