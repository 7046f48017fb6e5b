// Muon (K. Jordan et al. 2024, "Muon: MomentUm Orthogonalized by Newton-schulz"): for each 2-D
// hidden matrix (ParamKind::kMatrix) the momentum of the gradient is replaced by its nearest
// semi-orthogonal matrix before the step; every other param (embeddings, norms, biases) is updated
// by AdamW. For a matrix W [rows, cols] with gradient G:
//   B <- mu * B + (1 - mu) * G                     momentum (torch lerp form, as in Jordan's code)
//   U <- nesterov ? (1 - mu) * G + mu * B : B
//   O <- newton_schulz5(U)                         ~ U V^T of U's SVD, singular values ~ 1
//   W <- W * (1 - lr_m * wd) - lr_m * scale * O,   lr_m = lr * muon_lr_mult
// scale: "moonlight" 0.2 * sqrt(max(rows, cols)) (Liu et al. 2025, "Muon is Scalable for LLM
// Training": matches AdamW's update RMS so AdamW's lr and decay carry over) or "keller"
// sqrt(max(1, rows / cols)) (Jordan's reference implementation).
// Fused weights (qkv_proj, gate_up_proj) are orthogonalized per logical block when the trainer
// gives their row splits (set_row_blocks), so the update equals Muon on the separate HF matrices.
// Momentum and masters live on the param's device; the momentum update, the GEMMs and the step
// run there (ops::muon_momentum, ops::gemm, ops::decayed_step) without waiting for the device.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "train/optim/adamw.h"

namespace vela {

// The quintic Newton-Schulz iteration of Jordan's Muon, `n_steps` times, on a [rows, cols] f32
// matrix on the CPU or a CUDA device: X = G / (||G||_F + 1e-7) (transposed first when rows > cols
// so X X^T is the small Gram matrix), then X <- a X + (b A + c A^2) X with A = X X^T and
// (a, b, c) = (3.4445, -4.7750, 2.0315). These coefficients (from Jordan's implementation)
// maximize the slope at zero while keeping the iteration inside [0.7, 1.2] for every singular
// value in (0, 1], so 5 steps bring all of them near 1 without converging exactly. GEMMs through
// ops::gemm; returns a new tensor on g's device.
// `dtype` is the iteration's precision: f32 (cuBLASLt with CUBLAS_COMPUTE_32F unless
// VELA_ALLOW_TF32 is set; within GEMM-summation-order error of the CPU reference, so Muon runs
// compare across devices) or bf16 on CUDA (tensor-core GEMMs with fp32 accumulation and bf16
// results, ~8x faster; OptimizerConfig::muon_ns_dtype picks). The normalization is f32 either way
// and the result is f32. On CUDA the Frobenius norm is a device reduction (ops::sum_squares /
// ops::scale_by_norm), so nothing waits for the device.
Tensor newton_schulz5(const Tensor& g, int n_steps = 5, DType dtype = DType::kF32);

class Muon : public Optimizer {
 public:
  Muon(const OptimizerConfig& config, ParameterList& params);

  // Row blocks of a fused matrix param by name (e.g. qkv_proj: {q_dim, kv_dim, kv_dim}); each block
  // is orthogonalized on its own. The sizes must add up to the param's rows.
  void set_row_blocks(const std::string& name, std::vector<int64_t> rows);

  void step(double lr) override;
  std::string kind() const override { return "muon"; }
  // How many params Muon orthogonalizes (the rest go to AdamW).
  size_t n_muon_params() const { return muon_idx_.size(); }

 protected:
  void collect_state(std::vector<std::pair<std::string, Tensor>>& tensors,
                     json& scalars) const override;
  void restore_state(const SafetensorsReader& reader, const json& scalars) override;

 private:
  OptimizerConfig config_;
  ParameterList& params_;
  std::vector<size_t> muon_idx_;
  std::vector<MasterWeights> master_;  // per Muon param
  std::vector<Tensor> momentum_;       // [rows, cols] f32 on the param's device, per Muon param
  std::map<std::string, std::vector<int64_t>> row_blocks_;
  std::unique_ptr<AdamW> adamw_;  // the other params
};

}  // namespace vela
