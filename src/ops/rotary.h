// Rotary position embedding (RoPE), Hugging Face "rotate_half" (NeoX) layout.
//
// The cos/sin table is built once on the host for every HF rope_scaling variant (the frequency
// math of transformers' ROPE_INIT_FUNCTIONS), then applied by rotary() to packed Q or K:
//   table:     [max_positions, rotary_dim] f32; row p = [cos(p*f_0..f_{d/2-1}) * s, sin(...) * s]
//              where s is the attention scaling of yarn / longrope (1 otherwise)
//   x:         [n_tokens, n_heads, head_dim] f32/bf16/f16, rotated in place on its first
//              rotary_dim features (rotary_dim <= head_dim, even)
//   positions: [n_tokens] i32
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace vela::ops {

struct RopeScaling {
  enum class Type { kNone, kLinear, kDynamic, kYarn, kLlama3 };
  Type type = Type::kNone;
  double factor = 1.0;
  // original_max_position_embeddings (yarn, llama3, dynamic); 0 = use max_position_embeddings.
  int64_t original_max_positions = 0;
  // yarn
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 0.0;          // 0 = unset
  double mscale_all_dim = 0.0;  // 0 = unset
  double attention_factor = 0.0;  // 0 = derive from factor (and mscale)
  bool truncate = true;           // yarn: floor/ceil the correction range (HF default true)
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;

  static Type parse_type(const std::string& s);  // "linear", "dynamic", "yarn", "llama3", "default"
};

struct RopeConfig {
  int64_t rotary_dim = 0;       // usually head_dim (times partial_rotary_factor)
  double theta = 10000.0;
  int64_t max_positions = 2048; // max_position_embeddings
  RopeScaling scaling;
};

// The inverse frequencies (rotary_dim / 2 values) and the attention scaling for `cfg`.
// `seq_len` matters only for dynamic NTK scaling (HF recomputes the base once seq_len exceeds the
// original maximum); pass the longest sequence the table must serve.
struct RopeFrequencies {
  std::vector<double> inv_freq;
  double attention_scaling = 1.0;
};
RopeFrequencies rope_frequencies(const RopeConfig& cfg, int64_t seq_len = 0);

// Builds the [n_positions, rotary_dim] f32 cos/sin table on `device`.
Tensor make_rope_table(const RopeConfig& cfg, int64_t n_positions, Device device = Device::cpu(),
                       int64_t seq_len = 0);

void rotary(Tensor& x, const Tensor& positions, const Tensor& table);

// Backward of rotary(): the rotation is orthogonal (times the table's scaling), so the gradient
// is dx rotated by -theta; dx: [n_tokens, n_heads, head_dim], in place.
void rotary_backward(Tensor& dx, const Tensor& positions, const Tensor& table);

}  // namespace vela::ops
