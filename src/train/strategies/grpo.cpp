// grpo strategy: rollouts, group advantages, the clipped per-token objective; see grpo.h.
#include "train/strategies/grpo.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/log.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"
#include "train/data/shard_reader.h"
#include "train/rl/reward.h"
#include "train/rl/weight_push.h"
#include "train/trainable_model.h"
#include "train/trainer.h"

namespace vela {
namespace fs = std::filesystem;

namespace {

// After every optimizer step: the engine sees the new weights under a new version.
class WeightPushCallback final : public Callback {
 public:
  explicit WeightPushCallback(GrpoStrategy& s) : s_(s) {}
  void after_optimizer_step(Trainer& t, const StepMetrics&) override { s_.after_optimizer_step(t); }

 private:
  GrpoStrategy& s_;
};

json read_index(const std::string& dir) {
  std::ifstream f(fs::path(dir) / "index.json");
  VELA_CHECK_T(IoError, f.good(), "grpo: cannot read ", dir, "/index.json");
  return json::parse(f);
}

std::vector<std::string> read_answers(const std::string& dir, int64_t n_expected) {
  const fs::path p = fs::path(dir) / "answers.jsonl";
  std::ifstream f(p);
  VELA_CHECK_T(IoError, f.good(), "grpo: the prompt data '", dir,
               "' has no answers.jsonl (preprocess it with format \"prompt\")");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(f, line)) {
    try {
      out.push_back(json::parse(line).get<std::string>());
    } catch (const json::exception& e) {
      VELA_THROW(InvalidArgument, p.string(), ":", out.size() + 1, ": not a JSON string (",
                 e.what(), ")");
    }
  }
  VELA_CHECK(static_cast<int64_t>(out.size()) == n_expected, p.string(), " holds ", out.size(),
             " answers for ", n_expected, " prompts");
  return out;
}

}  // namespace

std::vector<double> group_advantages(const std::vector<double>& rewards, int64_t group_size,
                                     bool scale_by_std) {
  VELA_CHECK(group_size >= 2 && rewards.size() % static_cast<size_t>(group_size) == 0,
             "group_advantages: ", rewards.size(), " rewards in groups of ", group_size);
  std::vector<double> a(rewards.size());
  const auto g = static_cast<size_t>(group_size);
  for (size_t b = 0; b < rewards.size(); b += g) {
    double mean = 0;
    for (size_t i = b; i < b + g; ++i) mean += rewards[i];
    mean /= static_cast<double>(g);
    double var = 0;
    for (size_t i = b; i < b + g; ++i) var += (rewards[i] - mean) * (rewards[i] - mean);
    const double sd = std::sqrt(var / static_cast<double>(g - 1));  // unbiased, as torch.std
    for (size_t i = b; i < b + g; ++i)
      a[i] = scale_by_std ? (rewards[i] - mean) / (sd + 1e-4) : rewards[i] - mean;
  }
  return a;
}

GrpoTokenLoss grpo_token_loss(const GrpoConfig& c, double logp, double behaviour_logp,
                              double advantage, double ref_logp) {
  GrpoTokenLoss r;
  const double rho = std::exp(logp - behaviour_logp);
  const double lo = 1 - c.clip_eps, hi = 1 + c.effective_clip_high();
  const double clipped = std::min(std::max(rho, lo), hi);
  const double unclipped_obj = rho * advantage, clipped_obj = clipped * advantage;
  // min(): the clipped branch is constant in log pi, so its gradient is 0.
  r.clipped = clipped_obj < unclipped_obj;
  const double obj = r.clipped ? clipped_obj : unclipped_obj;
  r.loss = -obj;
  r.dloss_dlogp = r.clipped ? 0.0 : -unclipped_obj;
  if (c.kl_coef > 0) {
    const double d = ref_logp - logp;
    r.k3 = std::exp(d) - d - 1;
    r.loss += c.kl_coef * r.k3;
    r.dloss_dlogp += c.kl_coef * (1 - std::exp(d));
  }
  return r;
}

GrpoStrategy::GrpoStrategy(GrpoConfig config) : config_(std::move(config)) {
  config_.validate();
  reward_ = make_reward(config_.reward);
}

GrpoStrategy::~GrpoStrategy() = default;

void GrpoStrategy::attach(Trainer& t) {
  const TrainerConfig& tc = t.config();
  policy_ = &t.model();
  chunk_rows_ = tc.train.ce_chunk_tokens;
  grad_accum_ = tc.grad_accum;
  answers_ = read_answers(tc.data.path, t.dataset().shards().n_sequences());
  std::string tok_dir = tc.tokenizer;
  if (tok_dir.empty()) {
    json ix = read_index(tc.data.path);
    if (ix.contains("tokenizer")) tok_dir = ix["tokenizer"].value("path", "");
  }
  VELA_CHECK(!tok_dir.empty(), "grpo: no tokenizer (set \"tokenizer\" in the train config)");
  EngineConfig ec;
  const int64_t n_seqs = config_.engine_max_seqs > 0
                             ? config_.engine_max_seqs
                             : t.dataset().batch_size() * config_.group_size * tc.grad_accum;
  ec.max_seqs = static_cast<int32_t>(n_seqs);
  ec.page_size = static_cast<int32_t>(config_.engine_page_size);
  ec.max_ctx = static_cast<int32_t>(std::min<int64_t>(t.dataset().seq_len() + config_.max_tokens,
                                                      t.model().config.max_position_embeddings));
  ec.seed = tc.seed;
  // A shallow copy: the engine reads the trainer's compute weights (same storage, device, dtype).
  engine_ = std::make_unique<Engine>(
      Transformer(t.model()), std::make_unique<Tokenizer>(Tokenizer::from_file(tok_dir)), ec);
  SamplingParams sp;
  sp.temperature = static_cast<float>(config_.temperature);
  sp.top_p = static_cast<float>(config_.top_p);
  sp.top_k = static_cast<int32_t>(config_.top_k);
  sp.max_tokens = static_cast<int32_t>(config_.max_tokens);
  sp.stop = config_.stop;
  // Behaviour log-probs of the distribution each token was drawn from, log_softmax(logits / T)
  // before top-k / top-p truncation: the trainer's log-probs below use the same T, so the ratio
  // is exactly 1 at equal versions.
  sp.logprobs_mode = LogprobsMode::kTempered;
  runner_ = std::make_unique<RolloutRunner>(*engine_, *engine_->tokenizer(), *reward_, sp,
                                            config_.group_size, config_.rollout_interval, tc.seed);
  runner_->set_version_offset(static_cast<uint64_t>(t.step()));
  if (config_.kl_coef > 0)
    ref_ = std::make_unique<ReferenceModel>(ReferenceModel::for_policy(
        config_.reference, tc, t.model(), t.model_from_config(), t.resumed_from_step() >= 0));
  t.add_callback(std::make_unique<WeightPushCallback>(*this));
}

void GrpoStrategy::after_optimizer_step(Trainer&) {
  auto t0 = std::chrono::steady_clock::now();
  push_weights(*engine_, engine_model());
  VELA_LOG_DEBUG(
      "[grpo] weight push (shared storage, no copy) ",
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
      " ms");
}

bool GrpoStrategy::draws_data(const Trainer& t) const { return runner_->due(t.step()); }

TrainBatch GrpoStrategy::rollout_batch(const RolloutResult& r, const std::vector<size_t>& items,
                                       const std::vector<double>& advantages) const {
  int64_t seq = 1;
  for (size_t k : items) {
    const RolloutItem& it = r.items[k];
    seq = std::max<int64_t>(
        seq,
        static_cast<int64_t>(r.prompts[static_cast<size_t>(it.prompt)].size() + it.tokens.size()));
  }
  const auto rows = static_cast<int64_t>(items.size());
  TrainBatch b;
  b.ids = Tensor::zeros({rows, seq}, DType::kI32);                 // [samples, seq]
  b.targets = Tensor::empty({rows, seq}, DType::kI32);             // [samples, seq]
  b.doc_ids = Tensor::empty({rows, seq}, DType::kI32);             // [samples, seq]
  b.positions = Tensor::zeros({rows, seq}, DType::kI32);           // [samples, seq]
  b.behaviour_logprobs = Tensor::zeros({rows, seq}, DType::kF32);  // [samples, seq]
  int32_t* ids = b.ids.data<int32_t>();
  int32_t* tg = b.targets.data<int32_t>();
  int32_t* docs = b.doc_ids.data<int32_t>();
  int32_t* pos = b.positions.data<int32_t>();
  float* blp = b.behaviour_logprobs.data<float>();
  std::fill(tg, tg + rows * seq, kIgnoreIndex);
  std::fill(docs, docs + rows * seq, -1);
  for (int64_t row = 0; row < rows; ++row) {
    const RolloutItem& it = r.items[items[static_cast<size_t>(row)]];
    const std::vector<int32_t>& prompt = r.prompts[static_cast<size_t>(it.prompt)];
    const auto P = static_cast<int64_t>(prompt.size()), C = static_cast<int64_t>(it.tokens.size());
    for (int64_t t = 0; t < P + C; ++t) {
      const int64_t i = row * seq + t;
      ids[i] = t < P ? prompt[static_cast<size_t>(t)] : it.tokens[static_cast<size_t>(t - P)];
      docs[i] = 0;
      pos[i] = static_cast<int32_t>(t);
    }
    // Position t predicts token t + 1: the completion's tokens are the targets of P - 1 .. P+C-2.
    for (int64_t c = 0; c < C; ++c) {
      const int64_t i = row * seq + P - 1 + c;
      tg[i] = it.tokens[static_cast<size_t>(c)];
      blp[i] = it.logprobs[static_cast<size_t>(c)];
      b.n_target_tokens += 1;
    }
    b.advantages.push_back(static_cast<float>(advantages[items[static_cast<size_t>(row)]]));
    b.policy_versions.push_back(it.policy_version);
    b.rows.push_back(static_cast<int64_t>(items[static_cast<size_t>(row)]));
  }
  return b;
}

void GrpoStrategy::prepare_step(Trainer& t, std::vector<TrainBatch>& micro) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> answers;
  for (const TrainBatch& b : micro) {
    const int64_t seq = b.ids.size(1);
    std::vector<int32_t> ids = b.ids.to_vector<int32_t>();
    std::vector<int32_t> docs = b.doc_ids.to_vector<int32_t>();
    for (size_t r = 0; r < b.rows.size(); ++r) {
      if (b.rows[r] < 0) continue;  // padding row of an epoch's last batch
      std::vector<int32_t> p;
      for (int64_t s = 0; s < seq && docs[r * seq + s] >= 0; ++s) p.push_back(ids[r * seq + s]);
      prompts.push_back(std::move(p));
      answers.push_back(answers_[static_cast<size_t>(b.rows[r])]);
    }
  }
  auto t_rollout = std::chrono::steady_clock::now();
  auto [result, fresh] = (*runner_)(t.step(), prompts, answers);
  const double rollout_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_rollout).count();
  // Staleness at this step: the trainer's step is the version of the current weights.
  const auto now = static_cast<uint64_t>(t.step());
  VELA_CHECK(runner_->current_version() == now, "grpo: the engine holds policy version ",
             runner_->current_version(), " but the trainer is at step ", now,
             " (a weight push was missed)");
  const int64_t max_stale = config_.effective_max_staleness();
  std::vector<double> rewards;
  for (const RolloutItem& it : result.items) rewards.push_back(it.reward);
  const std::vector<double> adv =
      group_advantages(rewards, result.group_size, config_.scale_rewards);
  std::vector<size_t> keep;
  int64_t n_stale = 0, n_completion = 0;
  for (size_t k = 0; k < result.items.size(); ++k) {
    const RolloutItem& it = result.items[k];
    const bool stale = static_cast<int64_t>(now - it.policy_version) > max_stale;
    n_stale += stale;
    n_completion += static_cast<int64_t>(it.tokens.size());
    if ((stale && config_.drop_stale) || it.tokens.empty()) continue;
    keep.push_back(k);
  }
  if (n_stale > 0 && !config_.drop_stale)
    VELA_LOG_WARN("[grpo] step ", now + 1, ": training on ", n_stale, " stale samples (older than ",
                  max_stale, " versions; drop_stale is false)");
  // Split the kept samples into grad_accum micro-batches, whole groups where possible.
  micro.clear();
  const auto n_micro = static_cast<size_t>(std::max<int64_t>(1, grad_accum_));
  for (size_t m = 0; m < n_micro; ++m) {
    std::vector<size_t> part;
    for (size_t k = m * keep.size() / n_micro; k < (m + 1) * keep.size() / n_micro; ++k)
      part.push_back(keep[k]);
    if (!part.empty()) micro.push_back(rollout_batch(result, part, adv));
  }
  double mean = 0, var = 0;
  for (double r : rewards) mean += r;
  mean /= static_cast<double>(rewards.size());
  for (double r : rewards) var += (r - mean) * (r - mean);
  metrics_ = json{{"reward_mean", mean},
                  {"reward_std", std::sqrt(var / static_cast<double>(rewards.size()))},
                  {"n_samples", static_cast<int64_t>(rewards.size())},
                  {"n_stale", n_stale},
                  {"rollout_fresh", fresh},
                  {"completion_tokens",
                   static_cast<double>(n_completion) / static_cast<double>(rewards.size())},
                  {"policy_version", now}};
  if (fresh) {  // where a step's time goes (the trainer logs the rest at debug level)
    metrics_["rollout_s"] = rollout_s;
    metrics_["rollout_tok_per_s"] =
        rollout_s > 0 ? static_cast<double>(n_completion) / rollout_s : 0.0;
  }
  clipped_ = kl_sum_ = 0;
  n_loss_tokens_ = 0;
}

int64_t GrpoStrategy::loss_units(const TrainBatch& b) const {
  if (config_.loss_agg == "sequence") return static_cast<int64_t>(b.advantages.size());
  return b.n_target_tokens;
}

MicroLoss GrpoStrategy::loss_of(const TrainBatch& b, const std::vector<float>& logp,
                                const std::vector<float>& ref, float loss_scale,
                                std::vector<float>* coef) {
  const int64_t rows = b.ids.size(0), seq = b.ids.size(1);
  const std::vector<int32_t> tg = b.targets.to_vector<int32_t>();
  const std::vector<float> blp = b.behaviour_logprobs.to_vector<float>();
  const bool seq_agg = config_.loss_agg == "sequence";
  const double units = static_cast<double>(loss_units(b));
  MicroLoss out;
  out.n_units = loss_units(b);
  if (coef) coef->assign(logp.size(), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t n_r = 0;
    for (int64_t s = 0; s < seq; ++s) n_r += tg[r * seq + s] != kIgnoreIndex;
    if (n_r == 0) continue;
    const double w = seq_agg ? 1.0 / static_cast<double>(n_r) : 1.0;
    for (int64_t s = 0; s < seq; ++s) {
      const int64_t i = r * seq + s;
      if (tg[i] == kIgnoreIndex) continue;
      GrpoTokenLoss l =
          grpo_token_loss(config_, logp[i], blp[i], b.advantages[r], ref.empty() ? 0.0 : ref[i]);
      out.loss_sum += w * l.loss;
      clipped_ += l.clipped;
      kl_sum_ += l.k3;
      n_loss_tokens_ += 1;
      if (coef) (*coef)[i] = static_cast<float>(loss_scale * w * l.dloss_dlogp / units);
    }
  }
  return out;
}

MicroLoss GrpoStrategy::forward_backward(TrainableModel& model, const TrainBatch& batch,
                                         float loss_scale) {
  VELA_CHECK(batch.behaviour_logprobs.defined() &&
                 static_cast<int64_t>(batch.advantages.size()) == batch.ids.size(0),
             "grpo: a training batch needs the rollout's behaviour log-probs and advantages");
  std::vector<float> ref;
  const auto temp = static_cast<float>(config_.temperature);
  if (ref_) ref = ref_->token_logprobs(batch, chunk_rows_, temp);
  MicroLoss out;
  model.forward_backward_logprobs(
      batch,
      [&](const std::vector<float>& logp) {
        std::vector<float> coef;
        out = loss_of(batch, logp, ref, loss_scale, &coef);
        return coef;
      },
      temp);
  metrics_["clip_frac"] = n_loss_tokens_ > 0 ? clipped_ / static_cast<double>(n_loss_tokens_) : 0.0;
  if (ref_)
    metrics_["kl"] = n_loss_tokens_ > 0 ? kl_sum_ / static_cast<double>(n_loss_tokens_) : 0.0;
  return out;
}

MicroLoss GrpoStrategy::evaluate_loss(TrainableModel& model, const TrainBatch& batch) {
  std::vector<float> ref;
  const auto temp = static_cast<float>(config_.temperature);
  if (ref_) ref = ref_->token_logprobs(batch, chunk_rows_, temp);
  return loss_of(batch, model.token_logprobs(batch, temp), ref, 1.0f, nullptr);
}

json GrpoStrategy::state() const {
  const RolloutResult* r = runner_ ? runner_->held() : nullptr;
  return json{{"rollout", r ? r->to_json() : json(nullptr)}};
}

void GrpoStrategy::restore(const json& s) {
  if (s.is_object() && s.contains("rollout") && !s["rollout"].is_null())
    runner_->restore(RolloutResult::from_json(s["rollout"]));
}

}  // namespace vela
