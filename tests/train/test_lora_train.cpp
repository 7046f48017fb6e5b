// LoRA training: adapter gradients against central finite differences (with and without dropout,
// every module), the frozen base (no base gradients, only PEFT-named adapter parameters), B = 0
// init leaves the model unchanged, save / load in PEFT's layout, merge == adapter forward, and a
// Trainer run that resumes exactly with only the adapter in the checkpoint.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "../ops/grad_check_util.h"
#include "model/lora_adapter.h"
#include "model/weights.h"
#include "nn/lora.h"
#include "train/checkpoint.h"
#include "train/data/shard_writer.h"
#include "train/trainable_model.h"
#include "train/trainer.h"
#include "train_test_util.h"

namespace vela {
namespace {
namespace fs = std::filesystem;

using test::file_bytes;
using test::TmpDir;

TrainOptions lora_opts(int64_t r, double alpha, double dropout,
                       std::vector<std::string> modules = {"all-linear"}) {
  TrainOptions o;
  o.lora = true;
  o.lora_config.r = r;
  o.lora_config.alpha = alpha;
  o.lora_config.dropout = dropout;
  o.lora_config.target_modules = std::move(modules);
  o.lora_config.validate();
  o.lora_config = LoraConfig::from_train_json(o.lora_config.to_train_json());  // canonical names
  o.lora_seed = 3;
  return o;
}

// Random B (PEFT starts it at 0, which would make every dA zero and the check weak).
void randomize_b(TrainableModel& tm, uint64_t seed) {
  Rng rng(seed);
  for (Parameter& p : tm.parameters())
    if (p.name.find("lora_B") != std::string::npos) test::fill_uniform(p.value, rng, -0.5f, 0.5f);
}

TEST(LoraTrain, AdapterGradientsMatchFiniteDifferences) {
  for (double dropout : {0.0, 0.3}) {
    SCOPED_TRACE("dropout " + std::to_string(dropout));
    Transformer m = test::tiny_model(test::tiny_config(true, true, false), 21);
    TrainableModel tm(m, lora_opts(3, 6.0, dropout));
    randomize_b(tm, 5);
    const TrainBatch batch = test::packed_batch(23);
    tm.set_lora_dropout_seed(99);
    LossStats st = tm.forward_backward(batch, 1.0f);
    ASSERT_GT(st.n_tokens, 0);
    // evaluate() under the same dropout scope draws the same masks as forward_backward.
    auto loss = [&] {
      LoraDropoutScope scope(99);
      return tm.evaluate(batch).mean();
    };
    EXPECT_NEAR(loss(), st.mean(), 1e-5 * std::fabs(st.mean()));
    if (dropout > 0) EXPECT_GT(std::fabs(tm.evaluate(batch).mean() - st.mean()), 1e-6);
    for (Parameter& p : tm.parameters())
      test::expect_grad_fd(p.value, p.grad, loss, p.name, 1e-3, 2e-4, 2e-2);
  }
}

TEST(LoraTrain, OnlyAdapterParametersWithPeftNamesAndTheBaseIsFrozen) {
  Transformer m = test::tiny_model(test::tiny_config(false, false, false), 22);
  const std::vector<float> qkv_before = m.blocks[0].attn.qkv.weight.to_vector<float>();
  const Tensor base_logits = m.forward_dense(test::packed_batch(23).ids);
  TrainableModel tm(m, lora_opts(2, 4.0, 0.0, {"q_proj", "v_proj", "down_proj"}));
  std::vector<std::string> names;
  for (const Parameter& p : tm.parameters()) names.push_back(p.name);
  std::vector<std::string> want;
  for (int l = 0; l < 2; ++l)
    for (const char* mod : {"self_attn.q_proj", "self_attn.v_proj", "mlp.down_proj"})
      for (const char* ab : {"lora_A", "lora_B"})
        want.push_back("base_model.model.model.layers." + std::to_string(l) + "." + mod + "." + ab +
                       ".weight");
  EXPECT_EQ(names, want);
  EXPECT_EQ(tm.find_parameter("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight")
                ->value.shape(),
            Shape({2, 8}));
  EXPECT_EQ(tm.find_parameter("base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight")
                ->value.shape(),
            Shape({4, 2}));
  // B = 0: the adapted model computes exactly the base model.
  const Tensor lora_logits = m.forward_dense(test::packed_batch(23).ids);
  EXPECT_EQ(lora_logits.to_vector<float>(), base_logits.to_vector<float>());
  tm.forward_backward(test::packed_batch(23), 1.0f);
  EXPECT_EQ(m.blocks[0].attn.qkv.weight.to_vector<float>(), qkv_before);
  // B's gradient is non-zero, A's is zero while B = 0 (as in PEFT's first step).
  double gb = 0, ga = 0;
  for (const Parameter& p : tm.parameters())
    for (float v : p.grad.to_vector<float>())
      (p.name.find("lora_B") != std::string::npos ? gb : ga) += std::fabs(v);
  EXPECT_GT(gb, 0.0);
  EXPECT_EQ(ga, 0.0);
}

TEST(LoraTrain, SaveLoadMergeAndWithoutLora) {
  TmpDir tmp;
  Transformer m = test::tiny_model(test::tiny_config(true, false, false), 23);
  Transformer base = without_lora(m);  // shares the weights
  TrainableModel tm(m, lora_opts(3, 5.0, 0.0));
  randomize_b(tm, 8);
  const TrainBatch batch = test::packed_batch(23);
  const std::vector<float> adapted = m.forward_dense(batch.ids).to_vector<float>();
  const std::vector<float> plain = base.forward_dense(batch.ids).to_vector<float>();
  EXPECT_NE(adapted, plain);
  EXPECT_FALSE(has_lora(base));
  const fs::path dir = tmp.path / "adapter";
  save_lora_adapter(m, tm.options().lora_config, dir.string(), "tiny-base");
  ASSERT_TRUE(fs::exists(dir / "adapter_config.json"));
  ASSERT_TRUE(fs::exists(dir / "adapter_model.safetensors"));
  json cfg = json::parse(std::ifstream(dir / "adapter_config.json"));
  EXPECT_EQ(cfg["peft_type"], "LORA");
  EXPECT_EQ(cfg["r"], 3);
  EXPECT_EQ(cfg["lora_alpha"], 5.0);
  EXPECT_EQ(cfg["target_modules"].size(), 7u);
  SafetensorsReader rd = SafetensorsReader::open((dir / "adapter_model.safetensors").string());
  EXPECT_EQ(rd.names().size(), 2u * 7u * 2u);

  // Served as one adapter of a set (per-row slots, BGMV ops) == the training hooks' GEMM path.
  {
    Transformer served = without_lora(m);
    attach_lora_adapters(served, {{"a", dir.string()}});
    served.lora_adapters->reserve_rows(batch.ids.numel(), Device::cpu());
    int32_t* s = served.lora_adapters->rows->host.data<int32_t>();
    for (int64_t i = 0; i < batch.ids.numel(); ++i) s[i] = 0;
    const std::vector<float> got = served.forward_dense(batch.ids).to_vector<float>();
    ASSERT_EQ(got.size(), adapted.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], adapted[i], 2e-5) << i;
    for (int64_t i = 0; i < batch.ids.numel(); ++i) s[i] = -1;  // every row the base
    EXPECT_EQ(served.forward_dense(batch.ids).to_vector<float>(), plain);
  }
  // Merged weights == base + adapter.
  {
    Transformer merged = test::tiny_model(test::tiny_config(true, false, false), 23);
    merge_lora_adapter(merged, dir.string());
    const std::vector<float> got = merged.forward_dense(batch.ids).to_vector<float>();
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], adapted[i], 2e-4) << i;
  }
  // Loading into a fresh training adapter restores the same function.
  {
    Transformer m2 = test::tiny_model(test::tiny_config(true, false, false), 23);
    TrainableModel tm2(m2, lora_opts(3, 5.0, 0.0));
    load_lora_into(m2, tm2.options().lora_config, dir.string());
    EXPECT_EQ(m2.forward_dense(batch.ids).to_vector<float>(), adapted);
    // A mismatching config is a clear error.
    Transformer m3 = test::tiny_model(test::tiny_config(true, false, false), 23);
    TrainableModel tm3(m3, lora_opts(2, 5.0, 0.0));
    EXPECT_THROW(load_lora_into(m3, tm3.options().lora_config, dir.string()), InvalidArgument);
  }
}

TEST(LoraTrain, ConfigErrors) {
  EXPECT_THROW(LoraConfig::from_train_json(json{{"r", 0}}), InvalidArgument);
  EXPECT_THROW(LoraConfig::from_train_json(json{{"rank", 4}}), InvalidArgument);
  EXPECT_THROW(LoraConfig::from_train_json(json{{"target_modules", {"qkv"}}}), InvalidArgument);
  EXPECT_THROW(LoraConfig::from_train_json(json{{"dropout", 1.0}}), InvalidArgument);
  LoraConfig c = LoraConfig::from_train_json(json{{"r", 4}, {"target_modules", "all-linear"}});
  EXPECT_EQ(c.alpha, 4.0);  // alpha defaults to r (scale 1)
  EXPECT_EQ(c.target_modules.size(), 7u);
  json peft = c.to_peft_json("x");
  peft["use_dora"] = true;
  EXPECT_THROW(LoraConfig::from_peft_json(peft, "test"), Unsupported);
}

// Shards of a learnable rule (next = (3 cur + 1) mod 23), as test_trainer.cpp writes them.
// With `sft`, the first 4 tokens of each sequence are a prompt (mask 0: not trained).
std::string write_shards(const fs::path& dir, bool sft = false) {
  ShardWriter w(dir.string(), 200);
  Rng rng(11);
  for (int i = 0; i < 48; ++i) {
    PackedSequence s;
    s.doc_starts.push_back(0);
    int32_t tok = static_cast<int32_t>(1 + rng.next_u32() % 22);
    for (int t = 0; t < 12; ++t) {
      s.tokens.push_back(tok);
      s.mask.push_back(sft && t < 4 ? 0 : 1);
      tok = (3 * tok + 1) % 23;
    }
    w.add(s);
  }
  w.finish({{"config", {{"seq_len", 16}}}});
  return dir.string();
}

TrainerConfig lora_trainer_config(const std::string& data, const std::string& out) {
  TrainerConfig c = test::small_trainer_config(data, out);
  c.max_steps = 8;
  c.schedule.lr = 5e-2;
  c.schedule.warmup_steps = 1;
  c.schedule.total_steps = 8;  // the same schedule for the stopped-at-4 run
  c.train = lora_opts(4, 8.0, 0.1, {"q_proj", "v_proj", "gate_proj", "down_proj"});
  return c;
}

TEST(LoraTrain, TrainerLowersValidationLossAndResumesExactly) {
  TmpDir tmp;
  const std::string data = write_shards(tmp.path / "data");
  auto base = [] {
    return std::make_unique<Transformer>(
        test::tiny_model(test::tiny_config(true, false, false), 31));
  };
  TrainerConfig ca = lora_trainer_config(data, (tmp.path / "a").string());
  Trainer a(ca, base(), make_datasets(ca.data));
  const std::vector<float> qkv0 = a.model().blocks[1].attn.qkv.weight.to_vector<float>();
  const double val0 = a.validate();
  a.train();
  const double val1 = a.validate();
  EXPECT_LT(val1, val0 - 0.05) << "LoRA fine-tuning did not lower the validation loss";
  EXPECT_EQ(a.model().blocks[1].attn.qkv.weight.to_vector<float>(), qkv0) << "base changed";
  // The checkpoint holds the adapter (PEFT layout) and the optimizer state of the adapter only.
  const fs::path ck = latest_checkpoint(ca.out_dir);
  EXPECT_TRUE(fs::exists(ck / "adapter_model.safetensors"));
  EXPECT_TRUE(fs::exists(ck / "adapter_config.json"));
  EXPECT_FALSE(fs::exists(ck / "model.safetensors"));
  SafetensorsReader opt = SafetensorsReader::open((ck / "optimizer.safetensors").string());
  for (const std::string& n : opt.names())
    EXPECT_NE(n.find("lora_"), std::string::npos) << n << " is not adapter state";
  EXPECT_TRUE(verify_checkpoint(ck.string()));

  // Stop after step 4 (its checkpoint), resume on a fresh base: the same bits at step 8.
  TrainerConfig cb = lora_trainer_config(data, (tmp.path / "b").string());
  cb.max_steps = 4;
  {
    Trainer b(cb, base(), make_datasets(cb.data));
    b.train();
  }
  cb.max_steps = 8;
  cb.resume = true;
  Trainer c(cb, base(), make_datasets(cb.data));
  EXPECT_EQ(c.resumed_from_step(), 4);
  c.train();
  const fs::path fa = latest_checkpoint(ca.out_dir), fc = latest_checkpoint(cb.out_dir);
  EXPECT_EQ(fs::path(fc).filename(), "step-00000008");
  EXPECT_TRUE(file_bytes(fa / "adapter_model.safetensors") ==
              file_bytes(fc / "adapter_model.safetensors"))
      << "the resumed adapter differs";
  EXPECT_TRUE(file_bytes(fa / "optimizer.safetensors") == file_bytes(fc / "optimizer.safetensors"));
}

TEST(LoraTrain, SftStrategyTrainsTheAdapterOnResponseTokens) {
  TmpDir tmp;
  const std::string data = write_shards(tmp.path / "data", /*sft=*/true);
  TrainerConfig c = lora_trainer_config(data, (tmp.path / "sft").string());
  c.strategy = "sft";
  c.data.kind = "sft";
  c.save_every = 0;
  Trainer t(c, std::make_unique<Transformer>(
                   test::tiny_model(test::tiny_config(true, false, false), 31)),
            make_datasets(c.data));
  const std::vector<float> down0 = t.model().blocks[0].mlp.down.weight.to_vector<float>();
  const double val0 = t.validate();
  t.train();
  EXPECT_LT(t.validate(), val0 - 0.05);
  EXPECT_EQ(t.model().blocks[0].mlp.down.weight.to_vector<float>(), down0) << "base changed";
  EXPECT_TRUE(fs::exists(fs::path(latest_checkpoint(c.out_dir)) / "adapter_model.safetensors"));
}

}  // namespace
}  // namespace vela
