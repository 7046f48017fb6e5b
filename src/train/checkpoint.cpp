// Crash-safe checkpoint publication and training checkpoint contents; see checkpoint.h.
#include "train/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include "core/error.h"
#include "core/log.h"
#include "core/sha256.h"
#include "model/weights.h"

namespace vela {
namespace fs = std::filesystem;
namespace {

constexpr const char* kManifest = "manifest.json";
constexpr const char* kTrainerState = "trainer_state.json";
constexpr const char* kOptimizer = "optimizer.safetensors";
constexpr const char* kOptimizerIndex = "optimizer.safetensors.index.json";

// ---- test hook ----
std::atomic<int> g_event{0};

void publication_event(const char* what) {
  const char* spec = std::getenv("VELA_CHECKPOINT_ABORT_AT");
  if (spec == nullptr || *spec == '\0') return;
  const int at = std::atoi(spec);
  if (++g_event != at) return;
  VELA_LOG_WARN("[checkpoint] VELA_CHECKPOINT_ABORT_AT=", spec, ": dying at event ", at, " (", what,
                ")");
  if (std::strstr(spec, ":kill") != nullptr) ::kill(::getpid(), SIGKILL);
  ::_exit(86);
}

void fsync_path(const std::string& path, bool is_dir) {
  int fd = ::open(path.c_str(), is_dir ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  VELA_CHECK_T(IoError, fd >= 0, "cannot open ", path, " to fsync it: ", std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  VELA_CHECK_T(IoError, rc == 0, "fsync of ", path, " failed: ", std::strerror(err));
}

void rename_path(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  VELA_CHECK_T(IoError, !ec, "cannot rename ", from.string(), " to ", to.string(), ": ",
               ec.message());
}

void write_text_file(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  VELA_CHECK_T(IoError, f.good(), "cannot create ", path.string());
  f << text;
  f.close();
  VELA_CHECK_T(IoError, f.good(), "write to ", path.string(), " failed (disk full?)");
}

bool pid_alive(long pid) {
  return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

const std::regex& step_re() {
  static const std::regex re("step-([0-9]+)");
  return re;
}

}  // namespace

json CheckpointManifest::to_json() const {
  json f = json::object();
  for (const auto& [name, e] : files) f[name] = json{{"sha256", e.sha256}, {"bytes", e.bytes}};
  return json{{"format_version", format_version}, {"step", step}, {"files", f}};
}

CheckpointManifest CheckpointManifest::from_json(const json& j, const std::string& source) {
  CheckpointManifest m;
  try {
    m.format_version = j.at("format_version").get<int>();
    VELA_CHECK_T(IoError, m.format_version >= 1 && m.format_version <= kCheckpointFormatVersion,
                 source, ": manifest format_version ", m.format_version,
                 " is not supported (this vela reads 1..", kCheckpointFormatVersion, ")");
    m.step = j.at("step").get<int64_t>();
    for (const auto& [name, e] : j.at("files").items()) {
      VELA_CHECK_T(IoError, name.find('/') == std::string::npos && name != ".." && name != ".",
                   source, ": manifest file name '", name, "' is not a plain file name");
      m.files[name] =
          ManifestEntry{e.at("sha256").get<std::string>(), e.at("bytes").get<uint64_t>()};
    }
  } catch (const json::exception& e) {
    VELA_THROW(IoError, source, ": malformed checkpoint manifest (", e.what(), ")");
  }
  return m;
}

std::string checkpoint_name(int64_t step) {
  VELA_CHECK(step >= 0, "checkpoint step must be >= 0, got ", step);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step-%08lld", static_cast<long long>(step));
  return buf;
}

std::string publish_checkpoint(const std::string& out_dir, int64_t step,
                               const std::function<void(const std::string&)>& write_files) {
  const std::string name = checkpoint_name(step);
  const fs::path root(out_dir);
  std::error_code ec;
  fs::create_directories(root, ec);
  VELA_CHECK_T(IoError, !ec, "cannot create checkpoint directory ", out_dir, ": ", ec.message());
  g_event = 0;  // the test hook counts events within one publication
  const fs::path staging = root / ("." + name + ".staging-" + std::to_string(::getpid()));
  const fs::path target = root / name;
  fs::remove_all(staging, ec);
  fs::create_directory(staging, ec);
  VELA_CHECK_T(IoError, !ec, "cannot create staging directory ", staging.string(), ": ",
               ec.message());
  try {
    write_files(staging.string());
    CheckpointManifest manifest;
    manifest.step = step;
    std::vector<fs::path> payload;
    for (const fs::directory_entry& e : fs::directory_iterator(staging))
      payload.push_back(e.path());
    std::sort(payload.begin(), payload.end());
    for (const fs::path& p : payload) {
      const std::string file = p.filename().string();
      VELA_CHECK_T(IoError, fs::is_regular_file(p), "checkpoint payload ", p.string(),
                   " is not a regular file (payloads are flat)");
      VELA_CHECK_T(IoError, file != kManifest, "checkpoint payload must not write ", kManifest);
      fsync_path(p.string(), false);
      ManifestEntry entry;
      entry.sha256 = sha256_file(p.string(), &entry.bytes);
      manifest.files[file] = entry;
      publication_event("payload file fsync'd");
    }
    const fs::path manifest_path = staging / kManifest;
    write_text_file(manifest_path, manifest.to_json().dump(2) + "\n");
    fsync_path(manifest_path.string(), false);
    publication_event("manifest written");
    fsync_path(staging.string(), true);
    publication_event("staging directory fsync'd");
  } catch (...) {
    fs::remove_all(staging, ec);
    throw;
  }

  fs::path retired;
  if (fs::exists(target)) {
    static std::atomic<int> n_retired{0};
    retired = root / ("." + name + ".retired-" + std::to_string(::getpid()) + "-" +
                      std::to_string(n_retired.fetch_add(1)));
    rename_path(target, retired);
    fsync_path(root.string(), true);
    publication_event("old step retired");
  }
  rename_path(staging, target);
  fsync_path(root.string(), true);
  publication_event("published");
  if (!retired.empty()) {
    fs::remove_all(retired, ec);
    if (ec) VELA_LOG_WARN("[checkpoint] could not remove ", retired.string(), ": ", ec.message());
    publication_event("retired removed");
  }
  VELA_LOG_INFO("[checkpoint] published ", target.string());
  return target.string();
}

bool read_manifest(const std::string& dir, CheckpointManifest* out) {
  const fs::path path = fs::path(dir) / kManifest;
  if (!fs::exists(path)) return false;
  std::ifstream f(path);
  VELA_CHECK_T(IoError, f.good(), "cannot read ", path.string());
  json j;
  try {
    j = json::parse(f);
  } catch (const json::exception& e) {
    VELA_THROW(IoError, path.string(), " is not valid JSON (", e.what(), ")");
  }
  *out = CheckpointManifest::from_json(j, path.string());
  return true;
}

bool verify_checkpoint(const std::string& dir) {
  CheckpointManifest m;
  if (!read_manifest(dir, &m)) return false;
  for (const auto& [name, entry] : m.files) {
    const fs::path p = fs::path(dir) / name;
    VELA_CHECK_T(IoError, fs::is_regular_file(p), "checkpoint ", dir, ": file ", name,
                 " listed in the manifest is missing");
    uint64_t bytes = 0;
    const std::string sum = sha256_file(p.string(), &bytes);
    VELA_CHECK_T(IoError, bytes == entry.bytes, "checkpoint ", dir, ": ", name, " has ", bytes,
                 " bytes, the manifest says ", entry.bytes);
    VELA_CHECK_T(IoError, sum == entry.sha256, "checkpoint ", dir, ": ", name,
                 " fails its sha256 check (", sum, " != ", entry.sha256, ")");
  }
  return true;
}

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& out_dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  if (!fs::is_directory(out_dir, ec)) return out;
  for (const fs::directory_entry& e : fs::directory_iterator(out_dir, ec)) {
    const std::string file = e.path().filename().string();
    std::smatch m;
    if (!e.is_directory() || !std::regex_match(file, m, step_re())) continue;
    out.emplace_back(std::stoll(m[1].str()), e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string latest_checkpoint(const std::string& out_dir) {
  auto all = list_checkpoints(out_dir);
  return all.empty() ? std::string() : all.back().second;
}

void prune_checkpoints(const std::string& out_dir, int64_t keep) {
  if (keep <= 0) return;
  auto all = list_checkpoints(out_dir);
  for (size_t i = 0; i + static_cast<size_t>(keep) < all.size(); ++i) {
    const fs::path p(all[i].second);
    const fs::path hidden =
        p.parent_path() / ("." + p.filename().string() + ".pruned-" + std::to_string(::getpid()));
    rename_path(p, hidden);
    std::error_code ec;
    fs::remove_all(hidden, ec);
    if (ec) VELA_LOG_WARN("[checkpoint] could not remove ", hidden.string(), ": ", ec.message());
  }
}

void recover_checkpoints(const std::string& out_dir) {
  std::error_code ec;
  if (!fs::is_directory(out_dir, ec)) return;
  static const std::regex staging_re("\\.(step-[0-9]+)\\.staging-([0-9]+)");
  static const std::regex retired_re("\\.(step-[0-9]+)\\.retired-([0-9]+)-[0-9]+");
  static const std::regex pruned_re("\\.step-[0-9]+\\.pruned-[0-9]+");
  std::vector<fs::path> entries;
  for (const fs::directory_entry& e : fs::directory_iterator(out_dir, ec))
    entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  for (const fs::path& p : entries) {
    const std::string file = p.filename().string();
    std::smatch m;
    if (std::regex_match(file, m, pruned_re)) {
      fs::remove_all(p, ec);  // an interrupted pruning
    } else if (std::regex_match(file, m, staging_re)) {
      const long pid = std::stol(m[2].str());
      if (pid != ::getpid() && pid_alive(pid)) continue;  // another live writer
      VELA_LOG_INFO("[checkpoint] removing unfinished staging directory ", p.string());
      fs::remove_all(p, ec);
    } else if (std::regex_match(file, m, retired_re)) {
      const long pid = std::stol(m[2].str());
      if (pid != ::getpid() && pid_alive(pid)) continue;
      const fs::path target = fs::path(out_dir) / m[1].str();
      if (fs::exists(target)) {
        fs::remove_all(p, ec);
      } else {
        VELA_LOG_WARN("[checkpoint] restoring ", target.string(),
                      " (its re-publication was interrupted)");
        rename_path(p, target);
        fsync_path(out_dir, true);
      }
    }
  }
}

std::string save_training_checkpoint(const std::string& out_dir, const CheckpointPayload& payload) {
  VELA_CHECK(payload.model != nullptr || payload.write_model, "save_training_checkpoint: no model");
  VELA_CHECK(
      payload.trainer_state.contains("step") && payload.trainer_state["step"].is_number_integer(),
      "save_training_checkpoint: trainer_state needs an integer \"step\"");
  const int64_t step = payload.trainer_state["step"].get<int64_t>();
  return publish_checkpoint(out_dir, step, [&](const std::string& staging) {
    if (payload.write_model)
      payload.write_model(staging);
    else
      save_model(*payload.model, staging);
    if (payload.optimizer != nullptr)
      payload.optimizer->save_state((fs::path(staging) / payload.optimizer_file).string());
    write_text_file(fs::path(staging) / kTrainerState, payload.trainer_state.dump(2) + "\n");
    for (const std::string& extra : payload.extra_files) {
      const fs::path src(extra);
      const fs::path dst = fs::path(staging) / src.filename();
      VELA_CHECK_T(IoError, !fs::exists(dst), "extra checkpoint file ", extra, " would overwrite ",
                   dst.filename().string());
      std::error_code ec;
      fs::copy_file(src, dst, ec);
      VELA_CHECK_T(IoError, !ec, "cannot copy ", extra, " into the checkpoint: ", ec.message());
    }
    if (payload.write_more) payload.write_more(staging);
  });
}

json load_training_checkpoint(const std::string& dir, Transformer& model, bool verify) {
  VELA_CHECK_T(IoError, fs::is_directory(dir), "checkpoint ", dir, " is not a directory");
  if (verify) {
    if (verify_checkpoint(dir)) {
      VELA_LOG_INFO("[checkpoint] ", dir, ": every file matches its sha256");
    } else {
      VELA_LOG_WARN("[checkpoint] ", dir, " has no manifest; loading without verification");
    }
  }
  SafetensorsReader reader = SafetensorsReader::open(dir);
  load_weights(model, reader, model.dtype(), model.device());
  return read_trainer_state(dir);
}

std::string optimizer_shard_name(int rank, int world_size) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "optimizer-%05d-of-%05d.safetensors", rank, world_size);
  return buf;
}

void write_optimizer_shard_index(const std::string& staging_dir, int world_size) {
  json weight_map = json::object();
  for (int r = 0; r < world_size; ++r) {
    const std::string file = optimizer_shard_name(r, world_size);
    const fs::path path = fs::path(staging_dir) / file;
    VELA_CHECK_T(IoError, fs::is_regular_file(path), "optimizer shard ", path.string(),
                 " is missing (did rank ", r, " write it into the shared out_dir?)");
    for (const std::string& name : SafetensorsReader::open(path.string()).names())
      weight_map[name] = file;
  }
  json index = {{"metadata", {{"world_size", world_size}, {"zero", 1}}},
                {"weight_map", weight_map}};
  write_text_file(fs::path(staging_dir) / kOptimizerIndex, index.dump(2) + "\n");
}

void load_optimizer_state(const std::string& dir, Optimizer& optimizer) {
  const fs::path index = fs::path(dir) / kOptimizerIndex;
  if (fs::exists(index)) {
    optimizer.load_state(index.string());
    return;
  }
  const fs::path opt = fs::path(dir) / kOptimizer;
  VELA_CHECK_T(IoError, fs::exists(opt), "checkpoint ", dir, " has no ", kOptimizer,
               " (a model-only directory cannot resume training; use it as init_from)");
  optimizer.load_state(opt.string());
}

json read_trainer_state(const std::string& dir) {
  const fs::path state_path = fs::path(dir) / kTrainerState;
  if (!fs::exists(state_path)) return json::object();
  std::ifstream f(state_path);
  try {
    return json::parse(f);
  } catch (const json::exception& e) {
    VELA_THROW(IoError, state_path.string(), " is not valid JSON (", e.what(), ")");
  }
}

}  // namespace vela
