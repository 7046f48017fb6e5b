// InferenceWorkspace: one-time allocation of the per-step buffers and the host -> device upload.
#include "engine/runtime/inference_workspace.h"

namespace vela {

namespace {
void upload_prefix(const Tensor& host, Tensor& dev, int64_t n) {
  if (n <= 0) return;
  Tensor dst = dev.slice(0, 0, n);
  dst.copy_(host.slice(0, 0, n));
}
}  // namespace

InferenceWorkspace::InferenceWorkspace(const WorkspaceConfig& c) : config_(c) {
  VELA_CHECK(c.max_seqs > 0 && c.max_tokens_per_step > 0 && c.vocab_size > 0,
             "InferenceWorkspace: max_seqs, max_tokens_per_step and vocab_size must be positive "
             "(got ",
             c.max_seqs, ", ", c.max_tokens_per_step, ", ", c.vocab_size, ")");
  VELA_CHECK(c.max_tokens_per_step >= c.max_seqs, "InferenceWorkspace: max_tokens_per_step (",
             c.max_tokens_per_step, ") must cover one token for each of max_seqs (", c.max_seqs,
             ")");
  const int64_t n_tok = c.max_tokens_per_step, n_seq = c.max_seqs;
  auto i32 = [&](int64_t n, Device d) { return Tensor::zeros({n}, DType::kI32, d); };
  input_ids = i32(n_tok, c.device);
  positions = i32(n_tok, c.device);
  out_cache_loc = i32(n_tok, c.device);
  req_pool_indices = i32(n_seq, c.device);
  seq_lens = i32(n_seq, c.device);
  qo_indptr = i32(n_seq + 1, c.device);
  kv_indptr = i32(n_seq + 1, c.device);
  logits_indices = i32(n_seq, c.device);
  logits = Tensor::zeros({n_seq, c.vocab_size}, DType::kF32, c.device);
  if (c.device.is_cpu()) {
    host = Host{input_ids, positions, out_cache_loc, req_pool_indices,
                seq_lens,  qo_indptr, kv_indptr,     logits_indices};
  } else {
    Device cpu = Device::cpu();
    host = Host{i32(n_tok, cpu), i32(n_tok, cpu),     i32(n_tok, cpu),     i32(n_seq, cpu),
                i32(n_seq, cpu), i32(n_seq + 1, cpu), i32(n_seq + 1, cpu), i32(n_seq, cpu)};
  }
}

void InferenceWorkspace::upload(int32_t n_tokens, int32_t n_seqs, bool with_input_ids) {
  VELA_ASSERT(n_tokens >= 0 && n_tokens <= max_tokens() && n_seqs >= 0 && n_seqs <= max_seqs(),
              "InferenceWorkspace::upload: ", n_tokens, " tokens / ", n_seqs, " sequences exceed ",
              "the workspace");
  if (!has_host_mirror()) return;
  if (with_input_ids) upload_prefix(host.input_ids, input_ids, n_tokens);
  upload_prefix(host.positions, positions, n_tokens);
  upload_prefix(host.out_cache_loc, out_cache_loc, n_tokens);
  upload_prefix(host.req_pool_indices, req_pool_indices, n_seqs);
  upload_prefix(host.seq_lens, seq_lens, n_seqs);
  upload_prefix(host.qo_indptr, qo_indptr, n_seqs + 1);
  upload_prefix(host.kv_indptr, kv_indptr, n_seqs + 1);
  upload_prefix(host.logits_indices, logits_indices, n_seqs);
}

}  // namespace vela
