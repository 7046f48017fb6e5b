// SamplerCopies (engine/runtime/sampler.h): the parameter upload on a side stream and the results
// written by the kernel into the pinned read-back buffer give the bits of the plain copies, with
// two steps in flight as the engine's overlapped steps keep them, and under graph capture (where
// both fall back to the plain copies).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "core/cuda/stream.h"
#include "cuda/cuda_test_util.h"
#include "engine/runtime/sampler.h"
#include "engine/sampler_test_util.h"

namespace vela {
namespace {

using test::sampling_configs;
using test::sampling_logits;

class CudaSamplerCopiesTest : public test::CudaTest {};

void expect_same(const std::vector<SampleResult>& got, const std::vector<SampleResult>& want,
                 const char* what, int step) {
  ASSERT_EQ(got.size(), want.size()) << what << " step " << step;
  for (size_t r = 0; r < got.size(); ++r) {
    EXPECT_EQ(got[r].token, want[r].token) << what << " step " << step << " row " << r;
    EXPECT_EQ(std::memcmp(&got[r].logprob, &want[r].logprob, 4), 0)
        << what << " step " << step << " row " << r;
    EXPECT_EQ(got[r].top_logprobs, want[r].top_logprobs)
        << what << " step " << step << " row " << r;
  }
}

// Holds the stream it is enqueued on until *flag is set (a host function: the stream's later work
// waits, the host goes on).
void CUDART_CB hold_until(void* flag) {
  while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::yield();
}

// Every configuration (penalties from histories, bias, logprobs raw and tempered with 0..5 top
// entries) in 64-row batches of a 151,936 vocabulary; each step's rows and logits differ, so a
// launch that read the next step's parameters or a read-back of the wrong step shows. Each step's
// launch waits on the engine's stream behind a held host function while the next step is staged:
// a side upload that did not wait for the engine's stream would overwrite the parameters the
// launch has not read yet. Every fourth row carries 20,000 logit-bias entries, so the upload (2.5
// MB) outlasts a kernel's start: a launch that did not join the side stream would read a part.
TEST_F(CudaSamplerCopiesTest, SameBitsAsThePlainCopiesWithTwoStepsInFlight) {
  const int64_t vocab = 151936;
  const int32_t batch = 64, n_steps = 12;
  std::vector<test::SamplingConfig> configs = sampling_configs(vocab);
  const size_t n_plain = configs.size();
  for (size_t i = 0; i < n_plain; ++i) {
    test::SamplingConfig c = configs[i];
    c.params.logprobs = true;
    c.params.top_logprobs = static_cast<int32_t>(i % 6);
    c.params.logprobs_mode = i % 2 ? LogprobsMode::kTempered : LogprobsMode::kRaw;
    configs.push_back(c);
  }
  SamplingParams wide_bias;
  wide_bias.temperature = 0.9f;
  for (int32_t i = 0; i < 20000; ++i)
    wide_bias.logit_bias.emplace_back((i * 7) % static_cast<int32_t>(vocab),
                                      0.001f * static_cast<float>(i % 13));
  const auto prompts = test::random_histories(batch, vocab, 40, 5);
  const auto outputs = test::random_histories(batch, vocab, 16, 6);
  std::vector<Tensor> logits;
  std::vector<std::vector<SamplerRow>> rows(n_steps);
  for (int32_t s = 0; s < n_steps; ++s) {
    logits.push_back(sampling_logits(batch, vocab, 300 + s, 12.0f, 1.0f).to(gpu()));
    for (int32_t r = 0; r < batch; ++r) {
      const size_t c = static_cast<size_t>(s * 7 + r) % configs.size();
      rows[s].push_back({r % 4 == 3 ? &wide_bias : &configs[c].params,
                         &prompts[static_cast<size_t>(r)], &outputs[static_cast<size_t>(r)],
                         11u + static_cast<uint64_t>(r), static_cast<uint64_t>(s),
                         static_cast<uint64_t>(r % 3)});
    }
  }
  Sampler plain(vocab, batch, gpu(), 0, 0, SamplerCopies{});
  std::vector<std::vector<SampleResult>> want(n_steps);
  for (int32_t s = 0; s < n_steps; ++s) plain.sample(logits[s], rows[s], want[s]);

  const struct {
    const char* name;
    SamplerCopies copies;
  } modes[] = {
      {"side upload", {true, false}}, {"mapped read-back", {false, true}}, {"both", {true, true}}};
  for (const auto& mode : modes) {
    Sampler dev(vocab, batch, gpu(), 0, 0, mode.copies);
    std::vector<SampleResult> got;
    std::vector<std::atomic<bool>> go(n_steps);
    int ticket = -1;
    dev.stage(rows[0]);
    for (int32_t s = 0; s < n_steps; ++s) {
      // The engine's order: the next step is staged (and launched) before the last one's results
      // are collected; here its stage comes while this step's launch is held on the stream.
      ASSERT_EQ(cudaLaunchHostFunc(cuda::current_stream(), hold_until, &go[s]), cudaSuccess);
      dev.launch(logits[s]);
      const int next = dev.download();
      if (s + 1 < n_steps) dev.stage(rows[s + 1]);
      go[s] = true;
      if (ticket >= 0) {
        dev.collect(ticket, got);
        expect_same(got, want[s - 1], mode.name, s - 1);
      }
      ticket = next;
    }
    dev.collect(ticket, got);
    expect_same(got, want[n_steps - 1], mode.name, n_steps - 1);
    // The device copy of the tokens (the next step's input ids) is written either way.
    std::vector<int32_t> ids = dev.device_tokens().to(Device::cpu()).to_vector<int32_t>();
    for (int32_t r = 0; r < batch; ++r)
      EXPECT_EQ(ids[static_cast<size_t>(r)], want[n_steps - 1][static_cast<size_t>(r)].token)
          << mode.name << " row " << r;
  }
}

// A launch captured in a graph with both copies on: the capture neither waits on the side stream
// (the host waits for the copy, in relaxed capture mode) nor bakes a read-back buffer in; the
// stages between replays upload on the engine's stream and the replays read back by copy; plain
// steps afterwards take the mapped writes again and keep the upload on the engine's stream.
TEST_F(CudaSamplerCopiesTest, GraphCaptureFallsBackToThePlainCopies) {
  const int64_t vocab = 100000;
  const int32_t n = 8;
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  {
    cuda::StreamGuard guard(stream);
    Tensor logits = sampling_logits(n, vocab, 43).to(gpu());
    Sampler dev(vocab, n, gpu(), 0, 0, SamplerCopies{true, true});
    Sampler ref(vocab, n, gpu(), 0, 0, SamplerCopies{});
    SamplingParams p;
    p.temperature = 0.8f;
    p.top_k = 40;
    p.logprobs = true;
    p.top_logprobs = 3;
    auto rows_at = [&](uint64_t step) {
      std::vector<SamplerRow> rows;
      for (int32_t r = 0; r < n; ++r)
        rows.push_back({&p, nullptr, nullptr, 9, step, static_cast<uint64_t>(r)});
      return rows;
    };
    std::vector<SampleResult> a, b;
    dev.sample(logits, rows_at(0), a);  // warm-up (sets the kernel's shared-memory limit)
    ref.sample(logits, rows_at(0), b);
    expect_same(a, b, "warm-up", 0);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec;
    dev.stage(rows_at(1));  // on the side stream: the captured launch waits for it on the host
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    {
      struct EndCapture {  // also when launch() throws: no capture left open on this thread
        cudaStream_t s;
        cudaGraph_t* g;
        ~EndCapture() { cudaStreamEndCapture(s, g); }
      } end{stream, &graph};
      dev.launch(logits);
    }
    ASSERT_NE(graph, nullptr);
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (uint64_t step = 1; step < 5; ++step) {
      if (step > 1) dev.stage(rows_at(step));
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      dev.finish(a);
      ref.sample(logits, rows_at(step), b);
      expect_same(a, b, "replay", static_cast<int>(step));
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    for (uint64_t step = 5; step < 8; ++step) {
      dev.sample(logits, rows_at(step), a);
      ref.sample(logits, rows_at(step), b);
      expect_same(a, b, "after the graph", static_cast<int>(step));
    }
  }
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace vela
