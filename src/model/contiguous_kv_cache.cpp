// ContiguousKVCache implementation.
#include "model/contiguous_kv_cache.h"

#include <algorithm>

namespace vela {

ContiguousKVCache::ContiguousKVCache(const ModelConfig& c, int64_t n_seqs, int64_t max_ctx,
                                     DType dtype, Device device)
    : lens_(static_cast<size_t>(n_seqs), 0), max_ctx_(max_ctx), device_(device) {
  VELA_CHECK(n_seqs > 0 && max_ctx > 0, "ContiguousKVCache needs n_seqs > 0 and max_ctx > 0");
  k_ = Tensor::zeros({c.n_layers, n_seqs * max_ctx, c.n_kv_heads, c.head_dim}, dtype, device);
  v_ = Tensor::zeros({c.n_layers, n_seqs * max_ctx, c.n_kv_heads, c.head_dim}, dtype, device);
  std::vector<int32_t> r2t(static_cast<size_t>(n_seqs * max_ctx));
  for (size_t i = 0; i < r2t.size(); ++i) r2t[i] = static_cast<int32_t>(i);
  req_to_token_ = Tensor::from_vector(r2t, {n_seqs, max_ctx}).to(device);
}

PackedStep ContiguousKVCache::step(const std::vector<int32_t>& seqs,
                                   const std::vector<int32_t>& n_new) {
  VELA_CHECK(seqs.size() == n_new.size() && !seqs.empty(), "step: one n_new per sequence");
  std::vector<int32_t> rows, lens, qo{0}, kv_indptr{0}, loc, pos, last;
  int32_t max_len = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    int32_t s = seqs[i];
    VELA_CHECK(s >= 0 && static_cast<size_t>(s) < lens_.size(), "step: bad sequence ", s);
    int32_t old = lens_[static_cast<size_t>(s)], len = old + n_new[i];
    VELA_CHECK(n_new[i] > 0 && len <= max_ctx_, "step: sequence ", s, " would reach ", len,
               " tokens (context ", max_ctx_, ")");
    for (int32_t p = old; p < len; ++p) {
      loc.push_back(static_cast<int32_t>(s * max_ctx_ + p));
      pos.push_back(p);
    }
    lens_[static_cast<size_t>(s)] = len;
    rows.push_back(s);
    lens.push_back(len);
    qo.push_back(qo.back() + n_new[i]);
    kv_indptr.push_back(kv_indptr.back() + len);
    last.push_back(qo.back() - 1);
    max_len = std::max(max_len, len);
  }
  PackedStep st;
  st.kv.k_cache = k_;
  st.kv.v_cache = v_;
  st.kv.req_to_token = req_to_token_;
  st.kv.req_pool_indices = Tensor::from_vector(rows).to(device_);
  st.kv.seq_lens = Tensor::from_vector(lens).to(device_);
  st.kv.qo_indptr = Tensor::from_vector(qo).to(device_);
  st.kv.kv_indptr = Tensor::from_vector(kv_indptr).to(device_);
  st.kv.out_cache_loc = Tensor::from_vector(loc).to(device_);
  st.kv.max_len = max_len;
  st.positions = Tensor::from_vector(pos).to(device_);
  st.last_indices = Tensor::from_vector(last).to(device_);
  return st;
}

}  // namespace vela
