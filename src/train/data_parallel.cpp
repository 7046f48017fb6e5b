// DataParallel: gradient buckets, ZeRO-1 sharding and the global norm; see data_parallel.h.
#include "train/data_parallel.h"

#include <cmath>
#include <cstring>

#include "core/cuda/cuda_api.h"
#include "core/error.h"
#include "core/log.h"
#include "ops/optim.h"

namespace vela {
namespace {

std::vector<int64_t> numels_of(const ParameterList& params) {
  std::vector<int64_t> n;
  for (const Parameter& p : params) n.push_back(p.value.numel());
  return n;
}

Tensor flat(const Tensor& t) { return t.view({t.numel()}); }

// dst <- src, both contiguous, same bytes. On CUDA ordered on the current stream without waiting
// (Tensor::copy_ would block the host once per parameter and undo the overlap).
void copy_into(Tensor dst, const Tensor& src) {
  VELA_ASSERT(dst.nbytes() == src.nbytes() && dst.is_contiguous() && src.is_contiguous());
  if (dst.is_cpu() && src.is_cpu()) {
    dst.copy_(src);
    return;
  }
  cuda::copy_bytes_async(dst.data_ptr(), dst.device(), src.data_ptr(), src.device(), src.nbytes());
}

Tensor f64_scalar(double v, Device device) {
  int64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(v));
  return Tensor::from_vector(std::vector<int64_t>{bits}, {1}).to(device);
}

}  // namespace

DataParallel::DataParallel(std::shared_ptr<dist::ProcessGroup> pg, ParameterList& params,
                           const DataParallelConfig& config,
                           const std::vector<size_t>& backward_order)
    : pg_(std::move(pg)),
      params_(params),
      config_(config),
      layout_(numels_of(params), backward_order, pg_->world_size(),
              static_cast<int64_t>(config.bucket_mb * 1024 * 1024)) {
  VELA_CHECK(config.zero == 0 || config.zero == 1, "train config: zero must be 0 or 1, got ",
             config.zero);
  VELA_CHECK(config.bucket_mb > 0, "train config: bucket_mb must be > 0, got ", config.bucket_mb);
  const Device dev = pg_->device();
  for (const Parameter& p : params_) {
    VELA_CHECK(p.value.device() == dev && p.value.is_contiguous() && p.grad.is_contiguous(),
               "data parallel: parameter ", p.name, " ", p.value.str(),
               " must be contiguous on the process group's device ", dev.str());
  }
  for (size_t i : layout_.owned_by(pg_->rank())) owned_.push_back(params_[i]);
  const int W = pg_->world_size();
  for (const dist::Bucket& b : layout_.buckets()) {
    grad_buf_.push_back(Tensor::zeros({W * b.shard_numel}, DType::kF32, dev));
    if (zero()) {
      const DType dt = params_[b.entries.front().param].value.dtype();
      for (const dist::BucketEntry& e : b.entries)
        VELA_CHECK(params_[e.param].value.dtype() == dt, "ZeRO-1: parameter ",
                   params_[e.param].name, " is ", dtype_name(params_[e.param].value.dtype()),
                   " but its bucket holds ", dtype_name(dt), " weights");
      grad_shard_.push_back(Tensor::zeros({b.shard_numel}, DType::kF32, dev));
      w_shard_.push_back(Tensor::zeros({b.shard_numel}, dt, dev));
      w_full_.push_back(Tensor::zeros({W * b.shard_numel}, dt, dev));
    }
  }
  work_.resize(layout_.buckets().size());
  n_ready_.assign(layout_.buckets().size(), 0);
  ready_.assign(params_.size(), 0);
  int64_t total = 0;
  for (const Parameter& p : params_) total += p.value.numel();
  VELA_LOG_INFO("[dist] rank ", pg_->rank(), ": ", zero() ? "ZeRO-1" : "DDP", ", ",
                layout_.buckets().size(), " gradient buckets of <= ", config.bucket_mb,
                " MiB; this rank ", zero() ? "updates " : "owns (for the norm) ",
                layout_.owned_numel(pg_->rank()), " of ", total, " parameters");
}

void DataParallel::broadcast_parameters() {
  std::vector<dist::WorkHandle> w;
  for (Parameter& p : params_) w.push_back(pg_->broadcast(p.value, 0));
  for (auto& h : w) h->wait();
}

void DataParallel::grads_ready(const std::vector<size_t>& params) {
  if (!armed_) return;
  for (size_t i : params) {
    if (i >= ready_.size() || ready_[i]) continue;
    ready_[i] = 1;
    ++n_ready_[layout_.locate(i).first];
  }
  // Launch strictly in bucket order: every rank issues the same collectives in the same order.
  while (next_launch_ < layout_.buckets().size() &&
         n_ready_[next_launch_] == static_cast<int>(layout_.buckets()[next_launch_].entries.size()))
    launch(next_launch_++);
}

void DataParallel::launch(size_t k) {
  const dist::Bucket& b = layout_.buckets()[k];
  Tensor& buf = grad_buf_[k];
  for (const dist::BucketEntry& e : b.entries) {
    const int64_t at = e.owner * b.shard_numel + e.offset;
    copy_into(buf.slice(0, at, at + e.numel), flat(params_[e.param].grad));
  }
  work_[k] = zero() ? pg_->reduce_scatter(buf, grad_shard_[k]) : pg_->all_reduce(buf);
  ++n_launches_;
}

void DataParallel::finish_gradients() {
  std::vector<size_t> all(params_.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  armed_ = true;
  grads_ready(all);  // whatever the hook did not report (strategies without per-layer hooks)
  const int me = pg_->rank();
  for (size_t k = 0; k < work_.size(); ++k) {
    work_[k]->wait();
    work_[k].reset();
    const dist::Bucket& b = layout_.buckets()[k];
    for (const dist::BucketEntry& e : b.entries) {
      Tensor g = flat(params_[e.param].grad);
      if (zero()) {
        if (e.owner == me) copy_into(g, grad_shard_[k].slice(0, e.offset, e.offset + e.numel));
      } else {
        const int64_t at = e.owner * b.shard_numel + e.offset;
        copy_into(g, grad_buf_[k].slice(0, at, at + e.numel));
      }
    }
  }
  std::fill(ready_.begin(), ready_.end(), 0);
  std::fill(n_ready_.begin(), n_ready_.end(), 0);
  next_launch_ = 0;
  armed_ = false;
}

double DataParallel::clip_grad_norm(double max_norm) {
  const Device dev = pg_->device();
  std::vector<Tensor> mine;
  for (const Parameter& p : owned_) mine.push_back(p.grad);
  Tensor sq = ops::make_f64_scalar(dev);
  if (!mine.empty()) ops::sum_squares(mine, sq);
  const double global = pg_->all_reduce_host({ops::read_f64_scalar(sq)})[0];
  if (max_norm > 0) {
    std::vector<Tensor> grads;
    if (zero()) {
      grads = mine;
    } else {
      for (const Parameter& p : params_) grads.push_back(p.grad);
    }
    Tensor g = f64_scalar(global, dev);
    ops::scale_by_norm(grads, g, max_norm, 1e-6, max_norm);
  }
  return std::sqrt(global);
}

void DataParallel::after_optimizer_step() {
  if (!zero()) return;
  const int me = pg_->rank();
  std::vector<dist::WorkHandle> w(layout_.buckets().size());
  for (size_t k = 0; k < w.size(); ++k) {
    for (const dist::BucketEntry& e : layout_.buckets()[k].entries) {
      if (e.owner != me) continue;
      copy_into(w_shard_[k].slice(0, e.offset, e.offset + e.numel), flat(params_[e.param].value));
    }
    w[k] = pg_->all_gather(w_shard_[k], w_full_[k]);
  }
  for (size_t k = 0; k < w.size(); ++k) {
    w[k]->wait();
    const dist::Bucket& b = layout_.buckets()[k];
    for (const dist::BucketEntry& e : b.entries) {
      if (e.owner == me) continue;
      const int64_t at = e.owner * b.shard_numel + e.offset;
      copy_into(flat(params_[e.param].value), w_full_[k].slice(0, at, at + e.numel));
    }
  }
}

}  // namespace vela
