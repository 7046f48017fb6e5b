// Weight loading (HF names -> fused vela layout) and saving (vela -> HF names), plus random init.
#include "model/weights.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "core/cuda/cuda_api.h"
#include "core/log.h"
#include "core/mmap_file.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "core/startup_log.h"
#include "model/weight_uploader.h"
#include "ops/cast.h"

namespace vela {
namespace {

std::string layer_key(int64_t i, const std::string& rest) {
  return "model.layers." + std::to_string(i) + "." + rest;
}

class WeightSource {
 public:
  WeightSource(const SafetensorsReader& r, DType dtype, Device device)
      : reader_(r), dtype_(dtype), device_(device), uploader_(device) {}
  // Waits for the copies in flight (the destructor does too).
  void finish() { uploader_.finish(); }
  int64_t bytes_uploaded() const { return uploader_.bytes_uploaded(); }

  // Reads `name`, checks its shape, converts to the compute dtype on the target device.
  Tensor take(const std::string& name, const Shape& shape) {
    Tensor t = raw(name, shape);
    Tensor out = Tensor::empty(shape, dtype_, device_);
    copy_converted(t, out);
    return out;
  }
  // Copies tensor `name` (shape `shape`) into `dst` (a contiguous view of a fused weight).
  void take_into(const std::string& name, const Shape& shape, Tensor dst) {
    copy_converted(raw(name, shape), dst);
  }
  bool has(const std::string& name) const { return reader_.contains(name); }
  Shape shape_of(const std::string& name) const { return reader_.get(name).shape(); }
  // Reads `name` stored as [a, c, b] into dst [a, b, c] (a fused expert stack saved transposed).
  void take_transposed_into(const std::string& name, const Shape& stored, Tensor dst) {
    copy_converted(raw(name, stored).transpose(1, 2).contiguous(), dst);
  }
  void mark_used(const std::string& name) { used_.insert(name); }
  void check_all_used() const {
    for (const std::string& n : reader_.names()) {
      if (used_.count(n)) continue;
      if (n.find("rotary_emb.inv_freq") != std::string::npos) continue;  // old HF buffers
      VELA_THROW(InvalidArgument, "checkpoint tensor '", n, "' is not used by this model config");
    }
  }

 private:
  const SafetensorsReader& reader_;
  DType dtype_;
  Device device_;
  std::set<std::string> used_;
  WeightUploader uploader_;  // CUDA: pinned staging ring, copies overlap the next conversion

  Tensor raw(const std::string& name, const Shape& shape) {
    VELA_CHECK(reader_.contains(name), "checkpoint is missing tensor '", name, "'");
    Tensor t = reader_.get(name);
    VELA_CHECK(t.shape() == shape, "checkpoint tensor '", name, "' has shape ", t.shape().str(),
               ", expected ", shape.str());
    VELA_CHECK(is_floating(t.dtype()), "checkpoint tensor '", name, "' has dtype ",
               dtype_name(t.dtype()), ", expected a floating dtype");
    used_.insert(name);
    return t;
  }
  void copy_converted(const Tensor& src, Tensor dst) {
    if (dst.is_cpu()) {
      ops::cast(src.contiguous(), dst);
    } else {
      uploader_.upload(src, dst);
    }
  }
};

void init_normal(Tensor& t, Rng& rng, float std) {
  Tensor f = Tensor::empty(t.shape(), DType::kF32);
  float* p = f.data<float>();
  uint64_t first = rng.reserve(static_cast<uint64_t>(f.numel()) * 2);
  const uint64_t seed = rng.seed(), stream = rng.stream();
  // Counter-based: element i depends only on (seed, stream, first + 2i), so threads may split it.
  // One Philox block gives four words, the uniforms of two elements: each block is computed once
  // (philox_uniform per word would compute it four times), the same values.
  parallel_for(f.numel(), 1 << 16, [&](int64_t begin, int64_t end) {
    uint64_t cached = ~uint64_t{0};
    PhiloxOut block{};
    auto uniform = [&](uint64_t index) {
      if (index >> 2 != cached) block = philox4x32(seed, cached = index >> 2, stream);
      return word_to_uniform(block.x[index & 3]);
    };
    for (int64_t i = begin; i < end; ++i) {
      const uint64_t index = first + 2 * static_cast<uint64_t>(i);
      float u1 = std::max(uniform(index), 1e-12f);
      float u2 = uniform(index + 1);
      p[i] = std * std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
    }
  });
  Tensor c = t.is_cpu() ? t : Tensor::empty(t.shape(), t.dtype());
  ops::cast(f, c);
  if (!t.is_cpu()) t.copy_(c);
}

Tensor ones(int64_t n, DType dtype, Device device) {
  Tensor f = Tensor::from_vector(std::vector<float>(static_cast<size_t>(n), 1.0f));
  Tensor c = Tensor::empty({n}, dtype);
  ops::cast(f, c);
  return c.to(device);
}

// Reads a dense SwiGLU MLP `<prefix>.{gate,up,down}_proj.weight` into `mlp` (fused gate|up).
void load_mlp(WeightSource& src, const std::string& prefix, int64_t h, int64_t inter, DType dtype,
              Device device, Mlp& mlp) {
  mlp.gate_up.weight = Tensor::empty({2 * inter, h}, dtype, device);
  src.take_into(prefix + ".gate_proj.weight", {inter, h}, mlp.gate_up.weight.slice(0, 0, inter));
  src.take_into(prefix + ".up_proj.weight", {inter, h},
                mlp.gate_up.weight.slice(0, inter, 2 * inter));
  mlp.down.weight = src.take(prefix + ".down_proj.weight", {h, inter});
}

// An MoE layer in any of the layouts checkpoints carry: the router `<p>.gate.weight` with p =
// mlp (Qwen-MoE, transformers 5 Mixtral) or block_sparse_moe (Hub Mixtral); experts one tensor
// each (`<p>.experts.<e>.{gate,up,down}_proj.weight`, Mixtral `w1, w3, w2`) or fused stacks
// (`<p>.experts.gate_up_proj` [E, 2I, H] and `<p>.experts.down_proj` [E, H, I], accepted
// transposed too); qwen2_moe's `<p>.shared_expert.*` and `<p>.shared_expert_gate.weight`.
void load_moe(WeightSource& src, const ModelConfig& c, int64_t layer, DType dtype, Device device,
              Moe& moe) {
  const int64_t h = c.hidden_size, n_exp = c.n_experts, inter = c.moe_intermediate_size;
  std::string p = layer_key(layer, "mlp");
  if (!src.has(p + ".gate.weight") && src.has(layer_key(layer, "block_sparse_moe.gate.weight")))
    p = layer_key(layer, "block_sparse_moe");
  moe.top_k = c.n_experts_per_tok;
  moe.norm_topk_prob = c.norm_topk_prob;
  moe.router.weight = src.take(p + ".gate.weight", {n_exp, h});
  moe.gate_up = Tensor::empty({n_exp, 2 * inter, h}, dtype, device);
  moe.down = Tensor::empty({n_exp, h, inter}, dtype, device);
  auto fused = [&](const std::string& base) {
    for (const std::string& n : {base, base + ".weight"})
      if (src.has(n)) return n;
    return std::string();
  };
  const std::string fused_gate_up = fused(p + ".experts.gate_up_proj");
  const std::string fused_down = fused(p + ".experts.down_proj");
  if (!fused_gate_up.empty() || !fused_down.empty()) {
    VELA_CHECK(!fused_gate_up.empty() && !fused_down.empty(), "layer ", layer,
               ": a fused expert checkpoint needs both ", p, ".experts.gate_up_proj and ", p,
               ".experts.down_proj");
    auto stack = [&](const std::string& name, const Shape& want, Tensor dst) {
      const Shape got = src.shape_of(name);
      const Shape flipped{want[0], want[2], want[1]};
      if (got == want || want[1] == want[2]) {
        src.take_into(name, want, dst);
      } else {
        VELA_CHECK(got == flipped, "checkpoint tensor '", name, "' has shape ", got.str(),
                   ", expected ", want.str(), " (or ", flipped.str(), ")");
        src.take_transposed_into(name, flipped, dst);
      }
    };
    stack(fused_gate_up, {n_exp, 2 * inter, h}, moe.gate_up);
    stack(fused_down, {n_exp, h, inter}, moe.down);
  } else {
    const bool mixtral_names = src.has(p + ".experts.0.w1.weight");
    const char* gate = mixtral_names ? "w1" : "gate_proj";
    const char* up = mixtral_names ? "w3" : "up_proj";
    const char* down = mixtral_names ? "w2" : "down_proj";
    for (int64_t e = 0; e < n_exp; ++e) {
      const std::string ep = p + ".experts." + std::to_string(e) + ".";
      Tensor gu = moe.gate_up.select(0, e);
      src.take_into(ep + gate + ".weight", {inter, h}, gu.slice(0, 0, inter));
      src.take_into(ep + up + ".weight", {inter, h}, gu.slice(0, inter, 2 * inter));
      src.take_into(ep + down + ".weight", {h, inter}, moe.down.select(0, e));
    }
  }
  if (c.shared_expert_intermediate_size > 0) {
    load_mlp(src, p + ".shared_expert", h, c.shared_expert_intermediate_size, dtype, device,
             moe.shared);
    moe.shared_gate.weight = src.take(p + ".shared_expert_gate.weight", {1, h});
  }
}

}  // namespace

void load_weights(Transformer& m, const SafetensorsReader& reader, DType dtype, Device device) {
  const ModelConfig& c = m.config;
  const int64_t h = c.hidden_size, qd = c.q_dim(), kvd = c.kv_dim(), inter = c.intermediate_size;
  WeightSource src(reader, dtype, device);
  m.embed = src.take("model.embed_tokens.weight", {c.vocab_size, h});
  m.blocks.resize(static_cast<size_t>(c.n_layers));
  for (int64_t i = 0; i < c.n_layers; ++i) {
    DecoderBlock& b = m.blocks[static_cast<size_t>(i)];
    b.eps = c.rms_norm_eps;
    b.input_norm = src.take(layer_key(i, "input_layernorm.weight"), {h});
    b.post_norm = src.take(layer_key(i, "post_attention_layernorm.weight"), {h});
    Attention& a = b.attn;
    a.cfg = {h, c.n_heads, c.n_kv_heads, c.head_dim, c.rms_norm_eps};
    a.qkv.weight = Tensor::empty({qd + 2 * kvd, h}, dtype, device);
    src.take_into(layer_key(i, "self_attn.q_proj.weight"), {qd, h}, a.qkv.weight.slice(0, 0, qd));
    src.take_into(layer_key(i, "self_attn.k_proj.weight"), {kvd, h}, a.qkv.weight.slice(0, qd, qd + kvd));
    src.take_into(layer_key(i, "self_attn.v_proj.weight"), {kvd, h},
                  a.qkv.weight.slice(0, qd + kvd, qd + 2 * kvd));
    if (c.qkv_bias) {
      a.qkv.bias = Tensor::empty({qd + 2 * kvd}, dtype, device);
      src.take_into(layer_key(i, "self_attn.q_proj.bias"), {qd}, a.qkv.bias.slice(0, 0, qd));
      src.take_into(layer_key(i, "self_attn.k_proj.bias"), {kvd}, a.qkv.bias.slice(0, qd, qd + kvd));
      src.take_into(layer_key(i, "self_attn.v_proj.bias"), {kvd},
                    a.qkv.bias.slice(0, qd + kvd, qd + 2 * kvd));
    }
    a.o.weight = src.take(layer_key(i, "self_attn.o_proj.weight"), {h, qd});
    if (c.o_bias) a.o.bias = src.take(layer_key(i, "self_attn.o_proj.bias"), {h});
    if (c.qk_norm) {
      a.q_norm = src.take(layer_key(i, "self_attn.q_norm.weight"), {c.head_dim});
      a.k_norm = src.take(layer_key(i, "self_attn.k_norm.weight"), {c.head_dim});
    }
    if (c.is_moe_layer(i)) {
      load_moe(src, c, i, dtype, device, b.moe);
      continue;
    }
    b.mlp.gate_up.weight = Tensor::empty({2 * inter, h}, dtype, device);
    src.take_into(layer_key(i, "mlp.gate_proj.weight"), {inter, h}, b.mlp.gate_up.weight.slice(0, 0, inter));
    src.take_into(layer_key(i, "mlp.up_proj.weight"), {inter, h},
                  b.mlp.gate_up.weight.slice(0, inter, 2 * inter));
    b.mlp.down.weight = src.take(layer_key(i, "mlp.down_proj.weight"), {h, inter});
  }
  m.final_norm = src.take("model.norm.weight", {h});
  if (c.tie_word_embeddings) {
    m.lm_head.weight = m.embed;
    if (src.has("lm_head.weight")) src.mark_used("lm_head.weight");  // saved redundantly by some tools
  } else {
    m.lm_head.weight = src.take("lm_head.weight", {c.vocab_size, h});
  }
  src.check_all_used();
  src.finish();
  m.build_rope_table();
}

Transformer Transformer::load(const std::string& dir, DType dtype, Device device) {
  VELA_CHECK(dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16,
             "model compute dtype must be f32, bf16 or f16");
  Transformer m;
  m.config = ModelConfig::from_file(dir);
  SafetensorsReader reader = [&] {
    StartupPhase phase("mmap checkpoint");
    return SafetensorsReader::open(dir);
  }();
  if (device.is_cuda()) {  // a phase of its own (0.2-0.35 s on the H200 machine), not the upload's
    StartupPhase phase("CUDA context");
    cuda::init_device(device.index);
  }
  VELA_LOG_INFO("[model] loading ", dir, ": ", m.config.model_type, ", ", m.config.n_params(),
                " params, ", dtype_name(dtype), " on ", device.str());
  {
    StartupPhase phase(device.is_cuda() ? "weights: convert + upload" : "weights: convert");
    load_weights(m, reader, dtype, device);
  }
  return m;
}

Transformer Transformer::random(const ModelConfig& c, DType dtype, Device device, uint64_t seed,
                                float init_std) {
  Transformer m;
  m.config = c;
  Rng rng(seed);
  const int64_t h = c.hidden_size, qd = c.q_dim(), kvd = c.kv_dim(), inter = c.intermediate_size;
  auto normal = [&](const Shape& s) {
    Tensor t = Tensor::empty(s, dtype, device);
    init_normal(t, rng, init_std);
    return t;
  };
  m.embed = normal({c.vocab_size, h});
  m.blocks.resize(static_cast<size_t>(c.n_layers));
  for (auto& b : m.blocks) {
    b.eps = c.rms_norm_eps;
    b.input_norm = ones(h, dtype, device);
    b.post_norm = ones(h, dtype, device);
    b.attn.cfg = {h, c.n_heads, c.n_kv_heads, c.head_dim, c.rms_norm_eps};
    b.attn.qkv.weight = normal({qd + 2 * kvd, h});
    if (c.qkv_bias) b.attn.qkv.bias = Tensor::zeros({qd + 2 * kvd}, dtype, device);
    b.attn.o.weight = normal({h, qd});
    if (c.o_bias) b.attn.o.bias = Tensor::zeros({h}, dtype, device);
    if (c.qk_norm) {
      b.attn.q_norm = ones(c.head_dim, dtype, device);
      b.attn.k_norm = ones(c.head_dim, dtype, device);
    }
    const int64_t layer = &b - m.blocks.data();
    if (c.is_moe_layer(layer)) {
      const int64_t ei = c.moe_intermediate_size, si = c.shared_expert_intermediate_size;
      b.moe.top_k = c.n_experts_per_tok;
      b.moe.norm_topk_prob = c.norm_topk_prob;
      b.moe.router.weight = normal({c.n_experts, h});
      b.moe.gate_up = normal({c.n_experts, 2 * ei, h});
      b.moe.down = normal({c.n_experts, h, ei});
      if (si > 0) {
        b.moe.shared.gate_up.weight = normal({2 * si, h});
        b.moe.shared.down.weight = normal({h, si});
        b.moe.shared_gate.weight = normal({1, h});
      }
      continue;
    }
    b.mlp.gate_up.weight = normal({2 * inter, h});
    b.mlp.down.weight = normal({h, inter});
  }
  m.final_norm = ones(h, dtype, device);
  m.lm_head.weight = c.tie_word_embeddings ? m.embed : normal({c.vocab_size, h});
  m.build_rope_table();
  return m;
}

namespace {

// An MoE layer in the Hub's per-expert layout (what transformers 4.x reads and 5.x converts).
void save_moe(const ModelConfig& c, int64_t layer, const Moe& moe,
              std::vector<std::pair<std::string, Tensor>>& t) {
  const bool mixtral = c.model_type == "mixtral";
  const std::string p = layer_key(layer, mixtral ? "block_sparse_moe" : "mlp");
  const int64_t inter = moe.inter();
  t.emplace_back(p + ".gate.weight", moe.router.weight);
  for (int64_t e = 0; e < moe.n_experts(); ++e) {
    const std::string ep = p + ".experts." + std::to_string(e) + ".";
    Tensor gu = moe.gate_up.select(0, e);
    t.emplace_back(ep + (mixtral ? "w1" : "gate_proj") + ".weight", gu.slice(0, 0, inter));
    t.emplace_back(ep + (mixtral ? "w3" : "up_proj") + ".weight", gu.slice(0, inter, 2 * inter));
    t.emplace_back(ep + (mixtral ? "w2" : "down_proj") + ".weight", moe.down.select(0, e));
  }
  if (moe.has_shared()) {
    const int64_t si = moe.shared.inter();
    const Tensor& w = moe.shared.gate_up.weight;
    t.emplace_back(p + ".shared_expert.gate_proj.weight", w.slice(0, 0, si));
    t.emplace_back(p + ".shared_expert.up_proj.weight", w.slice(0, si, 2 * si));
    t.emplace_back(p + ".shared_expert.down_proj.weight", moe.shared.down.weight);
    t.emplace_back(p + ".shared_expert_gate.weight", moe.shared_gate.weight);
  }
}

}  // namespace

void save_model(const Transformer& m, const std::string& dir) {
  namespace fs = std::filesystem;
  const ModelConfig& c = m.config;
  const int64_t qd = c.q_dim(), kvd = c.kv_dim(), inter = c.intermediate_size;
  std::vector<std::pair<std::string, Tensor>> t;
  t.emplace_back("model.embed_tokens.weight", m.embed);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const DecoderBlock& b = m.blocks[static_cast<size_t>(i)];
    const Tensor& w = b.attn.qkv.weight;
    t.emplace_back(layer_key(i, "input_layernorm.weight"), b.input_norm);
    t.emplace_back(layer_key(i, "self_attn.q_proj.weight"), w.slice(0, 0, qd));
    t.emplace_back(layer_key(i, "self_attn.k_proj.weight"), w.slice(0, qd, qd + kvd));
    t.emplace_back(layer_key(i, "self_attn.v_proj.weight"), w.slice(0, qd + kvd, qd + 2 * kvd));
    if (b.attn.qkv.bias.defined()) {
      const Tensor& bias = b.attn.qkv.bias;
      t.emplace_back(layer_key(i, "self_attn.q_proj.bias"), bias.slice(0, 0, qd));
      t.emplace_back(layer_key(i, "self_attn.k_proj.bias"), bias.slice(0, qd, qd + kvd));
      t.emplace_back(layer_key(i, "self_attn.v_proj.bias"), bias.slice(0, qd + kvd, qd + 2 * kvd));
    }
    t.emplace_back(layer_key(i, "self_attn.o_proj.weight"), b.attn.o.weight);
    if (b.attn.o.bias.defined()) t.emplace_back(layer_key(i, "self_attn.o_proj.bias"), b.attn.o.bias);
    if (b.attn.q_norm.defined()) {
      t.emplace_back(layer_key(i, "self_attn.q_norm.weight"), b.attn.q_norm);
      t.emplace_back(layer_key(i, "self_attn.k_norm.weight"), b.attn.k_norm);
    }
    t.emplace_back(layer_key(i, "post_attention_layernorm.weight"), b.post_norm);
    if (b.moe.defined()) {
      save_moe(c, i, b.moe, t);
      continue;
    }
    t.emplace_back(layer_key(i, "mlp.gate_proj.weight"), b.mlp.gate_up.weight.slice(0, 0, inter));
    t.emplace_back(layer_key(i, "mlp.up_proj.weight"), b.mlp.gate_up.weight.slice(0, inter, 2 * inter));
    t.emplace_back(layer_key(i, "mlp.down_proj.weight"), b.mlp.down.weight);
  }
  t.emplace_back("model.norm.weight", m.final_norm);
  if (!c.tie_word_embeddings) t.emplace_back("lm_head.weight", m.lm_head.weight);
  fs::create_directories(dir);
  ModelConfig out_cfg = c;
  out_cfg.dtype = m.dtype();
  std::string cfg = out_cfg.to_hf_json().dump(2) + "\n";
  save_safetensors((fs::path(dir) / "model.safetensors").string(), t, {{"format", "pt"}});
  write_file_atomic((fs::path(dir) / "config.json").string(), cfg.data(), cfg.size());
}

}  // namespace vela
