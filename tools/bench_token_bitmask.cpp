// bench_token_bitmask: ops::apply_token_bitmask on the GPU against its CPU twin (bit-exact over
// several shapes, partial and full masks, strided rows), then its cost per decode step at B = 64
// over Qwen's 151936-token vocabulary: the kernel alone, and the step's whole device-side work
// (pinned host -> device upload of the 64 mask rows + the kernel), plus the host-side fill of 64
// cached masks (overlapped with the forward in the engine). Built and run by
// tools/gpu_token_bitmask.sh on the GPU machine (needs only core/ and the op, not the whole
// library); prints a table and writes JSON to $OUT/token_bitmask.json.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/cuda/cuda_api.h"
#include "core/tensor.h"
#include "ops/token_bitmask.h"

using namespace vela;

namespace {

Tensor random_logits(int64_t n, int64_t v, uint32_t seed) {
  Tensor t = Tensor::empty({n, v}, DType::kF32);
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 3.f);
  for (int64_t i = 0; i < n * v; ++i) t.data<float>()[i] = d(rng);
  return t;
}

Tensor random_mask(int64_t n, int64_t v, uint32_t seed) {
  const int64_t w = (v + 31) / 32;
  Tensor m = Tensor::empty({n, w}, DType::kI32);
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < n * w; ++i) {
    uint32_t r = rng();
    uint32_t bits = r % 4 == 0 ? 0u : r % 4 == 1 ? 0xFFFFFFFFu : rng();  // zero, full, mixed words
    std::memcpy(m.data<int32_t>() + i, &bits, 4);
  }
  return m;
}

bool check(int64_t n_rows, int64_t vocab, int64_t n_masks, bool strided, uint32_t seed) {
  Tensor base = random_logits(n_rows, strided ? vocab + 7 : vocab, seed);
  Tensor logits = strided ? base.slice(1, 0, vocab) : base;
  Tensor mask = random_mask(n_masks, vocab, seed + 1);
  std::vector<int32_t> ids(static_cast<size_t>(n_rows));
  for (int32_t i = 0; i < n_rows; ++i) ids[static_cast<size_t>(i)] = i;
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed + 2));
  ids.resize(static_cast<size_t>(n_masks));
  Tensor rows = Tensor::from_vector(ids, {n_masks});
  Tensor gpu_base = base.to(Device::cuda(0));
  Tensor gpu_logits = strided ? gpu_base.slice(1, 0, vocab) : gpu_base;
  Tensor gm = mask.to(Device::cuda(0)), gr = rows.to(Device::cuda(0));
  ops::apply_token_bitmask(logits, mask, rows);
  ops::apply_token_bitmask(gpu_logits, gm, gr);
  Tensor back = gpu_base.to(Device::cpu());
  const bool same = std::memcmp(back.data<float>(), base.data<float>(), base.nbytes()) == 0;
  std::printf("check  rows %-3lld vocab %-7lld masks %-3lld %s: %s\n", (long long)n_rows,
              (long long)vocab, (long long)n_masks, strided ? "strided" : "dense  ",
              same ? "bit-exact" : "MISMATCH");
  return same;
}

}  // namespace

int main() {
  if (!cuda::available()) {
    std::printf("no CUDA device\n");
    return 77;
  }
  bool ok = true;
  ok &= check(1, 100, 1, false, 1);
  ok &= check(7, 1000, 5, true, 2);
  ok &= check(33, 32001, 33, false, 3);
  ok &= check(64, 151936, 64, false, 4);
  ok &= check(64, 151936, 40, true, 5);

  const int64_t B = 64, V = 151936, W = (V + 31) / 32;
  Tensor logits = random_logits(B, V, 9).to(Device::cuda(0));
  Tensor host_mask = Tensor::zeros_pinned({B, W}, DType::kI32);
  Tensor host_rows = Tensor::zeros_pinned({B}, DType::kI32);
  Tensor src = random_mask(B, V, 10);
  std::memcpy(host_mask.data<int32_t>(), src.data<int32_t>(), src.nbytes());
  for (int32_t i = 0; i < B; ++i) host_rows.data<int32_t>()[i] = i;
  Tensor dev_mask = Tensor::zeros({B, W}, DType::kI32, Device::cuda(0));
  Tensor dev_rows = Tensor::zeros({B}, DType::kI32, Device::cuda(0));
  dev_mask.copy_(host_mask);
  dev_rows.copy_(host_rows);
  cuda::StreamEvent e0(0, true), e1(0, true);
  const int iters = 500;
  for (int i = 0; i < 20; ++i) ops::apply_token_bitmask(logits, dev_mask, dev_rows);
  e0.record();
  for (int i = 0; i < iters; ++i) ops::apply_token_bitmask(logits, dev_mask, dev_rows);
  e1.record();
  e1.synchronize();
  const double kernel_us = cuda::StreamEvent::elapsed_ms(e0, e1) * 1000.0 / iters;
  e0.record();
  for (int i = 0; i < iters; ++i) {
    dev_mask.copy_(host_mask);
    dev_rows.copy_(host_rows);
    ops::apply_token_bitmask(logits, dev_mask, dev_rows);
  }
  e1.record();
  e1.synchronize();
  const double step_us = cuda::StreamEvent::elapsed_ms(e0, e1) * 1000.0 / iters;
  // Host side: 64 cached masks copied into the pinned buffer (GrammarMatcher cache hits).
  std::vector<uint32_t> cached(static_cast<size_t>(B * W), 0xFFFFFFFFu);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i)
    for (int64_t r = 0; r < B; ++r)
      std::memcpy(host_mask.data<int32_t>() + r * W, cached.data() + r * W,
                  static_cast<size_t>(W) * 4);
  const double host_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
      iters;
  // The B = 64 decode step of bench/results/engine_h200.txt (bench-1b shape, 2.662 ms).
  const double decode_step_us = 2662.0;
  const double bytes = static_cast<double>(B * V * 4 + B * W * 4);
  std::printf(
      "\nB=%lld vocab=%lld: kernel %.2f us (%.0f GB/s), upload+kernel %.2f us = %.2f%% of a "
      "%.0f us decode step; host fill of 64 cached masks %.2f us (overlaps the forward)\n",
      (long long)B, (long long)V, kernel_us, bytes / kernel_us / 1e3, step_us,
      100.0 * step_us / decode_step_us, decode_step_us, host_us);
  const char* out = std::getenv("OUT");
  if (out) {
    std::ofstream f(std::string(out) + "/token_bitmask.json");
    f << "{\"batch\": " << B << ", \"vocab\": " << V << ", \"kernel_us\": " << kernel_us
      << ", \"upload_and_kernel_us\": " << step_us << ", \"host_fill_us\": " << host_us
      << ", \"decode_step_us\": " << decode_step_us
      << ", \"overhead_pct\": " << 100.0 * step_us / decode_step_us
      << ", \"bit_exact\": " << (ok ? "true" : "false") << "}\n";
  }
  return ok ? 0 : 1;
}
