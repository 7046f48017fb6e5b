// LoRA adapters in PEFT's layout: config parsing, the module map onto vela's fused projections,
// attach (training / serving), save, load, merge. See lora_adapter.h.
#include "model/lora_adapter.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.h"
#include "core/mmap_file.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "ops/cast.h"
#include "ops/gemm.h"

namespace vela {
namespace fs = std::filesystem;

namespace {

const char* const kAdapterConfig = "adapter_config.json";
const char* const kAdapterWeights = "adapter_model.safetensors";
const std::vector<std::string> kAllModules = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                              "gate_proj", "up_proj", "down_proj"};

// Where one HF target module of layer `layer` lives in vela's layout.
struct Site {
  Linear* linear = nullptr;
  int64_t col_begin = 0, n_cols = 0, in = 0;
  std::string path;  // "model.layers.3.self_attn.q_proj"
};

Site site_of(Transformer& m, int64_t layer, const std::string& module) {
  const ModelConfig& c = m.config;
  DecoderBlock& b = m.blocks[static_cast<size_t>(layer)];
  const int64_t qd = c.q_dim(), kvd = c.kv_dim(), inter = c.intermediate_size, h = c.hidden_size;
  const std::string pre = "model.layers." + std::to_string(layer) + ".";
  Site s;
  if (module == "q_proj")
    s = {&b.attn.qkv, 0, qd, h, pre + "self_attn.q_proj"};
  else if (module == "k_proj")
    s = {&b.attn.qkv, qd, kvd, h, pre + "self_attn.k_proj"};
  else if (module == "v_proj")
    s = {&b.attn.qkv, qd + kvd, kvd, h, pre + "self_attn.v_proj"};
  else if (module == "o_proj")
    s = {&b.attn.o, 0, h, qd, pre + "self_attn.o_proj"};
  else if (module == "gate_proj")
    s = {&b.mlp.gate_up, 0, inter, h, pre + "mlp.gate_proj"};
  else if (module == "up_proj")
    s = {&b.mlp.gate_up, inter, inter, h, pre + "mlp.up_proj"};
  else if (module == "down_proj")
    s = {&b.mlp.down, 0, h, inter, pre + "mlp.down_proj"};
  else
    VELA_THROW(InvalidArgument, "LoRA target module '", module, "' is not one of q_proj, k_proj, ",
               "v_proj, o_proj, gate_proj, up_proj, down_proj (or \"all-linear\")");
  return s;
}

std::string key_a(const std::string& path) { return "base_model.model." + path + ".lora_A.weight"; }
std::string key_b(const std::string& path) { return "base_model.model." + path + ".lora_B.weight"; }

// Modules in the canonical order (duplicates removed, "all-linear" expanded), each checked.
std::vector<std::string> canonical_modules(const std::vector<std::string>& in) {
  std::set<std::string> want;
  for (const std::string& m : in) {
    if (m == "all-linear") {
      want.insert(kAllModules.begin(), kAllModules.end());
      continue;
    }
    VELA_CHECK(std::find(kAllModules.begin(), kAllModules.end(), m) != kAllModules.end(),
               "LoRA target module '", m,
               "' is not one of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj "
               "(or \"all-linear\")");
    want.insert(m);
  }
  std::vector<std::string> out;
  for (const std::string& m : kAllModules)
    if (want.count(m)) out.push_back(m);
  return out;
}

std::vector<std::string> read_modules(const json& v, const std::string& where) {
  if (v.is_string()) return canonical_modules({v.get<std::string>()});
  VELA_CHECK(v.is_array() && !v.empty(), where,
             ": target_modules must be a non-empty list of module names or \"all-linear\", got ",
             v.dump());
  std::vector<std::string> mods;
  for (const json& e : v) {
    VELA_CHECK(e.is_string(), where, ": target_modules entries must be strings, got ", e.dump());
    mods.push_back(e.get<std::string>());
  }
  return canonical_modules(mods);
}

Tensor to_dtype(const Tensor& src, DType dt, Device dev) {
  Tensor out = Tensor::empty(src.shape(), dt, dev);
  Tensor staged = src.to(dev);
  ops::cast(staged, out);
  return out;
}

// Every projection of the model with a LoRA hook.
std::vector<LoraLinear*> hooks_of(const Transformer& m) {
  std::vector<LoraLinear*> out;
  for (const DecoderBlock& b : m.blocks)
    for (const Linear* l : {&b.attn.qkv, &b.attn.o, &b.mlp.gate_up, &b.mlp.down})
      if (l->lora) out.push_back(l->lora.get());
  return out;
}

}  // namespace

// ---- config ----

float LoraConfig::scale() const {
  return static_cast<float>(use_rslora ? alpha / std::sqrt(static_cast<double>(r))
                                       : alpha / static_cast<double>(r));
}

void LoraConfig::validate() const {
  VELA_CHECK(r >= 1 && r <= 4096, "lora: r must be in [1, 4096], got ", r);
  VELA_CHECK(alpha > 0, "lora: alpha must be > 0, got ", alpha);
  VELA_CHECK(dropout >= 0 && dropout < 1, "lora: dropout must be in [0, 1), got ", dropout);
  VELA_CHECK(!target_modules.empty(), "lora: target_modules is empty");
  canonical_modules(target_modules);
}

LoraConfig LoraConfig::from_train_json(const json& j) {
  VELA_CHECK(j.is_object(),
             "train config: \"lora\" must be an object {\"r\", \"alpha\", "
             "\"dropout\", \"target_modules\"}, got ",
             j.dump());
  LoraConfig c;
  bool alpha_given = false;
  for (const auto& [key, v] : j.items()) {
    if (key == "r") {
      VELA_CHECK(v.is_number_integer(), "train config: lora.r must be an integer, got ", v.dump());
      c.r = v.get<int64_t>();
    } else if (key == "alpha") {
      VELA_CHECK(v.is_number(), "train config: lora.alpha must be a number, got ", v.dump());
      c.alpha = v.get<double>();
      alpha_given = true;
    } else if (key == "dropout") {
      VELA_CHECK(v.is_number(), "train config: lora.dropout must be a number, got ", v.dump());
      c.dropout = v.get<double>();
    } else if (key == "target_modules") {
      c.target_modules = read_modules(v, "train config: lora");
    } else if (key == "use_rslora") {
      VELA_CHECK(v.is_boolean(), "train config: lora.use_rslora must be a boolean, got ", v.dump());
      c.use_rslora = v.get<bool>();
    } else {
      VELA_THROW(InvalidArgument, "train config: unknown key 'lora.", key,
                 "' (expected r, alpha, dropout, target_modules, use_rslora)");
    }
  }
  if (!alpha_given) c.alpha = static_cast<double>(c.r);
  c.validate();
  return c;
}

json LoraConfig::to_train_json() const {
  return json{{"r", r},
              {"alpha", alpha},
              {"dropout", dropout},
              {"target_modules", target_modules},
              {"use_rslora", use_rslora}};
}

json LoraConfig::to_peft_json(const std::string& base_model) const {
  return json{{"peft_type", "LORA"},
              {"task_type", "CAUSAL_LM"},
              {"base_model_name_or_path", base_model},
              {"r", r},
              {"lora_alpha", alpha},
              {"lora_dropout", dropout},
              {"target_modules", target_modules},
              {"bias", "none"},
              {"fan_in_fan_out", false},
              {"inference_mode", true},
              {"init_lora_weights", true},
              {"use_rslora", use_rslora},
              {"use_dora", false},
              {"modules_to_save", nullptr},
              {"layers_to_transform", nullptr},
              {"rank_pattern", json::object()},
              {"alpha_pattern", json::object()},
              {"revision", nullptr}};
}

LoraConfig LoraConfig::from_peft_json(const json& j, const std::string& source) {
  VELA_CHECK(j.is_object(), source, ": adapter_config.json is not a JSON object");
  VELA_CHECK(j.value("peft_type", std::string("LORA")) == "LORA", source, ": peft_type '",
             j.value("peft_type", std::string()), "' is not LORA");
  auto off = [&](const char* key, auto ok) {
    if (!j.contains(key) || j[key].is_null()) return;
    VELA_CHECK_T(Unsupported, ok(j[key]), source, ": ", key, " = ", j[key].dump(),
                 " is not supported (vela implements plain LoRA on the decoder projections)");
  };
  off("use_dora", [](const json& v) { return v.is_boolean() && !v.get<bool>(); });
  off("bias", [](const json& v) { return v.is_string() && v.get<std::string>() == "none"; });
  off("fan_in_fan_out", [](const json& v) { return v.is_boolean() && !v.get<bool>(); });
  off("rank_pattern", [](const json& v) { return v.is_object() && v.empty(); });
  off("alpha_pattern", [](const json& v) { return v.is_object() && v.empty(); });
  off("layers_to_transform", [](const json&) { return false; });
  off("modules_to_save", [](const json&) { return false; });
  LoraConfig c;
  VELA_CHECK(j.contains("r") && j["r"].is_number_integer(), source, ": r is missing or not an int");
  c.r = j["r"].get<int64_t>();
  VELA_CHECK(j.contains("lora_alpha") && j["lora_alpha"].is_number(), source,
             ": lora_alpha is missing or not a number");
  c.alpha = j["lora_alpha"].get<double>();
  c.dropout = j.contains("lora_dropout") && j["lora_dropout"].is_number()
                  ? j["lora_dropout"].get<double>()
                  : 0.0;
  VELA_CHECK(j.contains("target_modules"), source, ": target_modules is missing");
  c.target_modules = read_modules(j["target_modules"], source);
  c.use_rslora = j.value("use_rslora", false);
  c.validate();
  return c;
}

// ---- adapter sets ----

int32_t LoraAdapterSet::slot(const std::string& name) const {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<int32_t>(i);
  return -1;
}

void LoraAdapterSet::reserve_rows(int64_t n, Device device) {
  if (rows->max_rows() >= n && rows->slots.device() == device) return;
  rows->host = device.is_cpu() ? Tensor::empty({n}, DType::kI32) : Tensor::zeros_pinned({n}, DType::kI32);
  int32_t* h = rows->host.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) h[i] = -1;
  rows->slots = device.is_cpu() ? rows->host : rows->host.to(device);
}

// ---- training ----

std::vector<LoraParam> attach_lora_for_training(Transformer& m, const LoraConfig& config,
                                                uint64_t seed) {
  config.validate();
  VELA_CHECK(!has_lora(m), "attach_lora_for_training: the model already has LoRA adapters");
  const std::vector<std::string> modules = canonical_modules(config.target_modules);
  const DType dt = m.dtype();
  const Device dev = m.device();
  Rng rng(seed, /*stream=*/0x4c6f5241);
  std::vector<LoraParam> params;
  uint64_t next_id = 1;
  for (int64_t l = 0; l < m.config.n_layers; ++l) {
    for (const std::string& mod : modules) {
      Site s = site_of(m, l, mod);
      if (!s.linear->lora) {
        auto lora = std::make_shared<LoraLinear>();
        lora->in_features = s.in;
        lora->r = config.r;
        lora->n_slots = 1;
        lora->scales = {config.scale()};
        lora->scales_dev = Tensor::from_vector(lora->scales).to(dev);
        lora->dropout = static_cast<float>(config.dropout);
        lora->id = next_id++;
        s.linear->lora = lora;
      }
      LoraSegment seg;
      seg.module = mod;
      seg.col_begin = s.col_begin;
      seg.n_cols = s.n_cols;
      // PEFT's init: A ~ kaiming_uniform(a = sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)), B = 0.
      std::vector<float> a(static_cast<size_t>(config.r * s.in));
      const float bound = 1.0f / std::sqrt(static_cast<float>(s.in));
      for (float& v : a) v = (2.0f * rng.uniform() - 1.0f) * bound;
      seg.a = to_dtype(Tensor::from_vector(a, {1, config.r, s.in}), dt, dev);
      seg.b = Tensor::zeros({1, s.n_cols, config.r}, dt, dev);
      seg.da = Tensor::zeros({config.r, s.in}, DType::kF32, dev);
      seg.db = Tensor::zeros({s.n_cols, config.r}, DType::kF32, dev);
      params.push_back({key_a(s.path), seg.a.select(0, 0), seg.da});
      params.push_back({key_b(s.path), seg.b.select(0, 0), seg.db});
      s.linear->lora->segments.push_back(std::move(seg));
    }
  }
  return params;
}

void write_lora_files(const Transformer& m_in, const LoraConfig& config, const std::string& dir,
                      const std::string& base_model) {
  Transformer& m =
      const_cast<Transformer&>(m_in);  // site_of walks mutable blocks; nothing is written
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (int64_t l = 0; l < m.config.n_layers; ++l) {
    for (const std::string& mod : canonical_modules(config.target_modules)) {
      Site s = site_of(m, l, mod);
      VELA_CHECK(s.linear->lora != nullptr, "save_lora_adapter: ", s.path, " has no adapter");
      const LoraLinear& lora = *s.linear->lora;
      VELA_CHECK(lora.n_slots == 1, "save_lora_adapter: ", s.path, " holds ", lora.n_slots,
                 " adapters (save the training adapter, not a serving set)");
      const LoraSegment* seg = nullptr;
      for (const LoraSegment& g : lora.segments)
        if (g.module == mod) seg = &g;
      VELA_CHECK(seg != nullptr, "save_lora_adapter: ", s.path, " has no ", mod, " segment");
      tensors.emplace_back(key_a(s.path), seg->a.select(0, 0));
      tensors.emplace_back(key_b(s.path), seg->b.select(0, 0));
    }
  }
  fs::create_directories(dir);
  save_safetensors((fs::path(dir) / kAdapterWeights).string(), tensors, {{"format", "pt"}});
  const std::string cfg = config.to_peft_json(base_model).dump(2) + "\n";
  write_file_atomic((fs::path(dir) / kAdapterConfig).string(), cfg.data(), cfg.size());
}

void save_lora_adapter(const Transformer& m, const LoraConfig& config, const std::string& dir,
                       const std::string& base_model) {
  write_lora_files(m, config, dir, base_model);
}

LoraAdapterWeights read_lora_adapter(const std::string& dir, const ModelConfig& mc) {
  const fs::path cfg_path = fs::path(dir) / kAdapterConfig;
  const fs::path w_path = fs::path(dir) / kAdapterWeights;
  VELA_CHECK_T(IoError, fs::is_regular_file(cfg_path), "LoRA adapter ", dir, " has no ",
               kAdapterConfig);
  VELA_CHECK_T(IoError, fs::is_regular_file(w_path), "LoRA adapter ", dir, " has no ",
               kAdapterWeights);
  json j;
  {
    std::ifstream f(cfg_path);
    try {
      j = json::parse(f);
    } catch (const json::exception& e) {
      VELA_THROW(IoError, cfg_path.string(), " is not valid JSON (", e.what(), ")");
    }
  }
  LoraAdapterWeights out;
  out.config = LoraConfig::from_peft_json(j, dir);
  SafetensorsReader reader = SafetensorsReader::open(w_path.string());
  std::set<std::string> used;
  // A throwaway Transformer shell gives the sites' shapes (no weights are touched).
  Transformer shell;
  shell.config = mc;
  shell.blocks.resize(static_cast<size_t>(mc.n_layers));
  for (int64_t l = 0; l < mc.n_layers; ++l) {
    for (const std::string& mod : out.config.target_modules) {
      Site s = site_of(shell, l, mod);
      const std::string ka = key_a(s.path), kb = key_b(s.path);
      if (!reader.contains(ka) && !reader.contains(kb)) continue;  // PEFT may skip layers
      VELA_CHECK(reader.contains(ka) && reader.contains(kb), "LoRA adapter ", dir, ": ", s.path,
                 " has only one of lora_A / lora_B");
      Tensor a = reader.get(ka), b = reader.get(kb);
      VELA_CHECK(a.dim() == 2 && a.size(0) == out.config.r && a.size(1) == s.in, "LoRA adapter ",
                 dir, ": ", ka, " has shape ", a.shape().str(), ", expected [", out.config.r, ", ",
                 s.in, "]");
      VELA_CHECK(b.dim() == 2 && b.size(0) == s.n_cols && b.size(1) == out.config.r,
                 "LoRA adapter ", dir, ": ", kb, " has shape ", b.shape().str(), ", expected [",
                 s.n_cols, ", ", out.config.r, "]");
      VELA_CHECK(is_floating(a.dtype()) && is_floating(b.dtype()), "LoRA adapter ", dir, ": ",
                 s.path, " is not floating point");
      used.insert(ka);
      used.insert(kb);
      out.modules[s.path] = {a, b};
    }
  }
  for (const std::string& n : reader.names())
    VELA_CHECK(used.count(n), "LoRA adapter ", dir, ": tensor '", n,
               "' does not belong to a target module of this model (", mc.n_layers,
               " layers, target_modules ", json(out.config.target_modules).dump(), ")");
  VELA_CHECK(!out.modules.empty(), "LoRA adapter ", dir, " holds no tensors");
  return out;
}

void load_lora_into(Transformer& m, const LoraConfig& config, const std::string& dir) {
  LoraAdapterWeights w = read_lora_adapter(dir, m.config);
  VELA_CHECK(
      w.config.r == config.r && w.config.target_modules == canonical_modules(config.target_modules),
      "LoRA adapter ", dir, " (r ", w.config.r, ", target_modules ",
      json(w.config.target_modules).dump(), ") does not match the run's lora config (r ", config.r,
      ", target_modules ", json(config.target_modules).dump(), ")");
  for (int64_t l = 0; l < m.config.n_layers; ++l) {
    for (const std::string& mod : w.config.target_modules) {
      Site s = site_of(m, l, mod);
      auto it = w.modules.find(s.path);
      VELA_CHECK(it != w.modules.end(), "LoRA adapter ", dir, " lacks ", s.path);
      VELA_CHECK(s.linear->lora != nullptr, "load_lora_into: the model has no adapter on ", s.path);
      for (LoraSegment& seg : s.linear->lora->segments) {
        if (seg.module != mod) continue;
        Tensor a = seg.a.select(0, 0), b = seg.b.select(0, 0);
        ops::cast(it->second.first.to(m.device()), a);
        ops::cast(it->second.second.to(m.device()), b);
      }
    }
  }
}

// ---- serving ----

std::pair<std::string, std::string> parse_lora_arg(const std::string& arg) {
  const size_t eq = arg.find('=');
  std::string name, dir;
  if (eq == std::string::npos) {
    dir = arg;
    name = fs::path(arg).lexically_normal().filename().string();
    if (name.empty() || name == ".")
      name = fs::path(arg).lexically_normal().parent_path().filename().string();
  } else {
    name = arg.substr(0, eq);
    dir = arg.substr(eq + 1);
  }
  VELA_CHECK(!name.empty() && !dir.empty(), "--lora expects NAME=DIR (or DIR), got '", arg, "'");
  return {name, dir};
}

void attach_lora_adapters(Transformer& m,
                          const std::vector<std::pair<std::string, std::string>>& adapters) {
  VELA_CHECK(!adapters.empty(), "attach_lora_adapters: no adapters");
  VELA_CHECK(!has_lora(m), "attach_lora_adapters: the model already has LoRA adapters");
  auto set = std::make_shared<LoraAdapterSet>();
  set->rows = std::make_shared<LoraRowSlots>();
  std::vector<LoraAdapterWeights> loaded;
  for (const auto& [name, dir] : adapters) {
    VELA_CHECK(set->slot(name) < 0, "LoRA adapter name '", name, "' is given twice");
    set->names.push_back(name);
    set->dirs.push_back(dir);
    loaded.push_back(read_lora_adapter(dir, m.config));
  }
  const auto n_slots = static_cast<int64_t>(loaded.size());
  int64_t r_max = 0;
  std::vector<std::string> modules;
  for (const LoraAdapterWeights& w : loaded) {
    r_max = std::max(r_max, w.config.r);
    modules.insert(modules.end(), w.config.target_modules.begin(), w.config.target_modules.end());
  }
  modules = canonical_modules(modules);
  const DType dt = m.dtype();
  const Device dev = m.device();
  uint64_t next_id = 1;
  for (int64_t l = 0; l < m.config.n_layers; ++l) {
    for (const std::string& mod : modules) {
      Site s = site_of(m, l, mod);
      // Stacked on the host in f32, padded with zeros (a smaller rank, or a module an adapter
      // does not target), then converted once.
      Tensor a = Tensor::zeros({n_slots, r_max, s.in}, DType::kF32);
      Tensor b = Tensor::zeros({n_slots, s.n_cols, r_max}, DType::kF32);
      bool any = false;
      for (int64_t k = 0; k < n_slots; ++k) {
        auto it = loaded[static_cast<size_t>(k)].modules.find(s.path);
        if (it == loaded[static_cast<size_t>(k)].modules.end()) continue;
        any = true;
        const int64_t r = loaded[static_cast<size_t>(k)].config.r;
        Tensor ak = a.select(0, k).slice(0, 0, r);
        Tensor bk = b.select(0, k).slice(1, 0, r);
        ops::cast(it->second.first, ak);
        ops::cast(it->second.second, bk);
      }
      if (!any) continue;
      if (!s.linear->lora) {
        auto lora = std::make_shared<LoraLinear>();
        lora->in_features = s.in;
        lora->r = r_max;
        lora->n_slots = n_slots;
        for (const LoraAdapterWeights& w : loaded) lora->scales.push_back(w.config.scale());
        lora->scales_dev = Tensor::from_vector(lora->scales).to(dev);
        lora->id = next_id++;
        lora->rows = set->rows;
        s.linear->lora = lora;
      }
      LoraSegment seg;
      seg.module = mod;
      seg.col_begin = s.col_begin;
      seg.n_cols = s.n_cols;
      seg.a = to_dtype(a, dt, dev);
      seg.b = to_dtype(b, dt, dev);
      s.linear->lora->segments.push_back(std::move(seg));
    }
  }
  set->reserve_rows(1, dev);
  m.lora_adapters = set;
}

void merge_lora_adapter(Transformer& m, const std::string& dir) {
  VELA_CHECK(!has_lora(m), "merge_lora_adapter: the model has LoRA hooks attached");
  LoraAdapterWeights w = read_lora_adapter(dir, m.config);
  const float scale = w.config.scale();
  for (int64_t l = 0; l < m.config.n_layers; ++l) {
    for (const std::string& mod : w.config.target_modules) {
      Site s = site_of(m, l, mod);
      auto it = w.modules.find(s.path);
      if (it == w.modules.end()) continue;
      // In f32: delta = scale * B @ A, then W += delta rounded once into the weight's dtype.
      Tensor a = to_dtype(it->second.first, DType::kF32, Device::cpu());
      Tensor b = to_dtype(it->second.second, DType::kF32, Device::cpu());
      Tensor wslice = s.linear->weight.slice(0, s.col_begin, s.col_begin + s.n_cols);
      Tensor w32 = to_dtype(wslice.to(Device::cpu()).contiguous(), DType::kF32, Device::cpu());
      ops::gemm(b, a, w32, false, false, scale, /*beta=*/1.0f);
      Tensor back = to_dtype(w32, m.dtype(), m.device());
      wslice.copy_(back);
    }
  }
}

Transformer without_lora(const Transformer& m) {
  Transformer c = m;
  c.lora_adapters.reset();
  for (DecoderBlock& b : c.blocks)
    for (Linear* l : {&b.attn.qkv, &b.attn.o, &b.mlp.gate_up, &b.mlp.down}) l->lora.reset();
  return c;
}

bool has_lora(const Transformer& m) { return !hooks_of(m).empty(); }

int64_t model_lora_scratch_bytes(const Transformer& m, int64_t n_rows) {
  int64_t most = 0;
  for (const LoraLinear* l : hooks_of(m)) most = std::max(most, lora_scratch_bytes(l, n_rows));
  return most;
}

}  // namespace vela
