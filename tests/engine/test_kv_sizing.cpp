// KV pool sizing (engine/cache/kv_sizing.h): pages, a memory fraction, a direct slot count or the
// default, rounded to whole pages; conflicting or out-of-range requests are clear errors; the
// Engine sizes its pool through it (what serve, generate and bench pass).
#include <gtest/gtest.h>

#include "core/json.h"
#include "engine/cache/kv_sizing.h"
#include "engine/engine.h"

namespace vela {
namespace {

ModelConfig small_config() {
  return ModelConfig::from_json(json::parse(R"({"model_type": "llama",
    "vocab_size": 128, "hidden_size": 32, "num_hidden_layers": 2, "intermediate_size": 64,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512})"));
}

TEST(KvSizing, BytesPerTokenCountKAndVOfEveryLayer) {
  // 2 (K, V) x 2 layers x 2 KV heads x head_dim 8 x 2 bytes.
  EXPECT_EQ(kv_bytes_per_token(small_config(), DType::kBF16), 2 * 2 * 2 * 8 * 2);
  EXPECT_EQ(kv_bytes_per_token(small_config(), DType::kF32), 2 * 2 * 2 * 8 * 4);
}

TEST(KvSizing, EachWayOfGivingTheSize) {
  KvSizingRequest r;
  r.page_size = 16;
  r.default_slots = 1000;
  EXPECT_EQ(kv_pool_slots(r, 128, 0), 1008);  // the default, rounded up to whole pages
  r.kv_pages = 10;
  EXPECT_EQ(kv_pool_slots(r, 128, 0), 160);
  r.kv_pages = 0;
  r.n_kv_slots = 33;
  EXPECT_EQ(kv_pool_slots(r, 128, 0), 48);
  r.n_kv_slots = 0;
  r.kv_memory_fraction = 0.5;
  // Half of 1 MiB at 128 bytes a token: 4096 tokens = 256 pages; rounded down to whole pages.
  EXPECT_EQ(kv_pool_slots(r, 128, 1 << 20), 4096);
  EXPECT_EQ(kv_pool_slots(r, 100, 1 << 20), 5232);
}

TEST(KvSizing, BadRequestsNameTheFlag) {
  KvSizingRequest r;
  r.default_slots = 64;
  r.kv_pages = 4;
  r.kv_memory_fraction = 0.5;
  try {
    kv_pool_slots(r, 128, 1 << 20);
    FAIL() << "both sizes accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("--kv-pages"), std::string::npos) << e.what();
  }
  r = {};
  r.kv_memory_fraction = 1.5;
  EXPECT_THROW(kv_pool_slots(r, 128, 1 << 20), InvalidArgument);
  r.kv_memory_fraction = 0.01;  // 10 KiB of 1 MiB: less than one 16-token page of 4 KiB tokens
  EXPECT_THROW(kv_pool_slots(r, 4096, 1 << 20), OutOfMemory);
  r = {};
  r.kv_pages = -1;
  EXPECT_THROW(r.validate(), InvalidArgument);
}

TEST(KvSizing, TheEngineSizesItsPoolFromPagesOrAFractionOfHostMemory) {
  EngineConfig cfg;
  cfg.max_seqs = 4;
  cfg.page_size = 8;
  cfg.kv_pages = 12;
  {
    Engine e(Transformer::random(small_config(), DType::kF32, Device::cpu(), 1), nullptr, cfg);
    EXPECT_EQ(e.stats().kv_pages_total, 12);
  }
  cfg.kv_pages = 0;
  cfg.kv_memory_fraction = 1e-6;  // a few KiB of the host's available memory: a few pages
  {
    Engine e(Transformer::random(small_config(), DType::kF32, Device::cpu(), 1), nullptr, cfg);
    const int64_t expect =
        static_cast<int64_t>(1e-6 * static_cast<double>(available_memory_bytes(Device::cpu(), 0)) /
                             kv_bytes_per_token(small_config(), DType::kF32) / 8);
    EXPECT_GT(e.stats().kv_pages_total, 0);
    // MemAvailable moves while the test runs: within a few pages of the estimate.
    EXPECT_NEAR(static_cast<double>(e.stats().kv_pages_total), static_cast<double>(expect),
                std::max(2.0, 0.05 * static_cast<double>(expect)));
  }
  cfg.kv_pages = 4;  // both
  EXPECT_THROW(
      Engine(Transformer::random(small_config(), DType::kF32, Device::cpu(), 1), nullptr, cfg),
      InvalidArgument);
}

}  // namespace
}  // namespace vela
