// Trainer: exact resume on the CPU (N steps straight == k steps + crash + resume + N - k steps,
// bit for bit: weights, optimizer state, per-step losses, data position) for AdamW and Muon with
// gradient accumulation; the metrics log rewinds to the checkpoint; loss falls on a learnable
// stream; the published checkpoints load as models; config errors are clear.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/rng.h"
#include "train/checkpoint.h"
#include "train/data/shard_writer.h"
#include "train/trainer.h"
#include "train_test_util.h"

namespace vela {
namespace {
namespace fs = std::filesystem;

using test::file_bytes;
using test::TmpDir;

// Token shards of 48 sequences (1-3 documents each) over a vocabulary of 23. Documents follow a
// simple rule (next = (3 * cur + 1) mod 23 with a random start), so a model can learn them.
std::string write_shards(const fs::path& dir) {
  ShardWriter w(dir.string(), 200);
  Rng rng(11);
  for (int i = 0; i < 48; ++i) {
    PackedSequence s;
    const int n_docs = 1 + i % 3;
    for (int d = 0; d < n_docs; ++d) {
      s.doc_starts.push_back(static_cast<int64_t>(s.tokens.size()));
      int32_t tok = static_cast<int32_t>(1 + rng.next_u32() % 22);
      const int len = 3 + static_cast<int>(rng.next_u32() % 4);
      for (int t = 0; t < len; ++t) {
        s.tokens.push_back(tok);
        s.mask.push_back(1);
        tok = (3 * tok + 1) % 23;
      }
    }
    w.add(s);
  }
  w.finish({{"config", {{"seq_len", 16}}}});
  return dir.string();
}

TrainerConfig make_config(const std::string& data, const std::string& out, const std::string& opt) {
  TrainerConfig c = test::small_trainer_config(data, out);
  c.max_steps = 9;
  c.max_grad_norm = 1.0;
  c.eval_every = 3;
  c.optimizer.kind = opt;
  c.schedule.lr = 3e-2;
  c.schedule.warmup_steps = 2;
  return c;
}

std::unique_ptr<Transformer> tiny(uint64_t seed) {
  return std::make_unique<Transformer>(
      test::tiny_model(test::tiny_config(true, false, false), seed));
}

// Records every step's loss; throws after step `crash_at` (simulating a crash).
class Recorder : public Callback {
 public:
  explicit Recorder(std::vector<double>* losses, int64_t crash_at = -1)
      : losses_(losses), crash_at_(crash_at) {}
  void after_optimizer_step(Trainer&, const StepMetrics& m) override {
    losses_->push_back(m.loss);
    if (m.step == crash_at_) throw IoError("simulated crash");
  }
  void on_error(Trainer&, const std::string&) override { ++errors; }
  int errors = 0;

 private:
  std::vector<double>* losses_;
  int64_t crash_at_;
};

std::vector<std::vector<uint8_t>> weight_bytes(Transformer& m) {
  TrainableModel tm(m, TrainOptions{});
  std::vector<std::vector<uint8_t>> out;
  for (const Parameter& p : tm.parameters()) {
    const uint8_t* b = static_cast<const uint8_t*>(p.value.data_ptr());
    out.emplace_back(b, b + p.value.nbytes());
  }
  return out;
}

void check_exact_resume(const std::string& opt) {
  TmpDir tmp;
  const std::string data = write_shards(tmp.path / "data");
  // Straight run.
  std::vector<double> straight;
  TrainerConfig ca = make_config(data, (tmp.path / "a").string(), opt);
  Trainer a(ca, tiny(1), make_datasets(ca.data));
  a.add_callback(std::make_unique<Recorder>(&straight));
  a.train();
  ASSERT_EQ(straight.size(), 9u);

  // Crash after step 6 (checkpoint at 4), then resume to 9.
  std::vector<double> first, second;
  TrainerConfig cb = make_config(data, (tmp.path / "b").string(), opt);
  {
    Trainer b(cb, tiny(1), make_datasets(cb.data));
    auto rec = std::make_unique<Recorder>(&first, 6);
    Recorder* r = rec.get();
    b.add_callback(std::move(rec));
    EXPECT_THROW(b.train(), IoError);
    EXPECT_EQ(r->errors, 1);
  }
  EXPECT_EQ(fs::path(latest_checkpoint(cb.out_dir)).filename(), "step-00000004");
  cb.resume = true;
  Trainer c(cb, tiny(12345), make_datasets(cb.data));  // weights come from the checkpoint
  EXPECT_EQ(c.resumed_from_step(), 4);
  c.add_callback(std::make_unique<Recorder>(&second));
  c.train();
  ASSERT_EQ(second.size(), 5u);
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ(second[i], straight[4 + i]) << "step " << 5 + i << " loss differs after resume";
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(first[i], straight[i]);

  // Weights, optimizer state and data position: the same bits.
  EXPECT_TRUE(weight_bytes(a.model()) == weight_bytes(c.model())) << "weights differ";
  const fs::path sa = tmp.path / "a.opt", sc = tmp.path / "c.opt";
  a.optimizer().save_state(sa.string());
  c.optimizer().save_state(sc.string());
  EXPECT_TRUE(file_bytes(sa) == file_bytes(sc)) << "optimizer state differs";
  EXPECT_EQ(a.dataset().state(), c.dataset().state());
  EXPECT_EQ(a.schedule().step(), c.schedule().step());
  // The final checkpoints agree too (the model file byte for byte).
  const std::string fa = latest_checkpoint(ca.out_dir), fc = latest_checkpoint(cb.out_dir);
  EXPECT_EQ(fs::path(fa).filename(), "step-00000009");
  EXPECT_TRUE(file_bytes(fs::path(fa) / "model.safetensors") ==
              file_bytes(fs::path(fc) / "model.safetensors"))
      << "final model files differ";
  EXPECT_TRUE(verify_checkpoint(fc));

  // metrics.jsonl: each step once (the crashed run's lines past step 4 were dropped), plus
  // validation records.
  std::ifstream mf(fs::path(cb.out_dir) / "metrics.jsonl");
  std::vector<int64_t> steps;
  int n_val = 0;
  for (std::string line; std::getline(mf, line);) {
    json j = json::parse(line);
    if (j.contains("val_loss"))
      ++n_val;
    else
      steps.push_back(j["step"].get<int64_t>());
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(n_val, 3);  // steps 3, 6, 9
}

TEST(Trainer, ExactResumeAdamW) { check_exact_resume("adamw"); }
TEST(Trainer, ExactResumeMuon) { check_exact_resume("muon"); }

// Captures every parameter's gradient just before the update.
class GradGrabber : public Callback {
 public:
  void before_optimizer_step(Trainer& t) override {
    grads.clear();
    for (const Parameter& p : t.trainable().parameters())
      grads.push_back(p.grad.to_vector<float>());
  }
  std::vector<std::vector<float>> grads;
};

TEST(Trainer, GradAccumulationEqualsOneBigBatch) {
  // 2 micro-batches of 3 rows vs one batch of the same 6 rows: the accumulated gradient is that of
  // the mean loss over all target tokens (micro-batches weighted by their token counts).
  TmpDir tmp;
  const std::string data = write_shards(tmp.path / "data");
  std::vector<std::vector<float>> g[2];
  for (int k = 0; k < 2; ++k) {
    TrainerConfig c = make_config(data, (tmp.path / ("o" + std::to_string(k))).string(), "adamw");
    c.max_steps = 1;
    c.max_grad_norm = 0;
    c.save_final = false;
    c.grad_accum = k == 0 ? 2 : 1;
    c.data.batch_size = k == 0 ? 3 : 6;
    Trainer t(c, tiny(4), make_datasets(c.data));
    auto grab = std::make_unique<GradGrabber>();
    GradGrabber* gp = grab.get();
    t.add_callback(std::move(grab));
    t.train();
    g[k] = gp->grads;
  }
  ASSERT_EQ(g[0].size(), g[1].size());
  double max_err = 0, max_abs = 0;
  for (size_t i = 0; i < g[0].size(); ++i)
    for (size_t j = 0; j < g[0][i].size(); ++j) {
      max_err = std::max(max_err, double(std::abs(g[0][i][j] - g[1][i][j])));
      max_abs = std::max(max_abs, double(std::abs(g[1][i][j])));
    }
  std::printf("grad accumulation vs one batch: max abs diff %.3g (max |grad| %.3g)\n", max_err,
              max_abs);
  EXPECT_LT(max_err, 1e-5 * max_abs);
}

TEST(Trainer, LossFallsAndCheckpointLoads) {
  TmpDir tmp;
  const std::string data = write_shards(tmp.path / "data");
  TrainerConfig c = make_config(data, (tmp.path / "out").string(), "adamw");
  c.max_steps = 60;
  c.save_every = 20;
  c.keep_last = 2;
  c.eval_every = 0;
  c.schedule.lr = 1e-2;
  std::vector<double> losses;
  Trainer t(c, tiny(3), make_datasets(c.data));
  t.add_callback(std::make_unique<Recorder>(&losses));
  double val0 = t.validate();
  t.train();
  double val1 = t.validate();
  double early = (losses[0] + losses[1] + losses[2]) / 3,
         late = (losses[57] + losses[58] + losses[59]) / 3;
  std::printf("train loss %.3f -> %.3f, validation %.3f -> %.3f\n", early, late, val0, val1);
  EXPECT_LT(late, 0.7 * early);
  EXPECT_LT(val1, 0.8 * val0);
  auto kept = list_checkpoints(c.out_dir);
  ASSERT_EQ(kept.size(), 2u);  // keep_last: steps 40 and 60
  EXPECT_EQ(kept[0].first, 40);
  Transformer loaded = Transformer::load(latest_checkpoint(c.out_dir));
  EXPECT_TRUE(weight_bytes(loaded) == weight_bytes(t.model()));
}

TEST(Trainer, ConfigErrors) {
  EXPECT_THROW(TrainerConfig::from_json(json{{"out_dirr", "x"}}), InvalidArgument);
  EXPECT_THROW(TrainerConfig::from_json(json{{"max_steps", "many"}}), InvalidArgument);
  TrainerConfig c;
  EXPECT_THROW(c.validate(), InvalidArgument);  // no out_dir
  c.out_dir = "/tmp/x";
  c.dtype = "f8";
  EXPECT_THROW(c.validate(), InvalidArgument);
  EXPECT_THROW(resolve_model_config("no-such-preset"), InvalidArgument);
  EXPECT_EQ(resolve_model_config("bench-1b").hidden_size, 1536);
  TrainerConfig parsed = TrainerConfig::from_json(
      json{{"out_dir", "o"}, {"schedule", {{"kind", "wsd"}}}, {"data", {{"path", "d"}}}});
  EXPECT_EQ(parsed.schedule.kind, "wsd");
  EXPECT_EQ(parsed.data.path, "d");
  EXPECT_EQ(TrainerConfig::from_json(parsed.to_json()).to_json(), parsed.to_json());
}

}  // namespace
}  // namespace vela
