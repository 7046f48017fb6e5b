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
  // Chunked prefill (docs/serving.md "Scheduling"): a step carries every running decode row (one
  // token each, speculative drafts after them) and then prompt chunks, all within
  // max_tokens_per_step tokens (>= max_seqs, so decode rows always fit).
  int32_t max_tokens_per_step = 1024;  // tokens of one forward (decodes + prefill chunks)
  int32_t max_prefill_chunk = 0;       // tokens of one prompt per step at most; 0 = no cap
  int32_t max_prefills_per_step = 0;   // prompts chunked in one step at most; 0 = no cap
  // Who gets the prefill budget and the free request rows: "fcfs" (arrival order) or "prefix"
  // (prefix-cache aware: waiting prompts with the longest cached prefix are admitted first, and
  // running prompts with the fewest tokens left to compute are chunked first; a prompt passed
  // over by max_seqs later ones goes first).
  std::string prefill_policy = "fcfs";
  int32_t max_ctx = 0;                // per-request context limit; 0 = the model's maximum
  // KV pool size (engine/cache/kv_sizing.h): at most one of the three; none = the smaller of
  // max_seqs * max_ctx and max(max_ctx, 65536) tokens.
  int64_t n_kv_slots = 0;         // in tokens (rounded up to whole pages)
  int64_t kv_pages = 0;           // in pages (`--kv-pages`)
  double kv_memory_fraction = 0;  // of the memory free after the weights (`--kv-memory-fraction`)
  int32_t max_waiting = 1024;         // queued requests beyond which submit() refuses
  uint64_t seed = 0;                  // seeds of requests that bring none are drawn from this
  bool cuda_graphs = true;            // CUDA: replay captured decode graphs (off: eager, same math)
  // CUDA: capture every decode bucket's graph in the constructor (benchmarks) instead of in the
  // background while the loop is idle (the default: start-up does not wait for them).
  bool capture_graphs_at_start = false;
  // CUDA graphs: a decode step whose KV split count has no graph captures it at once, stalling
  // the step for an eager forward and the capture (true: the same bits as an eager engine), or
  // runs a captured graph of its batch bucket within 2x of that split count and captures the
  // exact one when the loop is idle (false, the default: no capture stalls while serving).
  bool exact_graph_splits = false;
  bool time_device = false;           // CUDA: time each forward on the stream (EngineStats; bench)
  // Launch the next decode step before reading this one's samples (engine/scheduler.h):
  // -1 auto (on for CUDA engines, off on the CPU, where the forward runs on the loop thread),
  // 0 off, 1 on (also on the CPU: same tokens, for tests). VELA_OVERLAP_STEPS=0/1 overrides auto.
  // Never with dynamic NTK rotary (a row's numbers depend on the batch's longest sequence),
  // speculative decoding or LoRA adapters.
  // Engine::config() reports the resolved 0 / 1.
  int32_t overlap_steps = -1;
  SpeculativeConfig speculative;      // speculative decoding (off by default; docs/speculative.md)
};

}  // namespace vela
