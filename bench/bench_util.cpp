// Shared benchmark helpers.
#include "bench/bench_util.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "core/parallel.h"
#include "core/rng.h"

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
