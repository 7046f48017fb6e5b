// `vela train`: train a model from a JSON config (docs/training.md), every key also a flag.
//   vela train --config train.json [--key value]... [--section.key value]... [--resume]
// Flags name the config keys with '-' or '_' (--max-steps 100, --schedule.lr 3e-4,
// --data.batch-size 8); booleans take true/false or stand alone (--resume; --no-progress).
// Shortcuts: --lr = --schedule.lr, --batch-size = --data.batch_size, --data = --data.path.
// Data parallel (docs/distributed.md): --nproc-per-node N [--nnodes M --node-rank K
// --master-addr HOST --master-port PORT] spawns this host's N ranks (dist/launcher.h); under
// mpirun or with RANK / WORLD_SIZE / MASTER_* set, this process is one rank of the job.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "core/json.h"
#include "dist/launcher.h"
#include "model/lora_adapter.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace vela::cli {
namespace {

void print_usage(const json& defaults) {
  std::printf(
      "usage: vela train --config train.json [--key value]... [--resume] [--device cpu|cuda]\n\n"
      "Trains a model on token shards written by `vela preprocess` and publishes checkpoints\n"
      "(step-N/ directories loadable by `vela serve` and transformers) into --out-dir.\n"
      "Every config key is also a flag (nested ones as --data.path, --schedule.lr, ...);\n"
      "flags override the file. Shortcuts: --lr, --batch-size, --data. See docs/training.md.\n\n"
      "data parallel (docs/distributed.md):\n"
      "  --nproc-per-node N     spawn N ranks on this host (one per GPU with --device cuda)\n"
      "  --nnodes M --node-rank K --master-addr HOST --master-port PORT   several hosts\n"
      "  (or run under mpirun, or set RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT yourself)\n"
      "  --zero 1               shard the optimizer state over the ranks (ZeRO-1)\n\n"
      "keys and defaults:\n");
  for (const auto& [k, v] : defaults.items()) {
    if (v.is_object()) {
      for (const auto& [k2, v2] : v.items())
        std::printf("  --%s.%-24s %s\n", k.c_str(), k2.c_str(), v2.dump().c_str());
    } else {
      std::printf("  --%-29s %s\n", k.c_str(), v.dump().c_str());
    }
  }
}

std::string normalize(std::string name) {
  for (char& c : name)
    if (c == '-') c = '_';
  if (name == "lr") return "schedule.lr";
  if (name == "batch_size") return "data.batch_size";
  if (name == "data") return "data.path";
  return name;
}

// Sets `path` (a.b) in `cfg` from a flag's text, typed after the default at that path.
void set_key(json& cfg, const json& defaults, const std::string& path, const std::string& text) {
  std::string head = path, tail;
  if (auto dot = path.find('.'); dot != std::string::npos) {
    head = path.substr(0, dot);
    tail = path.substr(dot + 1);
  }
  VELA_CHECK(defaults.contains(head), "vela train: unknown option --", path,
             " (see `vela train --help`)");
  const json* def = &defaults[head];
  if (!tail.empty()) {
    VELA_CHECK(def->is_object() && def->contains(tail), "vela train: unknown option --", path,
               " (see `vela train --help`)");
    def = &(*def)[tail];
  }
  json value;
  if (def->is_string()) {
    value = text;
  } else if (def->is_boolean()) {
    VELA_CHECK(text == "true" || text == "false" || text == "1" || text == "0", "vela train: --",
               path, " takes true or false, got '", text, "'");
    value = text == "true" || text == "1";
  } else if (def->is_array()) {
    // A list flag: a JSON array, or names separated by commas (--lora.target-modules q_proj,v_proj
    // or all-linear); a single name stays a string so keys that accept one (all-linear) get it.
    if (!text.empty() && text.front() == '[') {
      try {
        value = json::parse(text);
      } catch (const json::exception&) {
        VELA_THROW(InvalidArgument, "vela train: --", path, " expects a JSON list, got '", text,
                   "'");
      }
    } else if (text.find(',') != std::string::npos) {
      value = json::array();
      size_t start = 0;
      while (start <= text.size()) {
        size_t comma = std::min(text.find(',', start), text.size());
        std::string item = text.substr(start, comma - start);
        VELA_CHECK(!item.empty(), "vela train: --", path, " has an empty entry in '", text, "'");
        value.push_back(item);
        start = comma + 1;
      }
    } else {
      value = text;
    }
  } else {
    try {
      value = json::parse(text);
    } catch (const json::exception&) {
      VELA_THROW(InvalidArgument, "vela train: --", path, " expects a number, got '", text, "'");
    }
    VELA_CHECK(value.is_number(), "vela train: --", path, " expects a number, got '", text, "'");
  }
  if (tail.empty()) {
    cfg[head] = value;
  } else {
    if (!cfg.contains(head) || !cfg[head].is_object()) cfg[head] = json::object();
    cfg[head][tail] = value;
  }
}

bool is_bool_key(const json& defaults, const std::string& path) {
  std::string head = path, tail;
  if (auto dot = path.find('.'); dot != std::string::npos) {
    head = path.substr(0, dot);
    tail = path.substr(dot + 1);
  }
  if (!defaults.contains(head)) return false;
  const json& d = defaults[head];
  if (tail.empty()) return d.is_boolean();
  return d.is_object() && d.contains(tail) && d[tail].is_boolean();
}

}  // namespace

// Takes the launcher's flags out of argv; returns true when they ask for a launch.
bool take_launch_flags(int& argc, char** argv, dist::LaunchOptions& o) {
  bool launch = false;
  int out = 0;
  auto int_value = [&](int& i, const std::string& flag) {
    VELA_CHECK(i + 1 < argc, "vela train: ", flag, " needs a value");
    const std::string v = argv[++i];
    char* end = nullptr;
    const long x = std::strtol(v.c_str(), &end, 10);
    VELA_CHECK(end != v.c_str() && *end == '\0' && x >= 0 && x <= 65535, "vela train: ", flag,
               " expects a non-negative integer, got '", v, "'");
    return static_cast<int>(x);
  };
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    for (char& c : a)
      if (c == '_') c = '-';
    if (a == "--nproc-per-node") {
      o.nproc_per_node = int_value(i, a);
      VELA_CHECK(o.nproc_per_node >= 1, "vela train: --nproc-per-node must be >= 1");
      launch = true;
    } else if (a == "--nnodes") {
      o.nnodes = int_value(i, a);
    } else if (a == "--node-rank") {
      o.node_rank = int_value(i, a);
    } else if (a == "--master-port") {
      o.master_port = int_value(i, a);
    } else if (a == "--master-addr") {
      VELA_CHECK(i + 1 < argc, "vela train: --master-addr needs a value");
      o.master_addr = argv[++i];
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
  VELA_CHECK(launch || (o.nnodes == 1 && o.node_rank == 0 && o.master_port == 0 &&
                        o.master_addr == "127.0.0.1"),
             "vela train: --nnodes / --node-rank / --master-addr / --master-port go with "
             "--nproc-per-node (without it, set RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT)");
  return launch;
}

int cmd_train(int argc, char** argv) {
  dist::LaunchOptions launch;
  if (take_launch_flags(argc, argv, launch)) {
    launch.args = {"train"};
    for (int i = 0; i < argc; ++i) launch.args.emplace_back(argv[i]);
    return dist::launch_local_ranks(launch);
  }
  json defaults = TrainerConfig().to_json();
  // LoRA is off by default (null); its keys are still flags (--lora.r 8 turns it on).
  defaults["lora"] = LoraConfig().to_train_json();
  json cfg = json::object();
  std::string config_path;
  std::vector<std::pair<std::string, std::string>> overrides;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      print_usage(defaults);
      return 0;
    }
    VELA_CHECK(arg.rfind("--", 0) == 0, "vela train: unexpected argument '", arg,
               "' (options are --key value; see `vela train --help`)");
    arg = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (auto eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    if (arg == "config") {
      if (!has_value) {
        VELA_CHECK(i + 1 < argc, "vela train: --config needs a file");
        value = argv[++i];
      }
      config_path = value;
      continue;
    }
    std::string key = normalize(arg);
    if (!has_value && key.rfind("no_", 0) == 0 && is_bool_key(defaults, key.substr(3))) {
      overrides.emplace_back(key.substr(3), "false");
      continue;
    }
    if (!has_value && is_bool_key(defaults, key)) {
      if (i + 1 < argc && (!std::strcmp(argv[i + 1], "true") || !std::strcmp(argv[i + 1], "false")))
        value = argv[++i];
      else
        value = "true";
      has_value = true;
    }
    if (!has_value) {
      VELA_CHECK(i + 1 < argc, "vela train: --", arg, " needs a value");
      value = argv[++i];
    }
    overrides.emplace_back(key, value);
  }
  if (!config_path.empty()) {
    std::ifstream f(config_path);
    VELA_CHECK_T(IoError, f.good(), "vela train: cannot read config ", config_path);
    try {
      cfg = json::parse(f);
    } catch (const json::exception& e) {
      VELA_THROW(InvalidArgument, "vela train: ", config_path, " is not valid JSON (", e.what(),
                 ")");
    }
    VELA_CHECK(cfg.is_object(), "vela train: ", config_path, " must hold a JSON object");
  }
  for (const auto& [key, value] : overrides) set_key(cfg, defaults, key, value);
  if (cfg.empty()) {
    print_usage(defaults);
    return 1;
  }
  TrainerConfig config = TrainerConfig::from_json(cfg);
  Trainer trainer(config);
  StepMetrics last;
  try {
    last = trainer.train();
  } catch (const std::exception& e) {
    if (trainer.world_size() == 1) throw;
    // One rank of a job: report and leave at once. Unwinding would finalize MPI / close the
    // store politely, and a rank blocked in MPI_Finalize would keep the job alive until the
    // others time out; exiting makes mpirun / the store / the launcher stop the others now.
    std::fprintf(stderr, "vela train: error: %s\n", e.what());
    std::fflush(nullptr);
    std::_Exit(1);
  }
  if (trainer.rank() != 0) return 0;  // rank 0 reports for the job
  const std::string latest = latest_checkpoint(config.out_dir);
  std::printf("trained %lld steps; last loss %.4f; latest checkpoint %s\n",
              static_cast<long long>(trainer.step()), last.loss,
              latest.empty() ? "(none)" : latest.c_str());
  return 0;
}

}  // namespace vela::cli
