// Checkpoint publication: manifest and checksums, verification, legacy (manifest-less) loading,
// re-publication of a step, and crash safety — a child process killed at every publication event
// (and at random moments) never damages a previously published checkpoint and never leaves a
// partial directory under a published name. Plus a training checkpoint's model/optimizer/state
// round trip.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "core/rng.h"
#include "model/weights.h"
#include "train/checkpoint.h"
#include "train/optim/optimizer.h"
#include "train_test_util.h"

namespace vela {
namespace {
namespace fs = std::filesystem;

using test::file_bytes;
using test::TmpDir;

// A payload of `n_files` files whose content is derived from `tag` (so old and new are told apart).
std::function<void(const std::string&)> payload(const std::string& tag, int n_files = 3,
                                                size_t bytes = 4096) {
  return [=](const std::string& dir) {
    for (int i = 0; i < n_files; ++i) {
      std::ofstream f(fs::path(dir) / ("part" + std::to_string(i) + ".bin"), std::ios::binary);
      std::string s(bytes, static_cast<char>('a' + i));
      s.replace(0, tag.size(), tag);
      f << s;
    }
  };
}

std::vector<std::string> hidden_entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string()[0] == '.') out.push_back(e.path().filename().string());
  return out;
}

TEST(Checkpoint, PublishWritesManifestAndVerifies) {
  TmpDir tmp;
  const std::string out = tmp.str() + "/run";
  EXPECT_EQ(latest_checkpoint(out), "");
  std::string p1 = publish_checkpoint(out, 1, payload("one"));
  std::string p10 = publish_checkpoint(out, 10, payload("ten"));
  EXPECT_EQ(fs::path(p10).filename(), "step-00000010");
  EXPECT_EQ(latest_checkpoint(out), p10);
  ASSERT_EQ(list_checkpoints(out).size(), 2u);
  EXPECT_EQ(list_checkpoints(out)[0].first, 1);
  EXPECT_TRUE(hidden_entries(out).empty());

  CheckpointManifest m;
  ASSERT_TRUE(read_manifest(p1, &m));
  EXPECT_EQ(m.format_version, kCheckpointFormatVersion);
  EXPECT_EQ(m.step, 1);
  ASSERT_EQ(m.files.size(), 3u);
  EXPECT_EQ(m.files["part0.bin"].bytes, 4096u);
  EXPECT_EQ(m.files["part0.bin"].sha256.size(), 64u);
  EXPECT_TRUE(verify_checkpoint(p1));

  // Flip one byte: verification names the file.
  {
    std::fstream f(fs::path(p1) / "part1.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('Z');
  }
  try {
    verify_checkpoint(p1);
    FAIL() << "corruption not detected";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("part1.bin"), std::string::npos) << e.what();
  }
  fs::remove(fs::path(p1) / "part2.bin");
  EXPECT_THROW(verify_checkpoint(p1), IoError);
  // Without a manifest: nothing to verify, not an error.
  fs::remove(fs::path(p1) / "manifest.json");
  EXPECT_FALSE(verify_checkpoint(p1));

  // A payload writer that throws leaves nothing behind.
  EXPECT_THROW(publish_checkpoint(out, 20, [](const std::string&) { VELA_THROW(IoError, "disk"); }),
               IoError);
  EXPECT_EQ(latest_checkpoint(out), p10);
  EXPECT_TRUE(hidden_entries(out).empty());
}

TEST(Checkpoint, RepublishReplacesTheStep) {
  TmpDir tmp;
  publish_checkpoint(tmp.str(), 5, payload("old", 3));
  std::string p = publish_checkpoint(tmp.str(), 5, payload("new", 2));
  EXPECT_TRUE(verify_checkpoint(p));
  EXPECT_EQ(file_bytes(fs::path(p) / "part0.bin").substr(0, 3), "new");
  EXPECT_FALSE(fs::exists(fs::path(p) / "part2.bin"));  // the old payload is gone entirely
  EXPECT_TRUE(hidden_entries(tmp.path).empty());
}

// Runs `publish` in a child that dies at publication event `event` (or SIGKILLs itself).
int die_during(const std::function<void()>& publish, int event, bool sigkill) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string spec = std::to_string(event) + (sigkill ? ":kill" : "");
    ::setenv("VELA_CHECKPOINT_ABORT_AT", spec.c_str(), 1);
    try {
      publish();
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);  // ran past every event
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(Checkpoint, AbortAtEveryEventLeavesPreviousIntact) {
  // New step after an existing one: 3 payload files + manifest + staging fsync + publish = 6.
  // Re-publishing the same step adds retire and remove-retired: 8.
  for (bool republish : {false, true}) {
    for (bool sigkill : {false, true}) {
      for (int event = 1; event <= 9; ++event) {
        SCOPED_TRACE(testing::Message()
                     << "republish " << republish << " sigkill " << sigkill << " event " << event);
        TmpDir tmp;
        const std::string out = tmp.str();
        const std::string prev = publish_checkpoint(out, 1, payload("prev"));
        const int new_step = republish ? 1 : 2;
        int status =
            die_during([&] { publish_checkpoint(out, new_step, payload("next")); }, event, sigkill);
        const int n_events = republish ? 8 : 6;
        if (event <= n_events) {
          if (sigkill) {
            ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
          } else {
            ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 86) << status;
          }
        } else {
          ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
        }
        // Whatever is published is complete and verifies.
        for (const auto& [step, dir] : list_checkpoints(out)) EXPECT_TRUE(verify_checkpoint(dir));
        const bool published = event >= (republish ? 7 : 6);  // the rename event
        if (!republish) {
          EXPECT_TRUE(verify_checkpoint(prev));
          EXPECT_EQ(file_bytes(fs::path(prev) / "part0.bin").substr(0, 4), "prev");
          EXPECT_EQ(fs::exists(fs::path(out) / "step-00000002"), published);
        }
        // Recovery: no hidden debris, and step 1 exists, old or new but whole.
        recover_checkpoints(out);
        EXPECT_TRUE(hidden_entries(out).empty());
        ASSERT_TRUE(fs::exists(prev));
        EXPECT_TRUE(verify_checkpoint(prev));
        const std::string tag = file_bytes(fs::path(prev) / "part0.bin").substr(0, 4);
        if (republish) {
          EXPECT_EQ(tag, published ? "next" : "prev");
        }
      }
    }
  }
}

TEST(Checkpoint, SigkillAtRandomMomentsNeverCorrupts) {
  TmpDir tmp;
  const std::string out = tmp.str();
  publish_checkpoint(out, 0, payload("base", 2, 1 << 16));
  Rng rng(17);
  int killed_mid_run = 0;
  for (int round = 0; round < 12; ++round) {
    pid_t pid = ::fork();
    if (pid == 0) {
      // Re-publish a few steps over and over, with payloads big enough to take a while.
      for (int i = 0;; ++i)
        publish_checkpoint(out, 1 + i % 3, payload("r" + std::to_string(i), 4, 1 << 20));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(2000 + rng.next_u32() % 60000));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    killed_mid_run += WIFSIGNALED(status);
    for (const auto& [step, dir] : list_checkpoints(out)) {
      EXPECT_TRUE(verify_checkpoint(dir)) << dir;
    }
    recover_checkpoints(out);
    EXPECT_TRUE(hidden_entries(out).empty());
    for (const auto& [step, dir] : list_checkpoints(out)) EXPECT_TRUE(verify_checkpoint(dir));
  }
  EXPECT_EQ(killed_mid_run, 12);
  EXPECT_EQ(list_checkpoints(out).front().first, 0);
}

TEST(Checkpoint, TrainingCheckpointRoundTrip) {
  TmpDir tmp;
  ModelConfig cfg = test::tiny_config(true, true, false);
  Transformer a = test::tiny_model(cfg, 3);
  Tensor g1 = Tensor::zeros(a.embed.shape(), DType::kF32);
  ParameterList pa = {{"model.embed_tokens.weight", a.embed, g1, ParamKind::kEmbedding}};
  OptimizerConfig oc;
  auto opt_a = make_optimizer(oc, pa);
  std::fill_n(g1.data<float>(), g1.numel(), 0.5f);
  opt_a->step(0.01);

  std::ofstream(tmp.path / "tokenizer.json") << "{\"fake\": true}";
  CheckpointPayload pl;
  pl.model = &a;
  pl.optimizer = opt_a.get();
  pl.trainer_state = json{{"step", 7}, {"data", {{"epoch", 1}, {"cursor", 3}}}};
  pl.extra_files = {(tmp.path / "tokenizer.json").string()};
  const std::string dir = save_training_checkpoint(tmp.str() + "/out", pl);
  EXPECT_TRUE(fs::exists(fs::path(dir) / "config.json"));
  EXPECT_TRUE(fs::exists(fs::path(dir) / "tokenizer.json"));
  CheckpointManifest m;
  ASSERT_TRUE(read_manifest(dir, &m));
  EXPECT_EQ(m.step, 7);
  EXPECT_EQ(m.files.count("model.safetensors"), 1u);
  EXPECT_EQ(m.files.count("optimizer.safetensors"), 1u);

  // The directory is a plain HF model directory too.
  Transformer loaded = Transformer::load(dir);
  EXPECT_EQ(loaded.embed.to_vector<float>(), a.embed.to_vector<float>());

  Transformer b = test::tiny_model(cfg, 99);
  json state = load_training_checkpoint(dir, b, /*verify=*/true);
  Tensor g2 = Tensor::zeros(b.embed.shape(), DType::kF32);
  ParameterList pb = {{"model.embed_tokens.weight", b.embed, g2, ParamKind::kEmbedding}};
  auto opt_b = make_optimizer(oc, pb);
  load_optimizer_state(dir, *opt_b);
  EXPECT_EQ(state["step"], 7);
  EXPECT_EQ(state["data"]["cursor"], 3);
  EXPECT_EQ(opt_b->step_count(), 1);
  EXPECT_EQ(b.blocks[1].mlp.down.weight.to_vector<float>(),
            a.blocks[1].mlp.down.weight.to_vector<float>());
  EXPECT_EQ(b.embed.to_vector<float>(), a.embed.to_vector<float>());

  // A manifest-less (older) checkpoint still loads, with or without verify.
  fs::remove(fs::path(dir) / "manifest.json");
  EXPECT_NO_THROW(load_training_checkpoint(dir, b, true));
  // A model-only directory cannot resume an optimizer.
  fs::remove(fs::path(dir) / "optimizer.safetensors");
  EXPECT_THROW(load_optimizer_state(dir, *opt_b), IoError);
  EXPECT_THROW(load_training_checkpoint(tmp.str() + "/nope", b, false), IoError);
}

}  // namespace
}  // namespace vela
