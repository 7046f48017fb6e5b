// Executor implementation: the activation arena, attention planning, decode padding to graph
// buckets, and eager / graph execution.
#include "engine/runtime/executor.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstring>

#include "core/cuda/cuda_api.h"
#include "core/env.h"
#include "core/log.h"
#include "model/lora_adapter.h"
#include "ops/attention.h"
#include "ops/fused_gemm.h"
#include "ops/sampling.h"

namespace vela {

int64_t Executor::activation_bytes(const ModelConfig& c, DType dtype, int64_t n_tokens,
                                   int64_t n_seqs) {
  const int64_t e = static_cast<int64_t>(dtype_size(dtype));
  const int64_t slack = 16 * ScratchArena::kAlignment;  // per-take alignment
  const int64_t h = c.hidden_size, d = c.head_dim;
  const int64_t q_dim = c.n_heads * d, kv_dim = c.n_kv_heads * d, qkv = q_dim + 2 * kv_dim;
  // Live at once: the residual stream and its normalized copy and, inside one block (its
  // temporaries are released when it returns), attn_out + the MLP input + q/k/v + the attention
  // output + the MLP's gate_up and activation, counted without reuse, plus the second q of the
  // fused q|k|v path (its GEMM output and the rotated q are live together) and the split k / v
  // of its CPU twin; then the gathered rows and f32 logits. The extra terms matter for wide
  // heads (head_dim 256 on a 64-wide model), where attention outweighs the MLP.
  int64_t block = n_tokens * e * (2 * h + qkv + 2 * q_dim + 2 * kv_dim + 3 * c.intermediate_size);
  if (c.is_moe())  // the expert path's routing tables and permuted rows (nn/moe.h)
    block += Moe::scratch_bytes(n_tokens, h, c.n_experts, c.n_experts_per_tok,
                                c.moe_intermediate_size, c.shared_expert_intermediate_size, e);
  int64_t residual = 2 * n_tokens * e * h;
  int64_t head = n_seqs * (2 * h * e + c.vocab_size * static_cast<int64_t>(sizeof(float)));
  return residual + block + head + slack;
}

namespace {
std::atomic<int> g_lm_head_argmax{-1};  // Executor::set_lm_head_argmax
}  // namespace

void Executor::set_lm_head_argmax(int on) { g_lm_head_argmax.store(on < 0 ? -1 : (on != 0)); }

Executor::Executor(const Transformer* model, InferenceWorkspace& ws, const ExecutorOptions& opts)
    : model_(model),
      ws_(ws),
      opts_(opts),
      arena_(activation_bytes(model->config, model->dtype(), ws.max_tokens(), ws.max_logit_rows()) +
                 model_lora_scratch_bytes(*model, std::max(ws.max_tokens(), ws.max_seqs())),
             model->device()) {
  if (model->lora_adapters)
    model->lora_adapters->reserve_rows(std::max(ws.max_tokens(), ws.max_seqs()), model->device());
  if (model->device().is_cuda()) {
    VELA_CHECK(opts.padding_slot >= 0, "Executor: a CUDA engine needs a KV padding slot");
    VELA_CHECK(ws.o_part.defined(), "Executor: the workspace lacks the split-KV decode partials");
    // Dynamic NTK rebuilds its rotary table from the longest position: not capturable.
    bool dynamic = model->config.rope.scaling.type == ops::RopeScaling::Type::kDynamic;
    if (opts.cuda_graphs && !dynamic)
      graphs_ = std::make_unique<CudaGraphRunner>(model->device());
    else
      stream_ = std::make_unique<CudaGraphRunner>(model->device());
    buckets_ = CudaGraphRunner::buckets(ws.max_seqs());
    // The LM head of decode steps writes the sampler's argmax pieces (the sampler then skips
    // its pass over the logits for greedy rows). VELA_LM_HEAD_ARGMAX=0: the sampler's pre-pass.
    static const bool lm_head_argmax = env_enabled("VELA_LM_HEAD_ARGMAX");
    const int forced = g_lm_head_argmax.load(std::memory_order_relaxed);
    // Only where the GEMM writes them itself (not the one- or two-row GEMV: there they would be a
    // pass over the logits, no cheaper than the sampler's pre-pass); decided once per row count.
    if (forced >= 0 ? forced != 0 : lm_head_argmax) {
      const ModelConfig& mc = model->config;
      const int64_t rows = std::max<int64_t>(ws.max_seqs(), buckets_.empty() ? 0 : buckets_.back());
      pieces_for_rows_.assign(static_cast<size_t>(rows) + 1, 0);
      for (int64_t r = 1; r <= rows; ++r)
        pieces_for_rows_[static_cast<size_t>(r)] = ops::gemm_argmax_chunks_fused(
            r, mc.vocab_size, mc.hidden_size, model->dtype(), model->device());
      if (std::find(pieces_for_rows_.begin(), pieces_for_rows_.end(), 1) != pieces_for_rows_.end())
        chunk_max_ = Tensor::zeros({rows, ops::argmax_chunk_count(mc.vocab_size)}, DType::kI64,
                                   model->device());
    }
    sm_count_ = cuda::sm_count(model->device().index);
    decode_tensor_cores_ = ops::decode_on_tensor_cores(
        model->dtype(), model->config.n_heads, model->config.n_kv_heads, model->config.head_dim);
    if (opts.time_device)
      for (TimedForward& f : timed_) {
        f.begin = std::make_unique<cuda::StreamEvent>(model->device().index, /*timing=*/true);
        f.end = std::make_unique<cuda::StreamEvent>(model->device().index, /*timing=*/true);
      }
  }
}

void Executor::count_time(TimedForward& f) {
  if (!f.pending) return;
  f.end->synchronize();
  const double s = cuda::StreamEvent::elapsed_ms(*f.begin, *f.end) / 1000.0;
  if (f.decode) {
    ++device_time_.decode_forwards;
    device_time_.decode_s += s;
    device_time_.decode_launch_s += f.launch_s;
  } else {
    ++device_time_.other_forwards;
    device_time_.other_s += s;
    device_time_.other_launch_s += f.launch_s;
  }
  f.pending = false;
}

Executor::~Executor() = default;

void Executor::enter_thread() const {
  if (graphs_) graphs_->enter_thread();
  if (stream_) stream_->enter_thread();
}

void Executor::set_model(const Transformer* model) {
  // The graphs read the weights' addresses: new memory needs new graphs; the same memory (weights
  // written in place by an in-process trainer) keeps them.
  bool same = model_ != nullptr && model_->same_storage(*model);
  model_ = model;
  if (graphs_ && !same) graphs_->clear();
}

int32_t Executor::bucket_for(int32_t n) const {
  for (int32_t b : buckets_)
    if (b >= n) return b;
  return n;
}

BoundBatch Executor::decode_batch(const BoundBatch& batch, int32_t rows) const {
  InferenceWorkspace::DecodeMeta m = ws_.decode_meta(rows);
  BoundBatch b = batch;
  b.kv.req_pool_indices = m.req_pool_indices;
  b.kv.seq_lens = m.seq_lens;
  b.kv.qo_indptr = m.qo_indptr;
  b.kv.kv_indptr = m.kv_indptr;
  b.kv.out_cache_loc = m.out_cache_loc;
  b.input_ids = m.input_ids;
  b.positions = m.positions;
  b.logits_indices = m.logits_indices;
  b.n_tokens = b.n_seqs = b.n_logits = rows;
  return b;
}

Tensor Executor::next_decode_ids() const {
  return ws_.has_host_mirror() ? ws_.input_ids.slice(0, 0, ws_.max_seqs()) : Tensor();
}

Tensor Executor::run(const BoundBatch& b, Tensor* chunk_max) {
  arena_.reset();
  ScratchScope scope(&arena_);
  return model_->forward_packed(b.input_ids, b.positions, b.kv, b.logits_indices, chunk_max);
}

Tensor Executor::decode_chunk_max() const {
  return chunk_max_rows_ > 0 ? chunk_max_.slice(0, 0, chunk_max_rows_) : Tensor();
}

Tensor Executor::forward(const BoundBatch& batch, const Tensor* ids_on_device,
                         const int32_t* id_rows) {
  const bool decode = batch.n_tokens == batch.n_seqs;
  if (ids_on_device != nullptr)
    VELA_CHECK(decode && ids_on_device->dtype() == DType::kI32 &&
                   ids_on_device->device() == model_->device() && ids_on_device->is_contiguous() &&
                   ids_on_device->numel() >= batch.n_seqs,
               "Executor::forward: device input ids need a decode batch and >= ", batch.n_seqs,
               " contiguous i32 on ", model_->device().str(), ", got ", ids_on_device->str());
  VELA_CHECK(ids_on_device == nullptr || id_rows == nullptr ||
                 ids_on_device->data_ptr() != ws_.input_ids.data_ptr(),
             "Executor::forward: the workspace's own input ids are read in place, not by id_rows");
  if (ids_on_device != nullptr && id_rows != nullptr)
    for (int32_t i = 0; i < batch.n_seqs; ++i)
      VELA_CHECK(id_rows[i] >= 0 && id_rows[i] < ids_on_device->numel() &&
                     (i == 0 || id_rows[i] > id_rows[i - 1]),
                 "Executor::forward: id row ", i, " reads ", id_rows[i],
                 ": rows must ascend within the ", ids_on_device->numel(), " device ids");
  ids_on_device_ = ids_on_device;
  id_rows_ = id_rows;
  chunk_max_rows_ = 0;  // decode_bucket sets it when its forward writes the pieces
  struct Clear {  // a later capture_bucket() must not copy them again
    Executor& e;
    ~Clear() {
      e.ids_on_device_ = nullptr;
      e.id_rows_ = nullptr;
    }
  } clear{*this};
  if (model_->device().is_cpu()) {
    ws_.upload(batch.n_tokens, batch.n_seqs);  // a no-op: host and device are one
    copy_device_ids(batch.n_seqs);
    return run(batch);
  }
  if (model_->lora_adapters) model_->lora_adapters->rows->upload(batch.n_tokens);
  // The scheduler loop entered the engine stream once (Scheduler::run); nothing to set per step.
  if (!timed_[0].begin) return decode ? forward_decode(batch) : forward_prefill(batch);
  // The events of two forwards ago: done (the scheduler read that step's samples).
  TimedForward& f = timed_[static_cast<size_t>(timed_at_)];
  timed_at_ = (timed_at_ + 1) % static_cast<int>(timed_.size());
  count_time(f);
  const auto t0 = std::chrono::steady_clock::now();
  f.begin->record();
  Tensor logits = decode ? forward_decode(batch) : forward_prefill(batch);
  f.end->record();
  // Host time to enqueue the forward: next to the stream time, whether launching is the limit.
  f.launch_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  f.pending = true;
  f.decode = decode;
  return logits;
}

void Executor::copy_device_ids(int32_t n) {
  if (ids_on_device_ == nullptr) return;
  const auto* src = static_cast<const int32_t*>(ids_on_device_->data_ptr());
  auto* dst = static_cast<int32_t*>(ws_.input_ids.data_ptr());
  if (src == dst) return;        // the sampler wrote them in place (forward() refuses id_rows then)
  for (int32_t i = 0; i < n;) {  // one copy per run of consecutive source rows
    const int32_t from = id_rows_ ? id_rows_[i] : i;
    int32_t len = 1;
    while (i + len < n && (id_rows_ ? id_rows_[i + len] : i + len) == from + len) ++len;
    const size_t bytes = sizeof(int32_t) * static_cast<size_t>(len);
    if (model_->device().is_cpu())
      std::memcpy(dst + i, src + from, bytes);
    else
      cuda::copy_bytes_async(dst + i, model_->device(), src + from, model_->device(), bytes);
    i += len;
  }
}

Tensor Executor::forward_decode(const BoundBatch& batch) {
  return decode_bucket(batch, batch.n_seqs, bucket_for(batch.n_seqs));
}

int Executor::graph_splits(int32_t bucket, int32_t max_len) const {
  int splits = ops::decode_num_splits(bucket, model_->config.n_kv_heads, max_len, sm_count_,
                                      decode_tensor_cores_);
  if (!graphs_) return splits;  // graphs: a power of two, so a handful of graphs per bucket
  return std::min(static_cast<int>(std::bit_ceil(static_cast<unsigned>(splits))),
                  ops::kMaxDecodeSplits);
}

std::optional<CudaGraphRunner::Key> Executor::stand_in_graph(int32_t bucket,
                                                             int32_t max_len) const {
  auto close = [](CudaGraphRunner::Key want, const std::optional<CudaGraphRunner::Key>& got) {
    return got && std::max(got->second, want.second) <= 2 * std::min(got->second, want.second);
  };
  // The bucket's own graphs decide when it has any (a far split count is worth its capture: a
  // 32K-key decode on the 1K-key graph would run 8x fewer splits for every later step).
  const CudaGraphRunner::Key want{bucket, graph_splits(bucket, max_len)};
  if (std::optional<CudaGraphRunner::Key> got = graphs_->nearest(want))
    return close(want, got) ? got : std::nullopt;
  for (int32_t b : buckets_) {
    if (b <= bucket) continue;
    const CudaGraphRunner::Key larger{b, graph_splits(b, max_len)};
    std::optional<CudaGraphRunner::Key> got = graphs_->nearest(larger);
    if (close(larger, got)) return got;
  }
  return std::nullopt;
}

Tensor Executor::decode_bucket(const BoundBatch& batch, int32_t n, int32_t bucket, int splits) {
  CudaGraphRunner::Key key{bucket, splits > 0 ? splits : graph_splits(bucket, batch.kv.max_len)};
  if (graphs_ && splits == 0 && !opts_.exact_graph_splits && !graphs_->has(key)) {
    // A step whose graph is not captured yet runs a stand-in (its bucket's graph within 2x of its
    // split count, or else the smallest larger bucket's, with more padding rows: any split count is
    // correct, one that close costs about the same, and padding rows cost little next to the
    // weights), and the exact graph is captured when the loop is next idle. Capturing here would
    // stall every row of the step for an eager forward plus the capture (~20 ms on a 1.7B model).
    if (std::optional<CudaGraphRunner::Key> stand_in = stand_in_graph(bucket, batch.kv.max_len)) {
      queue_capture(batch.kv, key);
      key = *stand_in;
    }
  }
  bucket = key.first;
  auto [ids, pos, loc, rows, lens, qo, kvp, last] = ws_.host_pointers();
  for (int32_t i = n; i < bucket; ++i) {  // padding rows: no keys, K/V into the padding slot
    ids[i] = 0;
    pos[i] = 0;
    loc[i] = opts_.padding_slot;
    rows[i] = rows[0];
    lens[i] = 0;
    qo[i + 1] = i + 1;
    kvp[i + 1] = kvp[i];
    last[i] = i;
  }
  if (const LoraAdapterSet* lora = model_->lora_adapters.get()) {  // padding rows: the base
    int32_t* slots = lora->rows->host.data<int32_t>();
    for (int32_t i = n; i < bucket; ++i) slots[i] = -1;
    lora->rows->upload(bucket);
  }
  BoundBatch b = decode_batch(batch, bucket);
  b.kv.mode = AttentionMode::kDecode;
  b.kv.n_splits = key.second;
  b.kv.o_part = ws_.o_part;
  b.kv.lse_part = ws_.lse_part;
  // Ids from the device: in place already (the sampler wrote them), or copied after the upload.
  ws_.upload_decode(bucket, /*with_ids=*/ids_on_device_ == nullptr);
  copy_device_ids(n);
  Tensor logits;
  Tensor* cm = chunk_max_.defined() && pieces_for_rows_[static_cast<size_t>(bucket)] != 0
                   ? &chunk_max_
                   : nullptr;
  if (!graphs_) {
    logits = run(b, cm);
  } else if (graphs_->has(key)) {
    logits = graphs_->replay(key);
  } else {
    logits = run(b, cm);  // this step's result; also warms plans and kernels up for the capture
    VELA_LOG_DEBUG("[executor] capturing the decode graph of ", key.first, " rows, ", key.second,
                   " splits (max_len ", batch.kv.max_len, ", ", n, " live rows)");
    graphs_->capture(key, [&] { return run(b, cm); });
  }
  ws_.mark_consumed();
  chunk_max_rows_ = cm != nullptr ? n : 0;
  return logits.slice(0, 0, n);
}

void Executor::queue_capture(const KVCacheView& cache, CudaGraphRunner::Key key) {
  if (std::find(queued_.begin(), queued_.end(), key) != queued_.end()) return;
  queued_cache_.k_cache = cache.k_cache;
  queued_cache_.v_cache = cache.v_cache;
  queued_cache_.req_to_token = cache.req_to_token;
  queued_len_ = std::max(queued_len_, cache.max_len);  // the rotary table the capture needs
  queued_.push_front(key);  // before the start-up queue: a split count steps asked for
}

Tensor Executor::forward_prefill(const BoundBatch& batch) {
  // The workspace holds prefill_max_tiles at the smallest tile: enough for any tile_q.
  const int tile_q =
      ops::prefill_tile_q(model_->dtype(), model_->config.head_dim, model_->device());
  // The leading one-query sequences (a mixed step's decode rows come first) run on the split-KV
  // decode kernel, which reads each KV head once for its whole query group; in the prefill
  // kernel each would be a tile of one row per query head. VELA_MIXED_DECODE_KERNEL=0: tiles.
  static const bool decode_kernel = env_enabled("VELA_MIXED_DECODE_KERNEL");
  const int32_t* qo = ws_.host.qo_indptr.data<int32_t>();
  int32_t n_decode = 0;
  while (decode_kernel && n_decode < batch.n_seqs && qo[n_decode + 1] - qo[n_decode] == 1)
    ++n_decode;
  int64_t n_tiles =
      ops::plan_prefill_tiles(qo, batch.n_seqs, tile_q, ws_.host.tile_seq_idx.data<int32_t>(),
                              ws_.host.tile_q_start.data<int32_t>(), ws_.max_tiles(), n_decode);
  BoundBatch b = batch;
  b.kv.mode = AttentionMode::kPrefill;
  b.kv.n_decode_seqs = n_decode;
  if (n_decode > 0) {
    b.kv.n_splits = ops::decode_num_splits(n_decode, model_->config.n_kv_heads, batch.kv.max_len,
                                           sm_count_, decode_tensor_cores_);
    b.kv.o_part = ws_.o_part;
    b.kv.lse_part = ws_.lse_part;
  }
  b.kv.tile_seq_idx = ws_.tile_seq_idx;
  b.kv.tile_q_start = ws_.tile_q_start;
  b.kv.n_tiles = n_tiles;
  b.kv.tile_q = tile_q;
  ws_.upload(batch.n_tokens, batch.n_seqs);
  Tensor logits = run(b);
  ws_.mark_consumed();
  return logits;
}

void Executor::capture_bucket(const KVCacheView& cache, int32_t max_len, int32_t bucket,
                              int splits) {
  // An all-padding batch (every row without keys): the kernels read seq_lens at replay.
  InferenceWorkspace::Host& h = ws_.host;
  ws_.wait_staging();
  h.req_pool_indices.data<int32_t>()[0] = 0;
  h.qo_indptr.data<int32_t>()[0] = 0;
  h.kv_indptr.data<int32_t>()[0] = 0;
  BoundBatch b;
  b.kv = cache;
  b.kv.max_len = max_len;
  decode_bucket(b, 0, bucket, splits > 0 ? splits : graph_splits(bucket, max_len));
}

double Executor::capture_decode_graphs(const KVCacheView& cache, int32_t max_len) {
  if (!graphs_) return 0.0;
  CudaGraphRunner::Scope on_engine_stream(*graphs_);
  const double before = graphs_->capture_seconds();
  for (int32_t bucket : buckets_) capture_bucket(cache, max_len, bucket);
  return graphs_->capture_seconds() - before;
}

void Executor::queue_decode_graphs(const KVCacheView& cache, int32_t max_len) {
  if (!graphs_) return;
  queued_cache_ = cache;
  queued_len_ = max_len;
  queued_.clear();
  for (int32_t bucket : buckets_) queued_.push_back({bucket, graph_splits(bucket, max_len)});
}

bool Executor::capture_queued_graph() {
  while (graphs_ && !queued_.empty()) {
    const CudaGraphRunner::Key key = queued_.front();
    queued_.pop_front();
    if (graphs_->has(key)) continue;  // a step captured it already
    capture_bucket(queued_cache_, queued_len_, key.first, key.second);
    return true;
  }
  return false;
}

}  // namespace vela
