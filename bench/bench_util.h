// Shared benchmark helpers: median timing, random tensors, result rows with a peak and a ratio.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/tensor.h"

namespace vela::cli {

// Median seconds of `reps` timed calls after `warmup` untimed ones.
double time_median(const std::function<void()>& fn, int warmup, int reps);
// Uniform(-0.5, 0.5) values from Philox(seed), stored as `dtype` on the CPU.
Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed);
// Host memory bandwidth of a parallel memcpy over `bytes` (read + write counted), GB/s.
double measure_copy_gbps(size_t bytes, int reps);
// Host memory read bandwidth: a parallel sum over `bytes` (far larger than the caches), GB/s.
double measure_read_gbps(size_t bytes, int reps);
// Host multiply-add peak of the instruction the CPU GEMM tiles use for weights of `dtype`, all
// threads, register operands only, GMAC/s: vdpbf16ps (32 a zmm) for bf16 where the build has
// avx512_bf16, else the zmm fp32 FMA (16). 0 where no such bound applies (AMX CPUs, whose bf16
// tiles are far faster; builds without AVX-512).
double measure_dot_gmacs(DType dtype);

struct Row {
  std::string name, unit;
  double value, peak;
  std::string peak_name;
};
void print_rows(const std::vector<Row>& rows);
json rows_json(const std::vector<Row>& rows);

int bench_model_main(int argc, char** argv);
int bench_engine_main(int argc, char** argv);
int bench_serve_main(int argc, char** argv);
int bench_spec_main(int argc, char** argv);
int bench_sampler_main(int argc, char** argv);
int bench_constrain_main(int argc, char** argv);
int bench_stream_main(int argc, char** argv);

}  // namespace vela::cli
