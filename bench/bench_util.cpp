// Shared benchmark helpers.
#include "bench/bench_util.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "core/parallel.h"
#include "core/rng.h"
#include "ops/cpu/gemm_amx.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace vela::cli {

double time_median(const std::function<void()>& fn, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed) {
  Tensor f = Tensor::empty(shape, DType::kF32);
  float* p = f.data<float>();
  int64_t n = f.numel();
  parallel_for(n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) p[i] = philox_uniform(seed, 0, static_cast<uint64_t>(i)) - 0.5f;
  });
  if (dtype == DType::kF32) return f;
  Tensor t = Tensor::empty(shape, dtype);
  uint16_t* q = static_cast<uint16_t*>(t.data_ptr());
  for (int64_t i = 0; i < n; ++i)
    q[i] = dtype == DType::kBF16 ? bf16::from_f32(p[i]) : f16::from_f32(p[i]);
  return t;
}

double measure_copy_gbps(size_t bytes, int reps) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  double t = time_median(
      [&] {
        parallel_for(static_cast<int64_t>(bytes), 1 << 20, [&](int64_t b, int64_t e) {
          std::memcpy(dst.data() + b, src.data() + b, static_cast<size_t>(e - b));
        });
      },
      2, reps);
  return 2.0 * static_cast<double>(bytes) / t / 1e9;
}

double measure_read_gbps(size_t bytes, int reps) {
  std::vector<uint64_t> buf(bytes / sizeof(uint64_t), 1);
  volatile uint64_t sink = 0;
  double t = time_median(
      [&] {
        uint64_t total = 0;
#pragma omp parallel for reduction(+ : total) schedule(static)
        for (int64_t i = 0; i < static_cast<int64_t>(buf.size()); ++i) total += buf[i];
        sink = sink + total;
      },
      2, reps);
  return static_cast<double>(bytes) / t / 1e9;
}

#if defined(__AVX512F__)
constexpr int kAcc = 12;  // independent sums: more than the instruction's latency x throughput

// One thread's register-only multiply-add loop: vdpbf16ps with kDp, else the fp32 FMA.
template <bool kDp>
float dot_peak_loop(int64_t iters) {
  __m512 acc[kAcc];
  for (int j = 0; j < kAcc; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j));
  __m512 x = _mm512_set1_ps(1e-3f);
  for (int64_t i = 0; i < iters; ++i) {
    for (int j = 0; j < kAcc; ++j) {
#if defined(__AVX512BF16__)
      if constexpr (kDp) {
        acc[j] = _mm512_dpbf16_ps(acc[j], (__m512bh)x, (__m512bh)x);
        continue;
      }
#endif
      acc[j] = _mm512_fmadd_ps(acc[j], x, x);
    }
    asm volatile("" : "+v"(x));  // an operand the compiler cannot hoist out of the loop
  }
  __m512 total = acc[0];
  for (int j = 1; j < kAcc; ++j) total = _mm512_add_ps(total, acc[j]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, total);
  return lanes[0];
}
#endif

double measure_dot_gmacs(DType dtype) {
#if defined(__AVX512F__)
  if (dtype == DType::kBF16 && ops::cpu::amx::available()) return 0.0;
#if defined(__AVX512BF16__)
  const bool dp = dtype == DType::kBF16;
#else
  const bool dp = false;
#endif
  constexpr int64_t kIters = 1 << 20;  // ~10 ms a thread
  volatile float sink = 0.0f;
  const double t = time_median(
      [&] {
#pragma omp parallel
        {
          const float v = dp ? dot_peak_loop<true>(kIters) : dot_peak_loop<false>(kIters);
#pragma omp critical
          sink = sink + v;
        }
      },
      1, 3);
  return static_cast<double>(num_threads()) * kIters * kAcc * (dp ? 32 : 16) / t / 1e9;
#else
  (void)dtype;
  return 0.0;
#endif
}

void print_rows(const std::vector<Row>& rows) {
  std::printf("%-44s %13s %13s %7s  %s\n", "case", "measured", "peak/floor", "ratio", "peak is");
  for (const Row& r : rows)
    std::printf("%-44s %8.1f %-4s %8.1f %-4s %6.1f%%  %s\n", r.name.c_str(), r.value,
                r.unit.c_str(), r.peak, r.unit.c_str(), 100.0 * r.value / r.peak,
                r.peak_name.c_str());
}

json rows_json(const std::vector<Row>& rows) {
  json results = json::array();
  for (const Row& r : rows)
    results.push_back({{"case", r.name}, {"value", r.value}, {"unit", r.unit}, {"peak", r.peak},
                       {"ratio", r.value / r.peak}, {"peak_is", r.peak_name}});
  return results;
}

}  // namespace vela::cli
