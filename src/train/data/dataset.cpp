// Datasets seq / sft over token shards: row filling, batching, sampler state, the factory.
#include "train/data/dataset.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "train/data/sampler.h"
#include "train/data/shard_reader.h"

namespace vela {
namespace {

// The Philox stream of the validation split (far from the per-epoch streams 0, 1, 2, ...).
constexpr uint64_t kSplitStream = 0x5EED5B117ull << 20;

// Documents of a sequence: ids, positions (restarting), doc ids; targets by `target_of`.
template <typename TargetOf>
int64_t fill_docs(const SequenceView& v, int32_t* ids, int32_t* targets, int32_t* doc_ids,
                  int32_t* positions, TargetOf target_of) {
  int64_t n_targets = 0;
  for (int64_t d = 0; d < v.n_docs; ++d) {
    int64_t b = static_cast<int64_t>(v.doc_offsets[d] - v.first_token);
    int64_t e = static_cast<int64_t>(v.doc_offsets[d + 1] - v.first_token);
    for (int64_t t = b; t < e; ++t) {
      ids[t] = static_cast<int32_t>(v.tokens[t]);
      doc_ids[t] = static_cast<int32_t>(d);
      positions[t] = static_cast<int32_t>(t - b);
      int32_t target = t + 1 < e ? target_of(t + 1) : kIgnoreIndex;
      targets[t] = target;
      n_targets += target != kIgnoreIndex;
    }
  }
  return n_targets;
}

class SeqDataset final : public Dataset {
 public:
  SeqDataset(const DatasetConfig& c, std::shared_ptr<const ShardSet> s, std::vector<int64_t> items)
      : Dataset(c, std::move(s), std::move(items)) {}

 protected:
  int64_t fill_row(int64_t seq_idx, int32_t* ids, int32_t* targets, int32_t* doc_ids,
                   int32_t* positions) const override {
    SequenceView v = shards_->sequence(seq_idx);
    return fill_docs(v, ids, targets, doc_ids, positions,
                     [&](int64_t t) { return static_cast<int32_t>(v.tokens[t]); });
  }
  const char* kind() const override { return "seq"; }
};

class SftDataset final : public Dataset {
 public:
  SftDataset(const DatasetConfig& c, std::shared_ptr<const ShardSet> s, std::vector<int64_t> items)
      : Dataset(c, std::move(s), std::move(items)) {}

 protected:
  int64_t fill_row(int64_t seq_idx, int32_t* ids, int32_t* targets, int32_t* doc_ids,
                   int32_t* positions) const override {
    SequenceView v = shards_->sequence(seq_idx);
    return fill_docs(v, ids, targets, doc_ids, positions, [&](int64_t t) {
      return v.mask[t] ? static_cast<int32_t>(v.tokens[t]) : kIgnoreIndex;
    });
  }
  const char* kind() const override { return "sft"; }
};

// Preference pairs: item k is the sequences 2k (prompt + chosen) and 2k + 1 (prompt + rejected),
// each a masked-loss row like sft (only the response is a target).
class PairDataset final : public Dataset {
 public:
  PairDataset(const DatasetConfig& c, std::shared_ptr<const ShardSet> s, std::vector<int64_t> items)
      : Dataset(c, std::move(s), std::move(items)) {}

 protected:
  int64_t rows_per_item() const override { return 2; }
  int64_t fill_row(int64_t seq_idx, int32_t* ids, int32_t* targets, int32_t* doc_ids,
                   int32_t* positions) const override {
    SequenceView v = shards_->sequence(seq_idx);
    return fill_docs(v, ids, targets, doc_ids, positions, [&](int64_t t) {
      return v.mask[t] ? static_cast<int32_t>(v.tokens[t]) : kIgnoreIndex;
    });
  }
  const char* kind() const override { return "pair"; }
};

// Prompts for rollouts: the tokens of the rendered prompt, no targets (the trainer generates the
// responses).
class PromptDataset final : public Dataset {
 public:
  PromptDataset(const DatasetConfig& c, std::shared_ptr<const ShardSet> s,
                std::vector<int64_t> items)
      : Dataset(c, std::move(s), std::move(items)) {}

 protected:
  int64_t fill_row(int64_t seq_idx, int32_t* ids, int32_t* targets, int32_t* doc_ids,
                   int32_t* positions) const override {
    SequenceView v = shards_->sequence(seq_idx);
    fill_docs(v, ids, targets, doc_ids, positions, [&](int64_t) { return kIgnoreIndex; });
    return 0;
  }
  const char* kind() const override { return "prompt"; }
};

// The shard format a dataset kind needs (index.json "config"."format").
const char* required_format(const std::string& kind) {
  if (kind == "pair") return "preference";
  if (kind == "prompt") return "prompt";
  return nullptr;
}

std::unique_ptr<Dataset> make_one(const DatasetConfig& c, std::shared_ptr<const ShardSet> shards,
                                  std::vector<int64_t> items) {
  if (c.kind == "seq") return std::make_unique<SeqDataset>(c, std::move(shards), std::move(items));
  if (c.kind == "pair")
    return std::make_unique<PairDataset>(c, std::move(shards), std::move(items));
  if (c.kind == "prompt")
    return std::make_unique<PromptDataset>(c, std::move(shards), std::move(items));
  return std::make_unique<SftDataset>(c, std::move(shards), std::move(items));
}

// Items of a shard set for a kind: sequences, or pairs of sequences.
int64_t n_items(const DatasetConfig& c, const ShardSet& shards) {
  const std::string format =
      shards.index().contains("config") ? shards.index()["config"].value("format", "") : "";
  const char* need = required_format(c.kind);
  const bool special = format == "preference" || format == "prompt";
  VELA_CHECK(need == nullptr ? !special : format == need, "dataset.kind '", c.kind,
             "' does not fit the shards in '", shards.dir(), "' (preprocessed with format '",
             format, "'): ",
             need == nullptr ? "preference / prompt data trains with kind pair / prompt"
                             : std::string("kind ") + c.kind + " needs format " + need);
  if (c.kind != "pair") return shards.n_sequences();
  VELA_CHECK(shards.n_sequences() % 2 == 0, "preference shards '", shards.dir(), "' hold ",
             shards.n_sequences(), " sequences, not chosen/rejected pairs");
  return shards.n_sequences() / 2;
}

std::vector<int64_t> iota_items(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

}  // namespace

// ---- DatasetConfig ----

DatasetConfig DatasetConfig::from_json(const json& j) {
  static const std::set<std::string> kKeys = {
      "kind", "path",       "batch_size",          "seq_len",        "seed", "shuffle", "drop_last",
      "rank", "world_size", "validation_fraction", "validation_path"};
  VELA_CHECK(j.is_object(), "dataset config must be a JSON object, got ", j.type_name());
  for (auto it = j.begin(); it != j.end(); ++it)
    VELA_CHECK(kKeys.count(it.key()), "unknown key '", it.key(), "' in the dataset config");
  DatasetConfig c;
  auto str = [&](const char* k, std::string& out) {
    if (!j.contains(k)) return;
    VELA_CHECK(j[k].is_string(), "dataset.", k, " must be a string");
    out = j[k].get<std::string>();
  };
  auto integer = [&](const char* k, auto& out) {
    if (!j.contains(k)) return;
    VELA_CHECK(j[k].is_number_integer(), "dataset.", k, " must be an integer");
    out = j[k].get<std::decay_t<decltype(out)>>();
  };
  auto boolean = [&](const char* k, bool& out) {
    if (!j.contains(k)) return;
    VELA_CHECK(j[k].is_boolean(), "dataset.", k, " must be true or false");
    out = j[k].get<bool>();
  };
  str("kind", c.kind);
  str("path", c.path);
  integer("batch_size", c.batch_size);
  integer("seq_len", c.seq_len);
  if (j.contains("seed")) {
    VELA_CHECK(j["seed"].is_number_unsigned() ||
                   (j["seed"].is_number_integer() && j["seed"].get<int64_t>() >= 0),
               "dataset.seed must be a non-negative integer");
    c.seed = j["seed"].get<uint64_t>();
  }
  boolean("shuffle", c.shuffle);
  boolean("drop_last", c.drop_last);
  integer("rank", c.rank);
  integer("world_size", c.world_size);
  if (j.contains("validation_fraction")) {
    VELA_CHECK(j["validation_fraction"].is_number(),
               "dataset.validation_fraction must be a number");
    c.validation_fraction = j["validation_fraction"].get<double>();
  }
  str("validation_path", c.validation_path);
  return c;
}

json DatasetConfig::to_json() const {
  json j;
  j["kind"] = kind;
  j["path"] = path;
  j["batch_size"] = batch_size;
  j["seq_len"] = seq_len;
  j["seed"] = seed;
  j["shuffle"] = shuffle;
  j["drop_last"] = drop_last;
  j["rank"] = rank;
  j["world_size"] = world_size;
  j["validation_fraction"] = validation_fraction;
  j["validation_path"] = validation_path;
  return j;
}

// ---- Dataset ----

Dataset::Dataset(const DatasetConfig& config, std::shared_ptr<const ShardSet> shards,
                 std::vector<int64_t> items)
    : config_(config), shards_(std::move(shards)), items_(std::move(items)) {
  seq_len_ = config_.seq_len > 0 ? config_.seq_len : shards_->seq_len();
  int64_t longest = shards_->index().value("max_sequence_tokens", shards_->seq_len());
  VELA_CHECK(seq_len_ >= longest, "dataset.seq_len ", seq_len_, " is shorter than the longest ",
             "sequence in '", shards_->dir(), "' (", longest,
             " tokens): preprocess with a smaller seq_len");
  VELA_CHECK(!items_.empty(), "dataset '", shards_->dir(), "' has no sequences for this split");
  sampler_ = std::make_unique<EpochSampler>(static_cast<int64_t>(items_.size()), config_.seed,
                                            config_.shuffle);
  VELA_CHECK(batches_per_epoch() > 0, "dataset '", shards_->dir(), "' has ", items_.size(),
             " sequences, fewer than one global batch of ", config_.batch_size * config_.world_size,
             " with drop_last");
}

Dataset::~Dataset() = default;

int64_t Dataset::n_sequences() const { return static_cast<int64_t>(items_.size()); }

int64_t Dataset::batches_per_epoch() const {
  int64_t g = config_.batch_size * config_.world_size, n = n_sequences();
  return config_.drop_last ? n / g : (n + g - 1) / g;
}

int64_t Dataset::epoch() const { return epoch_; }
int64_t Dataset::cursor() const { return cursor_; }

TrainBatch Dataset::batch(int64_t epoch, int64_t batch_idx) const {
  VELA_CHECK(epoch >= 0 && batch_idx >= 0 && batch_idx < batches_per_epoch(), "batch ", batch_idx,
             " of epoch ", epoch, " out of range (", batches_per_epoch(), " batches per epoch)");
  const int64_t B = config_.batch_size, T = seq_len_, world = config_.world_size;
  const int64_t rpi = rows_per_item(), R = B * rpi;
  TrainBatch b;
  b.ids = Tensor::zeros({R, T}, DType::kI32);        // [rows, seq]
  b.targets = Tensor::empty({R, T}, DType::kI32);    // [rows, seq]
  b.doc_ids = Tensor::empty({R, T}, DType::kI32);    // [rows, seq]
  b.positions = Tensor::zeros({R, T}, DType::kI32);  // [rows, seq]
  b.rows = std::vector<int64_t>(static_cast<size_t>(R), -1);
  int32_t* ids = b.ids.data<int32_t>();
  int32_t* targets = b.targets.data<int32_t>();
  int32_t* doc_ids = b.doc_ids.data<int32_t>();
  int32_t* positions = b.positions.data<int32_t>();
  std::fill(targets, targets + R * T, kIgnoreIndex);
  std::fill(doc_ids, doc_ids + R * T, -1);
  const int64_t n = n_sequences();
  for (int64_t i = 0; i < B; ++i) {
    int64_t pos = batch_idx * B * world + config_.rank + i * world;
    if (pos >= n) continue;  // padding row of an epoch's last batch
    int64_t item = items_[static_cast<size_t>(sampler_->item(epoch, pos))];
    for (int64_t j = 0; j < rpi; ++j) {
      const int64_t r = i * rpi + j, seq_idx = item * rpi + j;
      b.rows[static_cast<size_t>(r)] = seq_idx;
      b.n_target_tokens +=
          fill_row(seq_idx, ids + r * T, targets + r * T, doc_ids + r * T, positions + r * T);
    }
  }
  return b;
}

TrainBatch Dataset::next_batch() {
  TrainBatch b = batch(epoch_, cursor_);
  if (++cursor_ == batches_per_epoch()) {
    cursor_ = 0;
    ++epoch_;
  }
  return b;
}

json Dataset::state() const {
  return {{"kind", kind()},
          {"seed", config_.seed},
          {"epoch", epoch_},
          {"cursor", cursor_},
          {"n_sequences", n_sequences()},
          {"global_batch_size", config_.batch_size * config_.world_size}};
}

void Dataset::restore(const json& s) {
  try {
    VELA_CHECK(s.at("kind").get<std::string>() == kind(), "dataset state is for kind '",
               s.at("kind").get<std::string>(), "', this dataset is '", kind(), "'");
    VELA_CHECK(s.at("seed").get<uint64_t>() == config_.seed, "dataset state has seed ",
               s.at("seed").get<uint64_t>(), ", this dataset uses ", config_.seed);
    VELA_CHECK(s.at("n_sequences").get<int64_t>() == n_sequences(), "dataset state has ",
               s.at("n_sequences").get<int64_t>(), " sequences, this dataset ", n_sequences(),
               " (different shards or split)");
    int64_t g = s.at("global_batch_size").get<int64_t>();
    VELA_CHECK(g == config_.batch_size * config_.world_size, "dataset state has global batch ", g,
               ", this run ", config_.batch_size * config_.world_size);
    int64_t epoch = s.at("epoch").get<int64_t>(), cursor = s.at("cursor").get<int64_t>();
    VELA_CHECK(epoch >= 0 && cursor >= 0 && cursor < batches_per_epoch(),
               "dataset state position (epoch ", epoch, ", cursor ", cursor, ") is out of range");
    epoch_ = epoch;
    cursor_ = cursor;
  } catch (const json::exception& e) {
    VELA_THROW(InvalidArgument, "malformed dataset state ", s.dump(), ": ", e.what());
  }
}

// ---- factory ----

DatasetSplit make_datasets(const DatasetConfig& c) {
  VELA_CHECK(c.kind == "seq" || c.kind == "sft" || c.kind == "pair" || c.kind == "prompt",
             "dataset.kind must be \"seq\", \"sft\", \"pair\" (preference data) or \"prompt\" "
             "(RL prompts), got '",
             c.kind, "'");
  VELA_CHECK(!c.path.empty(), "dataset.path is required (a `vela preprocess` output directory)");
  VELA_CHECK(c.batch_size > 0, "dataset.batch_size must be positive, got ", c.batch_size);
  VELA_CHECK(c.seq_len >= 0, "dataset.seq_len must be >= 0, got ", c.seq_len);
  VELA_CHECK(c.world_size >= 1 && c.rank >= 0 && c.rank < c.world_size, "dataset rank ", c.rank,
             " / world_size ", c.world_size, " is invalid");
  VELA_CHECK(c.validation_fraction >= 0 && c.validation_fraction < 1,
             "dataset.validation_fraction must be in [0, 1), got ", c.validation_fraction);
  VELA_CHECK(c.validation_fraction == 0 || c.validation_path.empty(),
             "give dataset.validation_fraction or dataset.validation_path, not both");
  auto shards = ShardSet::open(c.path);
  DatasetConfig vc = c;
  vc.shuffle = false;
  vc.drop_last = false;
  DatasetSplit out;
  const int64_t n_train_items = n_items(c, *shards);
  if (c.validation_fraction > 0) {
    int64_t n = n_train_items;
    int64_t k = std::max<int64_t>(1, std::llround(c.validation_fraction * static_cast<double>(n)));
    VELA_CHECK(k < n, "validation_fraction ", c.validation_fraction, " of ", n,
               " sequences leaves none for training");
    std::vector<int64_t> p = EpochSampler::permutation(n, c.seed, kSplitStream);
    std::vector<int64_t> val(p.begin(), p.begin() + k), train(p.begin() + k, p.end());
    std::sort(val.begin(), val.end());
    std::sort(train.begin(), train.end());
    out.train = make_one(c, shards, std::move(train));
    out.validation = make_one(vc, shards, std::move(val));
  } else {
    out.train = make_one(c, shards, iota_items(n_train_items));
    if (!c.validation_path.empty()) {
      auto vshards = ShardSet::open(c.validation_path);
      auto hash = [](const ShardSet& s) {
        return s.index().contains("tokenizer") ? s.index()["tokenizer"].value("sha256", "") : "";
      };
      VELA_CHECK(hash(*shards) == hash(*vshards), "validation shards '", c.validation_path,
                 "' were made with a different tokenizer than '", c.path, "'");
      out.validation = make_one(vc, vshards, iota_items(n_items(vc, *vshards)));
    }
  }
  return out;
}

}  // namespace vela
