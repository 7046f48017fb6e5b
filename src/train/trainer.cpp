// The training loop; see trainer.h.
#include "train/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/cuda/cuda_api.h"
#include "core/error.h"
#include "core/log.h"
#include "core/parallel.h"
#include "dist/dist_env.h"
#include "train/checkpoint.h"
#include "train/optim/grad_clip.h"
#include "train/optim/muon.h"

namespace vela {
namespace fs = std::filesystem;

namespace {

DType compute_dtype(const std::string& s) { return s == "bf16" ? DType::kBF16 : DType::kF32; }


}  // namespace

Trainer::Trainer(TrainerConfig config, std::shared_ptr<dist::ProcessGroup> pg)
    : config_(std::move(config)), pg_(std::move(pg)) {
  config_.validate();
  VELA_CHECK(!config_.data.path.empty(),
             "train config: data.path is required (a directory written by `vela preprocess`)");
  if (config_.threads > 0) set_num_threads(config_.threads);
  Device device = Device::parse(config_.device);
  if (!pg_) {
    const dist::DistOptions o = dist::dist_options_from_env();
    // One GPU per rank: "cuda" means this rank's local GPU.
    if (o.world_size > 1 && config_.device == "cuda") {
      device = Device::cuda(o.local_rank);
      config_.device = device.str();
    }
    pg_ = dist::make_process_group(o, device);
  }
  VELA_CHECK(pg_->world_size() == 1 || pg_->device() == device, "train: the process group is on ",
             pg_->device().str(), " but the model on ", device.str());
  const DType dtype = compute_dtype(config_.dtype);
  join_job();
  if (config_.resume) resume_dir_ = latest_checkpoint(config_.out_dir);
  if (!resume_dir_.empty() && !config_.train.lora) {
    // The checkpoint's own config.json defines the architecture; its weights are loaded in init().
    model_ = std::make_unique<Transformer>(Transformer::load(resume_dir_, dtype, device));
  } else if (!config_.init_from.empty()) {
    if (config_.verify_checkpoints && verify_checkpoint(config_.init_from))
      VELA_LOG_INFO("[train] ", config_.init_from, ": checksums verified");
    model_ = std::make_unique<Transformer>(Transformer::load(config_.init_from, dtype, device));
  } else {
    ModelConfig mc = resolve_model_config(config_.model);
    model_ = std::make_unique<Transformer>(
        Transformer::random(mc, dtype, device, config_.seed, static_cast<float>(config_.init_std)));
  }
  data_ = make_datasets(config_.data);
  model_from_config_ = true;
  init(!resume_dir_.empty());
}

Trainer::Trainer(TrainerConfig config, std::unique_ptr<Transformer> model, DatasetSplit data)
    : config_(std::move(config)), model_(std::move(model)), data_(std::move(data)) {
  config_.validate();
  VELA_CHECK(model_ != nullptr && data_.train != nullptr, "Trainer: a model and data are required");
  if (config_.threads > 0) set_num_threads(config_.threads);
  pg_ = dist::make_local_process_group(model_->device());
  join_job();
  if (config_.resume) resume_dir_ = latest_checkpoint(config_.out_dir);
  init(!resume_dir_.empty());
}

void Trainer::join_job() {
  const int world = pg_->world_size();
  if (world > 1) {
    VELA_CHECK(config_.data.world_size == 1 || config_.data.world_size == world,
               "train config: data.world_size ", config_.data.world_size, " but the job has ",
               world, " ranks (leave data.rank / data.world_size out: the job sets them)");
    VELA_CHECK(config_.effective_strategy() != "grpo",
               "train: grpo does not run data parallel yet (its rollouts are per process); use "
               "one process");
    config_.data.rank = pg_->rank();
    config_.data.world_size = world;
  }
  // Debris of an earlier killed run: cleaned by rank 0 while the others wait, so every rank then
  // sees the same published checkpoints.
  if (pg_->rank() == 0) recover_checkpoints(config_.out_dir);
  pg_->barrier();
}

void Trainer::maybe_die_for_test() const {
  // VELA_DIST_TEST_DIE=<rank>:<step>[:kill]: that rank ends itself after that optimizer step
  // (tests of the failure handling).
  const char* spec = std::getenv("VELA_DIST_TEST_DIE");
  if (spec == nullptr || *spec == '\0') return;
  int r = -1;
  long long s = -1;
  if (std::sscanf(spec, "%d:%lld", &r, &s) != 2 || r != pg_->rank() || s != step_) return;
  VELA_LOG_WARN("[train] VELA_DIST_TEST_DIE=", spec, ": rank ", r, " dies after step ", s);
  std::fflush(nullptr);
  if (std::strstr(spec, ":kill") != nullptr) ::kill(::getpid(), SIGKILL);
  ::_exit(3);
}

Trainer::~Trainer() = default;

void Trainer::init(bool from_checkpoint) {
  VELA_CHECK(model_->config.vocab_size > 0, "Trainer: model has no vocabulary");
  json state;
  if (from_checkpoint && !config_.train.lora) {
    // Weights first: load_weights replaces the model's tensors, and the parameters and the
    // optimizer's master copies must alias the loaded ones.
    VELA_LOG_INFO("[train] resuming from ", resume_dir_);
    state = load_training_checkpoint(resume_dir_, *model_, config_.verify_checkpoints);
  }
  TrainOptions to = config_.train;
  to.lora_seed = config_.seed;
  trainable_ = std::make_unique<TrainableModel>(*model_, to);
  if (config_.train.lora) {
    int64_t n = 0;
    for (const Parameter& p : trainable_->parameters()) n += p.value.numel();
    VELA_LOG_INFO("[train] LoRA r=", config_.train.lora_config.r,
                  " alpha=", config_.train.lora_config.alpha, " on ",
                  json(config_.train.lora_config.target_modules).dump(), ": ", n,
                  " trainable parameters (",
                  100.0 * static_cast<double>(n) / static_cast<double>(model_->config.n_params()),
                  "% of the frozen base's ", model_->config.n_params(), ")");
  }
  if (from_checkpoint && config_.train.lora) {
    // LoRA: the base came from init_from / model as at the start; the checkpoint holds the adapter.
    VELA_LOG_INFO("[train] resuming the LoRA adapter from ", resume_dir_);
    if (config_.verify_checkpoints) verify_checkpoint(resume_dir_);
    load_lora_into(*model_, config_.train.lora_config, resume_dir_);
    state = read_trainer_state(resume_dir_);
  }
  strategy_ = make_strategy(config_);
  VELA_CHECK(data_.train->state().at("kind").get<std::string>() == strategy_->data_kind() ||
                 (std::string(strategy_->name()) == "seq" &&
                  data_.train->state().at("kind").get<std::string>() == "sft"),
             "train config: strategy '", strategy_->name(), "' trains on data.kind '",
             strategy_->data_kind(), "', the dataset is '",
             data_.train->state().at("kind").get<std::string>(), "'");
  // A group of one with a real backend (VELA_DIST_BACKEND) still runs the data-parallel path:
  // how a single GPU checks the NCCL backend.
  if (pg_->world_size() > 1 || std::string(pg_->backend()) != "local") {
    dp_ = std::make_unique<DataParallel>(pg_, trainable_->parameters(), config_.data_parallel,
                                         trainable_->backward_order());
    trainable_->set_grad_ready_hook([this](const std::vector<size_t>& p) { dp_->grads_ready(p); });
    dp_->broadcast_parameters();  // every rank starts from rank 0's bits
  }
  ParameterList& opt_params = dp_ ? dp_->optimizer_params() : trainable_->parameters();
  optimizer_ = make_optimizer(config_.optimizer, opt_params);
  if (auto* muon = dynamic_cast<Muon*>(optimizer_.get())) {
    // Orthogonalize fused weights per logical matrix (as Muon on the HF layout would).
    const ModelConfig& mc = model_->config;
    for (const Parameter& p : opt_params) {
      if (p.kind != ParamKind::kMatrix) continue;
      if (p.name.find("qkv_proj.weight") != std::string::npos)
        muon->set_row_blocks(p.name, {mc.q_dim(), mc.kv_dim(), mc.kv_dim()});
      else if (p.name.find("gate_up_proj.weight") != std::string::npos)
        muon->set_row_blocks(p.name, {mc.intermediate_size, mc.intermediate_size});
    }
  }
  const int64_t bpe = data_.train->batches_per_epoch();
  VELA_CHECK(bpe >= 1, "Trainer: the training data yields no batch");
  total_steps_ = config_.max_steps > 0
                     ? config_.max_steps
                     : std::max<int64_t>(1, config_.epochs * bpe / config_.grad_accum);
  LrScheduleConfig sc = config_.schedule;
  if (sc.total_steps == 0) sc.total_steps = total_steps_;
  if (sc.kind == "cosine" || sc.kind == "wsd")
    sc.warmup_steps = std::min(sc.warmup_steps, sc.total_steps - 1);
  schedule_ = std::make_unique<LrSchedule>(sc);
  rng_ = Rng(config_.seed, /*stream=*/0x7472);

  if (from_checkpoint) {
    load_optimizer_state(resume_dir_, *optimizer_);
    restore(state);
    resumed_from_ = step_;
    last_saved_step_ = step_;
  }
  strategy_->attach(*this);
  if (from_checkpoint && state.contains("strategy_state"))
    strategy_->restore(state["strategy_state"]);
  if (pg_->rank() != 0) return;  // rank 0 alone reports progress and writes metrics
  if (config_.progress) add_callback(std::make_unique<ProgressCallback>(config_.log_every));
  fs::create_directories(config_.out_dir);
  auto metrics =
      std::make_unique<MetricsCallback>((fs::path(config_.out_dir) / "metrics.jsonl").string(),
                                        config_.log_every, from_checkpoint ? step_ : -1);
  metrics_ = metrics.get();
  add_callback(std::move(metrics));
}

void Trainer::add_callback(std::unique_ptr<Callback> callback) {
  callbacks_.push_back(std::move(callback));
}

json Trainer::trainer_state() const {
  return json{
      {"step", step_},
      {"total_steps", total_steps_},
      {"epoch", epoch_},
      {"schedule", schedule_->state()},
      {"data", data_.train->state()},
      {"rng", {{"seed", rng_.seed()}, {"stream", rng_.stream()}, {"offset", rng_.offset()}}},
      {"optimizer_kind", optimizer_->kind()},
      {"dtype", config_.dtype},
      {"strategy", strategy_->name()},
      {"strategy_state", strategy_->state()},
      {"config", config_.to_json()}};
}

void Trainer::restore(const json& state) {
  try {
    step_ = state.at("step").get<int64_t>();
    epoch_ = state.value("epoch", int64_t{-1});
    schedule_->load_state(state.at("schedule"));
    data_.train->restore(state.at("data"));
    const json& r = state.at("rng");
    rng_ = Rng(r.at("seed").get<uint64_t>(), r.at("stream").get<uint64_t>());
    rng_.set_offset(r.at("offset").get<uint64_t>());
  } catch (const json::exception& e) {
    VELA_THROW(InvalidArgument, "checkpoint ", resume_dir_, ": trainer_state.json is incomplete (",
               e.what(), ")");
  }
  VELA_CHECK(schedule_->step() == step_, "checkpoint ", resume_dir_, ": schedule step ",
             schedule_->step(), " != trainer step ", step_);
  VELA_CHECK(optimizer_->step_count() <= step_, "checkpoint ", resume_dir_,
             ": optimizer has taken more steps than the trainer");
}

double Trainer::flops_per_token() const {
  // ../shared/TARGETS.md's MFU convention (PaLM appendix B): 6 x params (every parameter, the
  // input embedding included) + 12 x n_layers x hidden x seq_len for attention's QK^T and PV
  // (forward + backward, counted without the causal half).
  const ModelConfig& c = model_->config;
  const double attn = 12.0 * static_cast<double>(c.n_layers * c.hidden_size) *
                      static_cast<double>(data_.train->seq_len());
  return 6.0 * static_cast<double>(c.n_active_params()) + attn;  // MoE: the routed experts only
}

StepMetrics Trainer::train_step() {
  const auto t0 = std::chrono::steady_clock::now();
  trainable_->zero_grad();
  std::vector<TrainBatch> micro;
  int64_t n_targets = 0, n_tokens = 0;
  const int64_t n_draw = strategy_->draws_data(*this) ? config_.grad_accum : 0;
  for (int64_t i = 0; i < n_draw; ++i) {
    const int64_t e = data_.train->epoch();
    if (e != epoch_) {
      if (epoch_ >= 0)
        for (auto& cb : callbacks_) cb->on_epoch_end(*this, epoch_);
      epoch_ = e;
      for (auto& cb : callbacks_) cb->on_epoch_begin(*this, epoch_);
    }
    micro.push_back(data_.train->next_batch());
  }
  strategy_->prepare_step(*this, micro);
  std::vector<int64_t> units(micro.size());
  for (size_t i = 0; i < micro.size(); ++i) {
    units[i] = strategy_->loss_units(micro[i]);
    n_targets += units[i];
    n_tokens += micro[i].ids.defined() ? micro[i].ids.numel() : 0;
  }
  if (dp_) {
    // Every rank scales by the GLOBAL count, so the summed gradient is the global mean's.
    const std::vector<double> g =
        pg_->all_reduce_host({static_cast<double>(n_targets), static_cast<double>(n_tokens)});
    n_targets = static_cast<int64_t>(g[0]);
    n_tokens = static_cast<int64_t>(g[1]);
  }
  double loss_sum = 0;
  for (size_t k = 0; k < micro.size(); ++k) {
    const auto i = static_cast<int64_t>(k);
    if (dp_ && k + 1 == micro.size()) dp_->arm();  // only the last micro-batch communicates
    for (auto& cb : callbacks_) cb->on_batch_begin(*this, i);
    const int64_t n_i = units[k];
    const float scale = n_targets > 0 ? static_cast<float>(n_i) / static_cast<float>(n_targets) : 0;
    // LoRA dropout masks: a function of (seed, step, micro-batch), so a resumed run draws the same.
    trainable_->set_lora_dropout_seed(config_.seed ^ (static_cast<uint64_t>(step_) << 20) ^
                                      static_cast<uint64_t>(k));
    MicroLoss s = n_i > 0 ? strategy_->forward_backward(*trainable_, micro[k], scale) : MicroLoss{};
    loss_sum += s.loss_sum;
    const double mean = s.n_units > 0 ? s.loss_sum / static_cast<double>(s.n_units) : 0.0;
    for (auto& cb : callbacks_) cb->on_batch_end(*this, i, mean);
  }
  using Clock = std::chrono::steady_clock;
  const auto t_backward = Clock::now();
  if (dp_) {
    // What the backward did not hide of the gradient buckets' communication.
    dp_->finish_gradients();
    loss_sum = pg_->all_reduce_host({loss_sum})[0];
  }
  const auto t_fwd_bwd = Clock::now();  // the loss read-back waits for the device
  StepMetrics m;
  // The norm's read-back is the step's one wait for the device after backward: the clip phase
  // includes the reduction and the scaling.
  m.grad_norm = dp_ ? dp_->clip_grad_norm(config_.max_grad_norm)
                    : clip_grad_norm(trainable_->parameters(), config_.max_grad_norm);
  const auto t_clip = Clock::now();
  for (auto& cb : callbacks_) cb->before_optimizer_step(*this);
  m.lr = schedule_->lr();
  if (std::isfinite(m.grad_norm)) {
    optimizer_->step(m.lr);
    if (dp_) dp_->after_optimizer_step();  // ZeRO-1: everyone gets the updated weights
  } else {
    m.skipped = true;
    VELA_LOG_WARN("[train] step ", step_ + 1, ": non-finite gradient norm, update skipped");
  }
  // A CUDA optimizer step only launches kernels; when the phase times are logged, wait for them so
  // the optimizer time is not billed to the next step's forward pass.
  const bool log_phases = log_level() <= LogLevel::kDebug;
  if (log_phases && !trainable_->parameters().empty()) {
    const Device d = trainable_->parameters()[0].value.device();
    if (d.is_cuda()) cuda::synchronize(d.index);
  }
  const auto t_opt = Clock::now();
  VELA_LOG_DEBUG("[train] step ", step_ + 1, " phases: data + forward/backward ",
                 std::chrono::duration<double>(t_backward - t0).count(), " s, gradient sync wait ",
                 std::chrono::duration<double>(t_fwd_bwd - t_backward).count(), " s, clip ",
                 std::chrono::duration<double>(t_clip - t_fwd_bwd).count(), " s, optimizer ",
                 std::chrono::duration<double>(t_opt - t_clip).count(), " s");
  schedule_->advance();
  ++step_;
  m.step = step_;
  m.epoch = epoch_;
  m.loss = n_targets > 0 ? loss_sum / static_cast<double>(n_targets) : 0.0;
  m.n_tokens = n_tokens;
  m.n_target_tokens = n_targets;
  m.step_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  m.tokens_per_second = m.step_seconds > 0 ? n_tokens / m.step_seconds : 0;
  m.extra = strategy_->step_metrics();
  const json moe_metrics = trainable_->take_moe_metrics();  // MoE: router losses, expert loads
  for (const auto& [k, v] : moe_metrics.items()) m.extra[k] = v;
  for (auto& cb : callbacks_) cb->after_optimizer_step(*this, m);
  return m;
}

double Trainer::validate() {
  Dataset* val = data_.validation.get();
  if (val == nullptr) return std::nan("");
  int64_t n = val->batches_per_epoch();
  if (config_.eval_batches > 0) n = std::min(n, config_.eval_batches);
  double loss_sum = 0;
  int64_t n_targets = 0;
  // Each rank scores its own rows of every validation batch (the validation set is split over the
  // ranks like the training set); the sums then cover the whole set.
  for (int64_t i = 0; i < n; ++i) {
    MicroLoss s = strategy_->evaluate(*trainable_, val->batch(0, i));
    loss_sum += s.loss_sum;
    n_targets += s.n_units;
  }
  if (dp_) {
    const std::vector<double> g = pg_->all_reduce_host({loss_sum, static_cast<double>(n_targets)});
    loss_sum = g[0];
    n_targets = static_cast<int64_t>(g[1]);
  }
  const double loss = n_targets > 0 ? loss_sum / static_cast<double>(n_targets) : std::nan("");
  for (auto& cb : callbacks_) cb->on_validation(*this, step_, loss);
  return loss;
}

std::vector<std::string> Trainer::tokenizer_files() const {
  std::string dir = config_.tokenizer;
  if (dir.empty()) {
    // The tokenizer `vela preprocess` recorded in the data's index.
    std::ifstream f(fs::path(config_.data.path) / "index.json");
    if (f.good()) {
      try {
        json ix = json::parse(f);
        if (ix.contains("tokenizer") && ix["tokenizer"].contains("path"))
          dir = ix["tokenizer"]["path"].get<std::string>();
      } catch (const json::exception&) {
      }
    }
  }
  std::vector<std::string> out;
  if (dir.empty()) return out;
  fs::path d(dir);
  if (fs::is_regular_file(d)) d = d.parent_path();
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                           "generation_config.json"}) {
    if (fs::is_regular_file(d / name)) out.push_back((d / name).string());
  }
  if (out.empty()) VELA_LOG_WARN("[train] no tokenizer files in ", d.string());
  return out;
}

std::string Trainer::save_checkpoint() {
  CheckpointPayload p;
  p.model = model_.get();
  if (config_.train.lora) {
    const std::string base = !config_.init_from.empty() ? config_.init_from : config_.model;
    p.write_model = [this, base](const std::string& staging) {
      write_lora_files(*model_, config_.train.lora_config, staging, base);
    };
  }
  p.optimizer = optimizer_.get();
  p.trainer_state = trainer_state();
  p.extra_files = tokenizer_files();
  const int world = pg_->world_size();
  const bool sharded = dp_ && dp_->zero();
  std::string path = (fs::path(config_.out_dir) / checkpoint_name(step_)).string();
  if (pg_->rank() == 0) {
    if (sharded) {
      // Every rank's optimizer shard goes into rank 0's staging directory (a shared out_dir), so
      // the checkpoint is published whole, by one rename, or not at all.
      p.optimizer_file = optimizer_shard_name(0, world);
      p.write_more = [this, world](const std::string& staging) {
        pg_->broadcast_host(staging, 0);
        pg_->barrier();  // the other shards are written
        write_optimizer_shard_index(staging, world);
      };
    }
    path = save_training_checkpoint(config_.out_dir, p);
    prune_checkpoints(config_.out_dir, config_.keep_last);
  } else if (sharded) {
    const std::string staging = pg_->broadcast_host("", 0);
    optimizer_->save_state((fs::path(staging) / optimizer_shard_name(pg_->rank(), world)).string());
    pg_->barrier();
  }
  if (world > 1) pg_->barrier();  // published (or failed) before any rank moves on
  last_saved_step_ = step_;
  for (auto& cb : callbacks_) cb->on_checkpoint(*this, step_, path);
  return path;
}

StepMetrics Trainer::train() {
  VELA_CHECK(!trained_, "Trainer::train() may run once");
  trained_ = true;
  StepMetrics last;
  try {
    if (pg_->rank() == 0) {
      std::ofstream cfg(fs::path(config_.out_dir) / "train_config.json");
      cfg << config_.to_json().dump(2) << "\n";
    }
    for (auto& cb : callbacks_) cb->on_train_begin(*this);
    if (epoch_ >= 0 && data_.train->epoch() == epoch_)  // resumed inside an epoch
      for (auto& cb : callbacks_) cb->on_epoch_begin(*this, epoch_);
    while (step_ < total_steps_) {
      last = train_step();
      maybe_die_for_test();
      if (config_.eval_every > 0 && step_ % config_.eval_every == 0) validate();
      if (config_.save_every > 0 && step_ % config_.save_every == 0) save_checkpoint();
    }
    if (epoch_ >= 0 && data_.train->epoch() != epoch_)  // the last step finished an epoch
      for (auto& cb : callbacks_) cb->on_epoch_end(*this, epoch_);
    if (config_.eval_every == 0 || step_ % config_.eval_every != 0) {
      if (data_.validation) validate();
    }
    if (config_.save_final && last_saved_step_ != step_) save_checkpoint();
    for (auto& cb : callbacks_) cb->on_train_end(*this);
  } catch (const std::exception& e) {
    for (auto& cb : callbacks_) {
      try {
        cb->on_error(*this, e.what());
      } catch (...) {
      }
    }
    throw;
  }
  return last;
}

}  // namespace vela
