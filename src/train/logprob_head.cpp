// Chunked LM head log-probs and their coefficient-weighted backward; see logprob_head.h.
#include "train/logprob_head.h"

#include <algorithm>

#include "core/error.h"
#include "ops/cross_entropy.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"

namespace vela {

namespace {

void check_args(const Tensor& hidden, const Tensor& weight, const Tensor& targets,
                const std::vector<int32_t>& host_targets, int64_t chunk_rows) {
  VELA_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1),
             "lm_head_logprobs: hidden ", hidden.str(), " does not fit the LM head ", weight.str());
  VELA_CHECK(targets.dim() == 1 && targets.size(0) == hidden.size(0) &&
                 static_cast<int64_t>(host_targets.size()) == hidden.size(0),
             "lm_head_logprobs: targets ", targets.str(), " must be [", hidden.size(0), "]");
  VELA_CHECK(chunk_rows > 0, "lm_head_logprobs: chunk_rows must be positive, got ", chunk_rows);
}

// Scales rows [0, c) of `d` ([c, vocab], f32 or bf16/f16) by s[r].
void scale_rows(Tensor& d, const float* s, int64_t c) {
  if (d.device().is_cpu() && d.dtype() == DType::kF32) {
    const int64_t v = d.size(1);
    float* p = d.data<float>();
    for (int64_t r = 0; r < c; ++r) {
      const float k = s[r];
      float* row = p + r * v;
      for (int64_t j = 0; j < v; ++j) row[j] *= k;
    }
    return;
  }
  // Device tensors: one scale per run of equal coefficients (a DPO sequence shares one).
  for (int64_t r0 = 0; r0 < c;) {
    int64_t r1 = r0 + 1;
    while (r1 < c && s[r1] == s[r0]) ++r1;
    Tensor rows = d.slice(0, r0, r1);
    if (s[r0] != 1.0f) ops::scale(rows, s[r0], rows);
    r0 = r1;
  }
}

}  // namespace

std::vector<float> lm_head_logprobs(const Tensor& hidden, const Tensor& weight,
                                    const Tensor& targets, const std::vector<int32_t>& host_targets,
                                    int64_t chunk_rows, int32_t ignore_index, float temperature) {
  check_args(hidden, weight, targets, host_targets, chunk_rows);
  VELA_CHECK(temperature > 0, "lm_head_logprobs: temperature must be > 0, got ", temperature);
  const float inv_t = 1.0f / temperature;
  const int64_t n = hidden.size(0), vocab = weight.size(0);
  const int64_t chunk = std::min(chunk_rows, std::max<int64_t>(n, 1));
  const Device dev = hidden.device();
  Tensor logits_buf = Tensor::empty({chunk, vocab}, DType::kF32, dev);  // [chunk, vocab]
  Tensor losses_all = Tensor::zeros({n}, DType::kF32, dev);             // [n_rows] -log p
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    const int64_t r1 = std::min(n, r0 + chunk), c = r1 - r0;
    bool any = false;
    for (int64_t i = r0; i < r1 && !any; ++i) any = host_targets[i] != ignore_index;
    if (!any) continue;
    Tensor logits = logits_buf.slice(0, 0, c);
    ops::gemm(hidden.slice(0, r0, r1), weight, logits, /*trans_a=*/false, /*trans_b=*/true, inv_t);
    Tensor losses = losses_all.slice(0, r0, r1);
    ops::cross_entropy(logits, targets.slice(0, r0, r1), losses, ignore_index, 0.0f);
  }
  std::vector<float> logp = losses_all.to_vector<float>();
  for (size_t i = 0; i < logp.size(); ++i)
    logp[i] = host_targets[i] == ignore_index ? 0.0f : -logp[i];
  return logp;
}

void lm_head_logprobs_backward(const Tensor& hidden, const Tensor& weight, const Tensor& targets,
                               const std::vector<int32_t>& host_targets,
                               const std::vector<float>& coef, int64_t chunk_rows,
                               int32_t ignore_index, Tensor& dhidden, Tensor& dweight,
                               float temperature) {
  check_args(hidden, weight, targets, host_targets, chunk_rows);
  VELA_CHECK(temperature > 0, "lm_head_logprobs_backward: temperature must be > 0, got ",
             temperature);
  const float inv_t = 1.0f / temperature;
  VELA_CHECK(static_cast<int64_t>(coef.size()) == hidden.size(0),
             "lm_head_logprobs_backward: ", coef.size(), " coefficients for ", hidden.size(0),
             " rows");
  VELA_CHECK(dhidden.shape() == hidden.shape() && dhidden.dtype() == hidden.dtype(),
             "lm_head_logprobs_backward: dhidden ", dhidden.str(), " must be like hidden ",
             hidden.str());
  const int64_t n = hidden.size(0), vocab = weight.size(0);
  const int64_t chunk = std::min(chunk_rows, std::max<int64_t>(n, 1));
  const Device dev = hidden.device();
  Tensor logits_buf = Tensor::empty({chunk, vocab}, DType::kF32, dev);
  Tensor dlogits_buf = weight.dtype() != DType::kF32
                           ? Tensor::empty({chunk, vocab}, weight.dtype(), dev)
                           : logits_buf;
  // d log p / d z = -(softmax(z) - onehot) with z = logits / T: cross_entropy_backward's gradient
  // of z times -coef, and dz / dlogits = 1 / T.
  std::vector<float> neg(coef.size());
  for (size_t i = 0; i < coef.size(); ++i)
    neg[i] = host_targets[i] == ignore_index ? 0.0f : -coef[i] * inv_t;
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    const int64_t r1 = std::min(n, r0 + chunk), c = r1 - r0;
    bool any = false;
    for (int64_t i = r0; i < r1 && !any; ++i) any = neg[i] != 0.0f;
    Tensor dh = dhidden.slice(0, r0, r1);
    if (!any) {
      dh.zero_();
      continue;
    }
    Tensor h = hidden.slice(0, r0, r1);
    Tensor logits = logits_buf.slice(0, 0, c);
    ops::gemm(h, weight, logits, /*trans_a=*/false, /*trans_b=*/true, inv_t);
    Tensor dlogits = dlogits_buf.slice(0, 0, c);
    ops::cross_entropy_backward(logits, targets.slice(0, r0, r1), dlogits, 1.0f, ignore_index,
                                0.0f);
    scale_rows(dlogits, neg.data() + r0, c);
    ops::gemm(dlogits, weight, dh, /*trans_a=*/false, /*trans_b=*/false);
    if (dweight.defined())
      ops::gemm(dlogits, h, dweight, /*trans_a=*/true, /*trans_b=*/false, 1.0f, /*beta=*/1.0f);
  }
}

}  // namespace vela
