// `vela bench sampler`: the engine's Sampler (engine/runtime/sampler.h) on batches of LM-like
// logits rows (a Gaussian body plus a peaked head, vocab 151936 by default), per filter
// configuration: median microseconds per call and per row. On the CPU the logits are restored
// before every timed call (outside the timing), so rows the sampler rewrites start from the same
// values. On CUDA (--device cuda) a call is the round trip stage + launch + finish (upload,
// kernels, read-back, stream sync), and kernel_us the kernels alone (launches back to back
// between two events).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "cli/args.h"
#include "core/cuda/cuda_api.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "engine/runtime/sampler.h"

namespace vela::cli {
namespace {

struct Config {
  const char* name;
  SamplingParams params;
};

std::vector<Config> configs() {
  std::vector<Config> c;
  auto add = [&](const char* name, auto&& set) {
    SamplingParams p;
    set(p);
    c.push_back({name, p});
  };
  add("greedy", [](SamplingParams& p) { p.temperature = 0.0f; });
  add("temperature", [](SamplingParams& p) { p.temperature = 0.8f; });
  add("top_k=40", [](SamplingParams& p) { p.top_k = 40; });
  add("top_p=0.9", [](SamplingParams& p) { p.top_p = 0.9f; });
  add("min_p=0.05", [](SamplingParams& p) { p.min_p = 0.05f; });
  add("combo", [](SamplingParams& p) {
    p.temperature = 0.7f;
    p.top_k = 50;
    p.top_p = 0.95f;
    p.min_p = 0.02f;
  });
  add("penalties", [](SamplingParams& p) {
    p.repetition_penalty = 1.1f;
    p.frequency_penalty = 0.3f;
    p.presence_penalty = 0.2f;
  });
  add("logprobs=5", [](SamplingParams& p) {
    p.logprobs = true;
    p.top_logprobs = 5;
  });
  add("tempered_lp", [](SamplingParams& p) {
    p.temperature = 0.9f;
    p.top_p = 0.95f;
    p.logprobs = true;
    p.logprobs_mode = LogprobsMode::kTempered;
  });
  return c;
}

// CUDA: microseconds per launch of the staged rows, `reps` launches back to back between two
// events (the kernels alone: no upload, no read-back).
double time_launches(Sampler& sampler, const Tensor& logits, const std::vector<SamplerRow>& rows,
                     int reps) {
  const int device = logits.device().index;
  cuda::StreamEvent begin(device, /*timing=*/true), end(device, /*timing=*/true);
  std::vector<SampleResult> out;
  sampler.stage(rows);
  begin.record();
  for (int i = 0; i < reps; ++i) sampler.launch(logits);
  end.record();
  end.synchronize();
  sampler.finish(out);
  return 1000.0 * cuda::StreamEvent::elapsed_ms(begin, end) / reps;
}

}  // namespace

int bench_sampler_main(int argc, char** argv) {
  if (argc >= 1 && !std::strcmp(argv[0], "--help")) {
    std::printf(
        "usage: vela bench sampler [--vocab N] [--rows 1,16] [--reps N] [--device cpu|cuda[:N]]\n"
        "                          [--json FILE]\n"
        "  Times Sampler::sample per filter configuration (CUDA: the round trip and the "
        "kernels).\n");
    return 0;
  }
  Args args(argc, argv, {});
  const int64_t vocab = args.get_int("vocab", 151936);
  const int reps = static_cast<int>(args.get_int("reps", 30));
  const std::string json_path = args.get("json", "");
  const Device device = Device::parse(args.get("device", "cpu"));
  const bool on_cuda = device.is_cuda();
  VELA_CHECK(!on_cuda || cuda::available(), "vela bench sampler: --device ", device.str(),
             " but no usable CUDA device");
  std::vector<int32_t> row_counts;
  {
    const std::string list = args.get("rows", "1,16");
    size_t at = 0;
    while (at <= list.size()) {
      const size_t comma = std::min(list.find(',', at), list.size());
      row_counts.push_back(static_cast<int32_t>(std::stoi(list.substr(at, comma - at))));
      at = comma + 1;
    }
  }

  std::vector<int32_t> prompt, output;
  Rng hist(7);
  for (int i = 0; i < 512; ++i) prompt.push_back(static_cast<int32_t>(hist.next_u32() % 4096));
  for (int i = 0; i < 128; ++i) output.push_back(static_cast<int32_t>(hist.next_u32() % 4096));

  std::printf("sampler bench: vocab %lld, %s, median of %d\n", static_cast<long long>(vocab),
              on_cuda ? device.str().c_str() : (std::to_string(num_threads()) + " threads").c_str(),
              reps);
  std::printf("%-14s %5s %12s %12s %12s\n", "config", "rows", "us/call", "us/row",
              on_cuda ? "kernel_us" : "copy_us");
  json results = json::array();
  for (int32_t n_rows : row_counts) {
    Tensor logits = Tensor::empty({n_rows, vocab}, DType::kF32);
    Rng rng(11);
    float* x = logits.data<float>();
    for (int64_t r = 0; r < n_rows; ++r) {
      float* row = x + r * vocab;
      for (int64_t i = 0; i < vocab; ++i) row[i] = rng.normal();
      for (int j = 0; j < 8; ++j) row[rng.next_u32() % vocab] += 4.0f + 8.0f * rng.uniform();
    }
    Tensor work = on_cuda ? logits.to(device) : logits.clone();
    Sampler sampler(vocab, n_rows, device);
    std::vector<SampleResult> out;
    for (const Config& c : configs()) {
      std::vector<SamplerRow> rows;
      for (int32_t r = 0; r < n_rows; ++r)
        rows.push_back({&c.params, &prompt, &output, 1234, 0, static_cast<uint64_t>(r)});
      uint64_t step = 0;
      if (on_cuda) {  // the op reads the logits only: nothing to restore
        const double t = time_median(
            [&] {
              for (auto& row : rows) row.step = step;
              ++step;
              sampler.sample(work, rows, out);
            },
            2, reps);
        const double kernel_us = time_launches(sampler, work, rows, reps);
        std::printf("%-14s %5d %12.1f %12.1f %12.1f\n", c.name, n_rows, t * 1e6, t * 1e6 / n_rows,
                    kernel_us);
        results.push_back({{"config", c.name},
                           {"rows", n_rows},
                           {"us_per_call", t * 1e6},
                           {"kernel_us", kernel_us}});
        continue;
      }
      // Restoring the rows is part of each call here; it is timed apart and subtracted.
      const double t_copy = time_median(
          [&] { std::memcpy(work.data_ptr(), logits.data_ptr(), logits.nbytes()); }, 2, reps);
      const double t = time_median(
          [&] {
            std::memcpy(work.data_ptr(), logits.data_ptr(), logits.nbytes());
            for (auto& row : rows) row.step = step;
            ++step;
            sampler.sample(work, rows, out);
          },
          2, reps);
      const double us = (t - t_copy) * 1e6;
      // copy_us: what copying the rows costs (the old CPU scheduler path copied every row before
      // sampling; the sampler now reads the logits in place).
      std::printf("%-14s %5d %12.1f %12.1f %12.1f\n", c.name, n_rows, us, us / n_rows,
                  t_copy * 1e6);
      results.push_back({{"config", c.name}, {"rows", n_rows}, {"us_per_call", us}});
    }
  }
  if (!json_path.empty()) {
    json j;
    j["benchmark"] = "sampler";
    j["vocab"] = vocab;
    j["device"] = device.str();
    if (!on_cuda) j["threads"] = num_threads();
    j["results"] = results;
    std::ofstream(json_path) << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace vela::cli
