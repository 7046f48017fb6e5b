// `vela bench stream` (CUDA): how fast one kernel streams a read-once buffer of weights from HBM,
// by each way a one-row decode kernel could load them (ops/cuda/bench_cuda.h StreamMethod:
// register loads, bulk copies into a shared-memory ring with three refill policies, cp.async).
// The question it answers: can a shared-memory weight stream (the weight ring, a persistent
// megakernel) match the register GEMV's bandwidth, and with which ring shape. Rates are read
// GB/s against the device-to-device copy rate (read + write), the floors' reference. Then the
// skeleton of a persistent decode kernel (bench_phased_stream): a step's one-row weights streamed
// by one kernel with a grid barrier between its phases or a counter per K chunk of each phase's
// input, microseconds a layer.
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "cli/args.h"
#include "core/cuda/cuda_api.h"
#include "core/mmap_file.h"
#if defined(VELA_HAS_CUDA)
#include "ops/cuda/bench_cuda.h"
#endif

namespace vela::cli {

#if defined(VELA_HAS_CUDA)
namespace {

using ops::cuda::StreamMethod;
using Kind = StreamMethod::Kind;
using Refill = StreamMethod::Refill;

struct Case {
  std::string name;
  StreamMethod m;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  auto reg = [&](int loads, int bps) {
    StreamMethod m;
    m.kind = Kind::kRegister;
    m.loads = loads;
    m.blocks_per_sm = bps;
    c.push_back(
        {"register loads=" + std::to_string(loads) + " blocks/SM=" + std::to_string(bps), m});
  };
  for (int bps : {1, 2, 4})
    for (int loads : {4, 8, 16}) reg(loads, bps);
  auto bulk = [&](Refill refill, int warps, int stage_kb, int stages, int copy_bytes, int bps,
                  bool evict_first = true) {
    StreamMethod m;
    m.kind = Kind::kBulk;
    m.refill = refill;
    m.warps = warps;
    m.stage_kb = stage_kb;
    m.stages = stages;
    m.copy_bytes = copy_bytes;
    m.blocks_per_sm = bps;
    m.evict_first = evict_first;
    const char* how = refill == Refill::kCopiesOnly ? "copies-only"
                      : refill == Refill::kProducer ? "producer"
                                                    : "block-barrier";
    std::string name = std::string("bulk ") + how;
    if (refill != Refill::kCopiesOnly) name += " warps=" + std::to_string(warps);
    name += " stage=" + std::to_string(stage_kb) + "K x" + std::to_string(stages);
    name += copy_bytes > 0 ? " copy=" + std::to_string(copy_bytes) + "B" : " copy=stage";
    if (bps > 1) name += " blocks/SM=" + std::to_string(bps);
    if (!evict_first) name += " no-hint";
    c.push_back({name, m});
  };
  // Copies alone: how many bytes a block must keep in flight.
  for (int stages : {2, 4, 8, 12}) bulk(Refill::kCopiesOnly, 1, 16, stages, 0, 1);
  bulk(Refill::kCopiesOnly, 1, 32, 6, 0, 1);
  bulk(Refill::kCopiesOnly, 1, 16, 12, 0, 1, false);
  bulk(Refill::kCopiesOnly, 1, 16, 6, 0, 2);
  bulk(Refill::kCopiesOnly, 1, 24, 4, 3072, 1);
  // The weight ring's shapes today (bench-1b: gate|up 24 KB x 4 of 3 KB rows, the LM head
  // 12 KB x 8), then larger rings, then a producer warp instead of the block barrier.
  bulk(Refill::kBlockBarrier, 8, 24, 4, 3072, 1);
  bulk(Refill::kBlockBarrier, 8, 12, 8, 3072, 1);
  bulk(Refill::kBlockBarrier, 8, 16, 12, 0, 1);
  bulk(Refill::kBlockBarrier, 16, 16, 12, 0, 1);
  bulk(Refill::kBlockBarrier, 8, 24, 4, 3072, 2);
  bulk(Refill::kProducer, 8, 24, 4, 3072, 1);
  bulk(Refill::kProducer, 8, 16, 12, 0, 1);
  bulk(Refill::kProducer, 4, 16, 12, 0, 1);
  bulk(Refill::kProducer, 16, 16, 12, 0, 1);
  bulk(Refill::kProducer, 8, 8, 24 / 2, 0, 2);
  for (int stages : {4, 8}) {
    StreamMethod m;
    m.kind = Kind::kCpAsync;
    m.warps = 8;
    m.stage_kb = 16;
    m.stages = stages;
    c.push_back({"cp.async warps=8 stage=16K x" + std::to_string(stages), m});
  }
  return c;
}

}  // namespace
#endif

int bench_stream_main(int argc, char** argv) {
  Args args(argc, argv, {});
  const int64_t mb = args.get_int("mb", 1024);
  const std::string filter = args.get("filter", "");
  const std::string json_path = args.get("json", "");
  const int chunks = static_cast<int>(args.get_int("chunks", 16));  // K chunks, chunk counters
  args.check_all_used();
  VELA_CHECK(chunks >= 1 && chunks <= 64, "--chunks must be 1..64, got ", chunks);
  VELA_CHECK(mb >= 64 && mb <= 16384, "--mb must be 64..16384 (MiB streamed a call), got ", mb);
#if defined(VELA_HAS_CUDA)
  VELA_CHECK_T(Unsupported, cuda::available(), "no usable CUDA device");
  std::printf("CUDA (%s), %lld MiB a call\n", cuda::device_description(0).c_str(),
              static_cast<long long>(mb));
  const size_t bytes = static_cast<size_t>(mb) << 20;
  const double copy = ops::cuda::bench_copy_gbps(bytes);
  std::vector<Row> rows;
  rows.push_back({"cuda copy D2D (read+write)", "GB/s", copy, copy, "itself"});
  for (const Case& c : cases()) {
    if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
    double gbps = 0.0;
    try {
      gbps = ops::cuda::bench_stream_gbps(c.m, bytes);
    } catch (const Unsupported& e) {
      std::printf("%-60s skipped: %s\n", c.name.c_str(), e.what());
      continue;
    }
    rows.push_back({c.name, "GB/s", gbps, copy, "D2D copy"});
  }
  print_rows(rows);
  // The megakernel skeleton: bench-1b's 24 layers of one-row weights through one persistent
  // kernel, with grid barriers between phases, with per-K-chunk counters, and with neither.
  json phased = json::array();
  if (filter.empty() || filter == "phased") {
    std::printf("\nbench-1b's weights a step as one persistent kernel (5 phases a layer)\n");
    using ops::cuda::PhasedSync;
    bool supported = true;
    for (int warps : {8, 16}) {
      for (auto [kb, stages] : {std::pair<int, int>{16, 12}, {24, 8}, {32, 6}, {8, 16}}) {
        for (PhasedSync sync : {PhasedSync::kGrid, PhasedSync::kChunks, PhasedSync::kNone}) {
          if (!supported) break;
          const char* how = sync == PhasedSync::kGrid     ? "grid barriers"
                            : sync == PhasedSync::kChunks ? "chunk counters"
                                                          : "no barriers";
          try {
            const auto r = ops::cuda::bench_phased_stream({}, kb, stages, sync, chunks, warps);
            std::printf(
                "  %2d consumer warps, stages %2d x %2d KiB, %-14s %7.2f us a layer, %7.0f GB/s "
                "(%.1f%% of copy)\n",
                warps, stages, kb, how, r.us_per_layer, r.gbps, 100.0 * r.gbps / copy);
            phased.push_back({{"consumer_warps", warps},
                              {"stage_kb", kb},
                              {"stages", stages},
                              {"sync", how},
                              {"chunks", sync == PhasedSync::kChunks ? chunks : 0},
                              {"us_per_layer", r.us_per_layer},
                              {"gbps", r.gbps}});
          } catch (const Unsupported& e) {
            std::printf("  phased stream skipped: %s\n", e.what());
            supported = false;
          }
        }
      }
    }
  }
  if (!json_path.empty()) {
    json j;
    j["phased"] = phased;
    j["benchmark"] = "stream";
    j["device"] = cuda::device_description(0);
    j["mib"] = mb;
    j["results"] = rows_json(rows);
    const std::string s = j.dump(2) + "\n";
    write_file_atomic(json_path, s.data(), s.size());
  }
  return 0;
#else
  (void)mb;
  VELA_THROW(Unsupported, "this build has no CUDA backend");
#endif
}

}  // namespace vela::cli
