// Optimizer configuration, state files and the factory; see optimizer.h.
#include "train/optim/optimizer.h"

#include <cmath>

#include "core/error.h"
#include "train/optim/adamw.h"
#include "train/optim/muon.h"

namespace vela {

void OptimizerConfig::validate() const {
  VELA_CHECK(kind == "adamw" || kind == "muon", "optimizer: unknown kind '", kind,
             "' (expected adamw or muon)");
  VELA_CHECK(beta1 >= 0 && beta1 < 1, "optimizer: beta1 must be in [0, 1), got ", beta1);
  VELA_CHECK(beta2 >= 0 && beta2 < 1, "optimizer: beta2 must be in [0, 1), got ", beta2);
  VELA_CHECK(eps > 0, "optimizer: eps must be > 0, got ", eps);
  VELA_CHECK(weight_decay >= 0 && std::isfinite(weight_decay),
             "optimizer: weight_decay must be >= 0, got ", weight_decay);
  VELA_CHECK(muon_momentum >= 0 && muon_momentum < 1,
             "optimizer: muon_momentum must be in [0, 1), got ", muon_momentum);
  VELA_CHECK(muon_ns_steps >= 1 && muon_ns_steps <= 20,
             "optimizer: muon_ns_steps must be in [1, 20], got ", muon_ns_steps);
  VELA_CHECK(muon_scale == "moonlight" || muon_scale == "keller",
             "optimizer: muon_scale must be moonlight or keller, got '", muon_scale, "'");
  VELA_CHECK(muon_ns_dtype == "auto" || muon_ns_dtype == "f32" || muon_ns_dtype == "bf16",
             "optimizer: muon_ns_dtype must be auto, f32 or bf16, got '", muon_ns_dtype, "'");
  VELA_CHECK(muon_lr_mult > 0, "optimizer: muon_lr_mult must be > 0, got ", muon_lr_mult);
}

OptimizerConfig OptimizerConfig::from_json(const json& j) {
  VELA_CHECK(j.is_object(), "optimizer: expected a JSON object, got ", j.dump());
  OptimizerConfig c;
  for (const auto& [key, value] : j.items()) {
    try {
      if (key == "kind")
        c.kind = value.get<std::string>();
      else if (key == "beta1")
        c.beta1 = value.get<double>();
      else if (key == "beta2")
        c.beta2 = value.get<double>();
      else if (key == "eps")
        c.eps = value.get<double>();
      else if (key == "weight_decay")
        c.weight_decay = value.get<double>();
      else if (key == "decay_embeddings")
        c.decay_embeddings = value.get<bool>();
      else if (key == "muon_momentum")
        c.muon_momentum = value.get<double>();
      else if (key == "muon_nesterov")
        c.muon_nesterov = value.get<bool>();
      else if (key == "muon_ns_steps")
        c.muon_ns_steps = value.get<int>();
      else if (key == "muon_scale")
        c.muon_scale = value.get<std::string>();
      else if (key == "muon_ns_dtype")
        c.muon_ns_dtype = value.get<std::string>();
      else if (key == "muon_lr_mult")
        c.muon_lr_mult = value.get<double>();
      else if (key == "muon_weight_decay")
        c.muon_weight_decay = value.get<double>();
      else
        VELA_THROW(InvalidArgument, "optimizer: unknown key '", key, "'");
    } catch (const json::exception& e) {
      VELA_THROW(InvalidArgument, "optimizer: bad value for '", key, "': ", value.dump(), " (",
                 e.what(), ")");
    }
  }
  return c;
}

json OptimizerConfig::to_json() const {
  return json{{"kind", kind},
              {"beta1", beta1},
              {"beta2", beta2},
              {"eps", eps},
              {"weight_decay", weight_decay},
              {"decay_embeddings", decay_embeddings},
              {"muon_momentum", muon_momentum},
              {"muon_nesterov", muon_nesterov},
              {"muon_ns_steps", muon_ns_steps},
              {"muon_scale", muon_scale},
              {"muon_ns_dtype", muon_ns_dtype},
              {"muon_lr_mult", muon_lr_mult},
              {"muon_weight_decay", muon_weight_decay}};
}

bool param_decays(const Parameter& p, const OptimizerConfig& config) {
  switch (p.kind) {
    case ParamKind::kMatrix:
      return true;
    case ParamKind::kEmbedding:
      return config.decay_embeddings;
    case ParamKind::kNorm:
    case ParamKind::kBias:
      return false;
  }
  return false;
}

void Optimizer::save_state(const std::string& path) const {
  std::vector<std::pair<std::string, Tensor>> tensors;
  json scalars = json::object();
  collect_state(tensors, scalars);
  scalars["kind"] = kind();
  scalars["step"] = step_count_;
  save_safetensors(path, tensors, {{"vela_optimizer", scalars.dump()}});
}

void Optimizer::load_state(const std::string& path) {
  SafetensorsReader reader = SafetensorsReader::open(path);
  auto it = reader.metadata().find("vela_optimizer");
  VELA_CHECK_T(IoError, it != reader.metadata().end(), path,
               " is not a vela optimizer state (no 'vela_optimizer' metadata)");
  json scalars;
  try {
    scalars = json::parse(it->second);
  } catch (const json::exception& e) {
    VELA_THROW(IoError, path, ": optimizer metadata is not valid JSON (", e.what(), ")");
  }
  VELA_CHECK(scalars.value("kind", "") == kind(), path, " holds '", scalars.value("kind", "?"),
             "' optimizer state but this run uses '", kind(), "'");
  restore_state(reader, scalars);
  step_count_ = scalars.at("step").get<int64_t>();
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, ParameterList& params) {
  config.validate();
  if (config.kind == "muon") return std::make_unique<Muon>(config, params);
  return std::make_unique<AdamW>(config, params);
}

}  // namespace vela
