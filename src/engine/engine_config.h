// EngineConfig: capacity and policy knobs of the inference engine, with defaults that suit a CPU
// run of a small model. Validated by Engine's constructor (InvalidArgument naming the field).
#pragma once

#include <cstdint>
#include <string>

#include "engine/spec/spec_config.h"

namespace vela {

struct EngineConfig {
  std::string kv_strategy = "paged";  // "paged" (prefix reuse) or "contiguous"
  int32_t page_size = 16;             // tokens per KV page (paged)
  int32_t max_seqs = 32;              // concurrently running samples (request rows)
  int32_t max_tokens_per_step = 1024; // chunked-prefill token budget of one forward
  int32_t max_ctx = 0;                // per-request context limit; 0 = the model's maximum
  int64_t n_kv_slots = 0;             // KV pool size in tokens; 0 = max_seqs * max_ctx
  int32_t max_waiting = 1024;         // queued requests beyond which submit() refuses
  uint64_t seed = 0;                  // seeds of requests that bring none are drawn from this
  bool cuda_graphs = true;            // CUDA: replay captured decode graphs (off: eager, same math)
  bool time_device = false;           // CUDA: time each forward on the stream (EngineStats; bench)
  SpeculativeConfig speculative;      // speculative decoding (off by default; docs/speculative.md)
};

}  // namespace vela
