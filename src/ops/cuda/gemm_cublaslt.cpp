// CUDA GEMM through cuBLASLt (host code; gemm.cu has the K = 0 kernel): c = alpha * op(a) @ op(b) +
// beta * c on row-major tensors, fp32 accumulation (CUBLAS_COMPUTE_32F; TF32 only when allowed, see
// gemm_cublaslt.h).
//
// cuBLAS is column-major, so the row-major c[M, N] is computed as the column-major
// c^T[N, M] = op(b)^T @ op(a)^T: b's storage is cuBLAS's A, a's storage is cuBLAS's B, and the
// transposes carry over unchanged. One cuBLASLt handle per device and one 32 MiB workspace (from
// the caching allocator) per device and stream: GEMMs on two streams may run at once (two engines
// on one GPU, a draft model's stream, a trainer beside an engine), and a matmul's workspace is its
// scratch (split-K partials), so a workspace shared across streams corrupts results; descriptors
// and the algorithm are cached per shape key, so a repeated shape makes no heuristic query. Inside
// a tuning session (ops/gemm_tuning.h) a new small-M plan times the heuristic's top candidates and
// keeps the fastest (`tune_plan`), optionally through a disk cache keyed by GPU name, cuBLASLt
// version and the shape key.
#include "ops/cuda/gemm_cublaslt.h"

#include <cublasLt.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/cuda/cuda_api.h"
#include "core/cuda/stream.h"
#include "core/env.h"
#include "core/log.h"
#include "ops/cuda/cublas_check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/gemm_tune_cache.h"

namespace vela::ops::cuda {

using vela::cuda::current_stream;
using vela::cuda::DeviceGuard;

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;
constexpr int kMaxDevices = 64;

std::atomic<bool> g_allow_tf32{env_opted_in("VELA_ALLOW_TF32")};

// Everything that decides descriptors and algorithm (all int64 so the key has no padding).
using GemmKey = std::array<int64_t, 21>;
struct GemmKeyHash {
  size_t operator()(const GemmKey& key) const {
    size_t h = 1469598103934665603ull;
    for (int64_t v : key) h = (h ^ static_cast<size_t>(v)) * 1099511628211ull;
    return h;
  }
};

struct GemmPlan {
  cublasLtMatmulDesc_t op_desc = nullptr;
  cublasLtMatrixLayout_t a_layout = nullptr;  // cuBLAS's A = vela's b
  cublasLtMatrixLayout_t b_layout = nullptr;  // cuBLAS's B = vela's a
  cublasLtMatrixLayout_t c_layout = nullptr;
  cublasLtMatmulAlgo_t algo{};
  GemmPlan() = default;
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;
  ~GemmPlan() {  // cached plans live as long as the process; this frees the discarded ones
    if (c_layout) cublasLtMatrixLayoutDestroy(c_layout);
    if (b_layout) cublasLtMatrixLayoutDestroy(b_layout);
    if (a_layout) cublasLtMatrixLayoutDestroy(a_layout);
    if (op_desc) cublasLtMatmulDescDestroy(op_desc);
  }
};

// Per device: handle, workspace, plans, tuning results. Never destroyed (plans outlive static
// destruction order).
struct DeviceGemm {
  cublasLtHandle_t handle = nullptr;
  std::mutex mu;  // guards everything below
  // Per stream (nullptr: the legacy default stream), made by its first GEMM (the eager run before
  // a graph capture: graphs bake the pointer in) and freed by gemm_release_stream().
  std::unordered_map<cudaStream_t, void*> workspaces;
  std::unordered_map<GemmKey, std::unique_ptr<GemmPlan>, GemmKeyHash> plans;
  std::vector<GemmTuneRecord> records;
  // Disk cache entries of this GPU and cuBLASLt version (loaded once per path), and whether new
  // tuned plans wait to be written.
  std::string disk_path;
  std::string broken_path;  // a cache file that could not be read: not used, never overwritten
  std::unordered_map<GemmKey, cublasLtMatmulAlgo_t, GemmKeyHash> disk;
  bool disk_dirty = false;
};

DeviceGemm& device_gemm(int device) {
  static std::mutex mu;
  static std::array<DeviceGemm*, kMaxDevices> contexts{};
  VELA_CHECK(device >= 0 && device < kMaxDevices, "CUDA device ", device, " out of range");
  std::lock_guard<std::mutex> lock(mu);
  if (!contexts[device]) {
    auto ctx = std::make_unique<DeviceGemm>();
    VELA_CUBLAS_CHECK(cublasLtCreate(&ctx->handle));
    contexts[device] = ctx.release();
  }
  return *contexts[device];
}

// The skinny GEMM's split-K tickets, past the cuBLASLt workspace (which never touches them).
constexpr int kSkinnyCounters = 16384;
constexpr size_t kCounterBytes = kSkinnyCounters * sizeof(int);

// The workspace of GEMMs on `stream` (ctx.mu held); allocated on that stream the first time, with
// the skinny GEMM's counters zeroed behind it.
void* stream_workspace(DeviceGemm& ctx, int device, cudaStream_t stream) {
  void*& w = ctx.workspaces[stream];
  if (w == nullptr) {
    w = vela::cuda::device_alloc(kWorkspaceBytes + kCounterBytes, device);
    VELA_CUDA_CHECK(
        cudaMemsetAsync(static_cast<char*>(w) + kWorkspaceBytes, 0, kCounterBytes, stream));
  }
  return w;
}

cudaDataType_t cuda_type(DType dt) {
  switch (dt) {
    case DType::kF32:
      return CUDA_R_32F;
    case DType::kBF16:
      return CUDA_R_16BF;
    case DType::kF16:
      return CUDA_R_16F;
    default:
      VELA_THROW(Unsupported, "CUDA gemm on dtype ", dtype_name(dt));
  }
}

// Largest power of two (<= 256) dividing the address: what cuBLASLt may assume about it.
int64_t pointer_alignment(const void* p) {
  uintptr_t u = reinterpret_cast<uintptr_t>(p);
  int64_t a = 1;
  while (a < 256 && u % (2 * a) == 0) a *= 2;
  return a;
}

// A row-major [rows, cols] operand with row stride `ld` is a column-major [cols, rows] matrix
// with the same leading dimension. A single row may carry any stride; cuBLAS wants ld >= cols.
int64_t leading_dim(int64_t rows, int64_t cols, int64_t row_stride) {
  return rows <= 1 ? std::max<int64_t>(cols, 1) : row_stride;
}

void set_layout_batch(cublasLtMatrixLayout_t layout, int64_t batch, int64_t stride) {
  if (batch <= 1) return;
  const int32_t count = static_cast<int32_t>(batch);
  VELA_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                     &count, sizeof(count)));
  VELA_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
      layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
}

// Key layout (indices into GemmKey).
enum KeyField {
  kM,
  kN,
  kK,
  kBatch,
  kTransA,
  kTransB,
  kLda,
  kLdb,
  kLdc,
  kStrideA,
  kStrideB,
  kStrideC,
  kInType,
  kOutType,
  kCompute,
  kAlignA,
  kAlignB,
  kAlignC,
  kRowsA,
  kRowsB,
  kUnused,
};

// The descriptors of `key` (no algorithm yet).
std::unique_ptr<GemmPlan> make_descriptors(const GemmKey& key) {
  auto plan = std::make_unique<GemmPlan>();
  const auto in_type = static_cast<cudaDataType_t>(key[kInType]);
  const auto out_type = static_cast<cudaDataType_t>(key[kOutType]);
  const auto compute = static_cast<cublasComputeType_t>(key[kCompute]);
  const auto op_a = static_cast<cublasOperation_t>(key[kTransA]);
  const auto op_b = static_cast<cublasOperation_t>(key[kTransB]);
  VELA_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op_desc, compute, CUDA_R_32F));
  VELA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op_desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                   &op_a, sizeof(op_a)));
  VELA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op_desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                   &op_b, sizeof(op_b)));
  // Stored (pre-op) shapes, column-major: A is [m, k] (or [k, m] when transposed), B [k, n] (or
  // [n, k]), C [m, n].
  const uint64_t m = key[kM], n = key[kN], k = key[kK];
  VELA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a_layout, in_type,
                                               op_a == CUBLAS_OP_N ? m : k,
                                               op_a == CUBLAS_OP_N ? k : m, key[kLda]));
  VELA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b_layout, in_type,
                                               op_b == CUBLAS_OP_N ? k : n,
                                               op_b == CUBLAS_OP_N ? n : k, key[kLdb]));
  VELA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->c_layout, out_type, m, n, key[kLdc]));
  set_layout_batch(plan->a_layout, key[kBatch], key[kStrideA]);
  set_layout_batch(plan->b_layout, key[kBatch], key[kStrideB]);
  set_layout_batch(plan->c_layout, key[kBatch], key[kStrideC]);
  return plan;
}

// Descriptors of `key` plus up to `n_wanted` heuristic algorithms, best first by the heuristic.
std::unique_ptr<GemmPlan> make_plan(DeviceGemm& ctx, const GemmKey& key, int n_wanted,
                                    std::vector<cublasLtMatmulHeuristicResult_t>& results) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<GemmPlan> plan = make_descriptors(key);
  const uint64_t m = key[kM], n = key[kN], k = key[kK];
  cublasLtMatmulPreference_t pref = nullptr;
  VELA_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t workspace_bytes = kWorkspaceBytes;
  const uint32_t align_a = static_cast<uint32_t>(key[kAlignA]);
  const uint32_t align_b = static_cast<uint32_t>(key[kAlignB]);
  const uint32_t align_c = static_cast<uint32_t>(key[kAlignC]);
  VELA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof(workspace_bytes)));
  // Split-K partial sums must be reduced in fp32: reductions in the output type (bf16 / f16, also
  // "in place" in the output buffer) lost up to 0.5 absolute on K = 6912 rows (H200 test).
  const uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  VELA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction, sizeof(reduction)));
  VELA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a)));
  VELA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b)));
  VELA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof(align_c)));
  VELA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof(align_c)));

  results.assign(static_cast<size_t>(std::max(n_wanted, 1)), cublasLtMatmulHeuristicResult_t{});
  int n_results = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      ctx.handle, plan->op_desc, plan->a_layout, plan->b_layout, plan->c_layout, plan->c_layout,
      pref, static_cast<int>(results.size()), results.data(), &n_results);
  cublasLtMatmulPreferenceDestroy(pref);
  VELA_CUBLAS_CHECK(status);
  results.resize(static_cast<size_t>(std::max(n_results, 0)));
  results.erase(std::remove_if(results.begin(), results.end(),
                               [](const cublasLtMatmulHeuristicResult_t& r) {
                                 return r.state != CUBLAS_STATUS_SUCCESS ||
                                        r.workspaceSize > kWorkspaceBytes;
                               }),
                results.end());
  VELA_CHECK_T(Unsupported, !results.empty(), "cuBLASLt has no algorithm for gemm m=", m, " n=", n,
               " k=", k, " batch=", key[kBatch], " lda=", key[kLda], " ldb=", key[kLdb],
               " ldc=", key[kLdc]);
  plan->algo = results[0].algo;
  VELA_LOG_DEBUG(
      "[gemm] cuBLASLt plan rows=", n, " n=", m, " k=", k, " batch=", key[kBatch], ": ",
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
      " ms for ", results.size(), " heuristic candidates");
  return plan;
}

}  // namespace

int64_t gemm_algo_rows(int64_t rows) {
  static const bool on = env_enabled("VELA_GEMM_ROW_BUCKETS");
  if (!on || rows <= 64) return rows;
  if (rows <= 1024) return static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(rows)));
  return (rows + 1023) / 1024 * 1024;
}

namespace {

// A plan for `key` with the algorithm of the plan for `bucket_key` (the same problem at
// gemm_algo_rows rows, planned by the heuristic once), if cuBLASLt accepts it for this shape; null
// otherwise.
std::unique_ptr<GemmPlan> borrow_plan(DeviceGemm& ctx, const GemmKey& key,
                                      const GemmKey& bucket_key) {
  auto it = ctx.plans.find(bucket_key);
  if (it == ctx.plans.end()) {
    std::vector<cublasLtMatmulHeuristicResult_t> results;
    it = ctx.plans.emplace(bucket_key, make_plan(ctx, bucket_key, 1, results)).first;
  }
  std::unique_ptr<GemmPlan> plan = make_descriptors(key);
  cublasLtMatmulHeuristicResult_t check{};
  if (cublasLtMatmulAlgoCheck(ctx.handle, plan->op_desc, plan->a_layout, plan->b_layout,
                              plan->c_layout, plan->c_layout, &it->second->algo,
                              &check) != CUBLAS_STATUS_SUCCESS ||
      check.workspaceSize > kWorkspaceBytes)
    return nullptr;
  plan->algo = it->second->algo;
  return plan;
}

// ---- algorithm search (ops/gemm_tuning.h) ----

// The calling thread's tuning session: options, nesting depth, and device scratch on one device
// (an output buffer for candidate runs and a 2 x L2 buffer overwritten before each timed run).
struct TuneSession {
  int depth = 0;
  GemmTuneOptions options;
  int device = -1;
  void* c_scratch = nullptr;
  size_t c_scratch_bytes = 0;
  void* flush = nullptr;
  size_t flush_bytes = 0;
  std::vector<int> devices;  // devices that tuned in this session (disk cache written at the end)
};
TuneSession& session() {
  thread_local TuneSession s;
  return s;
}

std::string gpu_name(int device) {
  cudaDeviceProp prop{};
  VELA_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

void load_disk_cache(DeviceGemm& ctx, int device, const std::string& path) {
  if (path.empty() || ctx.disk_path == path || ctx.broken_path == path) return;
  ctx.disk_path.clear();
  ctx.disk.clear();
  std::vector<TuneCacheEntry> entries;
  try {
    entries = read_tune_cache(path, gpu_name(device), static_cast<int64_t>(cublasLtGetVersion()));
  } catch (const std::exception& e) {  // tune without it; leave the file as it is
    ctx.broken_path = path;
    VELA_LOG_WARN("[gemm] ignoring the tuning cache: ", e.what());
    return;
  }
  ctx.disk_path = path;
  for (const TuneCacheEntry& e : entries) {
    GemmKey key{};
    cublasLtMatmulAlgo_t algo{};
    constexpr size_t kWords = sizeof(algo.data) / sizeof(algo.data[0]);
    if (e.key.size() != key.size() || e.algo.size() != kWords) continue;
    std::copy(e.key.begin(), e.key.end(), key.begin());
    std::copy(e.algo.begin(), e.algo.end(), algo.data);
    ctx.disk[key] = algo;
  }
}

// Writes this device's tuned plans into the file (entries of other GPUs / versions kept).
void save_disk_cache(DeviceGemm& ctx, int device) {
  if (ctx.disk_path.empty() || !ctx.disk_dirty) return;
  std::vector<TuneCacheEntry> entries;
  for (const auto& [key, algo] : ctx.disk)
    entries.push_back({std::vector<int64_t>(key.begin(), key.end()),
                       std::vector<uint64_t>(std::begin(algo.data), std::end(algo.data))});
  write_tune_cache(ctx.disk_path, gpu_name(device), static_cast<int64_t>(cublasLtGetVersion()),
                   entries);
  ctx.disk_dirty = false;
}

// Grows a session buffer on `device` (from the caching allocator: freeing it at the session's end
// needs no device synchronization); false when the device has no room for it.
bool ensure_buffer(void*& p, size_t& have, size_t want, int device) {
  if (have >= want) return true;
  if (p != nullptr) vela::cuda::device_free(p);
  p = nullptr;
  have = 0;
  try {
    p = vela::cuda::device_alloc(want, device);
  } catch (const std::exception&) {
    return false;
  }
  have = want;
  return true;
}

struct Operands {
  const void* a;  // cuBLAS's A (vela's b)
  const void* b;  // cuBLAS's B (vela's a)
  float alpha;
};

// Median microseconds of `algo` over the session's repetitions, each on a cold L2, into the
// scratch output; negative when the algorithm fails to launch.
double time_algo(DeviceGemm& ctx, const GemmPlan& plan, const cublasLtMatmulAlgo_t& algo,
                 const Operands& ops, cudaStream_t stream, cudaEvent_t begin, cudaEvent_t end) {
  const float beta = 0.0f;
  auto launch = [&] {
    return cublasLtMatmul(ctx.handle, plan.op_desc, &ops.alpha, ops.a, plan.a_layout, ops.b,
                          plan.b_layout, &beta, session().c_scratch, plan.c_layout,
                          session().c_scratch, plan.c_layout, &algo,
                          stream_workspace(ctx, session().device, stream), kWorkspaceBytes, stream);
  };
  if (launch() != CUBLAS_STATUS_SUCCESS) return -1.0;  // warm-up (module load, first touch)
  std::vector<double> us;
  for (int r = 0; r < std::max(session().options.n_reps, 1); ++r) {
    if (session().flush != nullptr)
      VELA_CUDA_CHECK(cudaMemsetAsync(session().flush, r & 0xff, session().flush_bytes, stream));
    VELA_CUDA_CHECK(cudaEventRecord(begin, stream));
    if (launch() != CUBLAS_STATUS_SUCCESS) return -1.0;
    VELA_CUDA_CHECK(cudaEventRecord(end, stream));
    VELA_CUDA_CHECK(cudaEventSynchronize(end));
    float ms = 0;
    VELA_CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
    us.push_back(ms * 1000.0);
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// Picks plan.algo among `results` (the heuristic's order) by timing, or from the disk cache.
// Keeps the heuristic's first choice unless another is at least 3% faster (fewer flips between
// runs whose timings differ by noise).
void tune_plan(DeviceGemm& ctx, int device, const GemmKey& key, GemmPlan& plan,
               const std::vector<cublasLtMatmulHeuristicResult_t>& results, const Operands& ops,
               size_t c_bytes, GemmTuneRecord record) {
  load_disk_cache(ctx, device, session().options.cache_path);
  if (auto it = ctx.disk.find(key); it != ctx.disk.end()) {
    cublasLtMatmulHeuristicResult_t check{};
    if (cublasLtMatmulAlgoCheck(ctx.handle, plan.op_desc, plan.a_layout, plan.b_layout,
                                plan.c_layout, plan.c_layout, &it->second,
                                &check) == CUBLAS_STATUS_SUCCESS &&
        check.workspaceSize <= kWorkspaceBytes) {
      plan.algo = it->second;
      record.from_disk = true;
      ctx.records.push_back(record);
      return;
    }
  }
  cudaStream_t stream = current_stream();
  TuneSession& ts = session();
  if (ts.device < 0) ts.device = device;
  if (ts.device != device) return;  // scratch lives on the session's first device: heuristic here
  if (!ensure_buffer(ts.c_scratch, ts.c_scratch_bytes, c_bytes, device)) return;
  if (ts.flush == nullptr) {
    int l2 = 0;
    VELA_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    if (!ensure_buffer(ts.flush, ts.flush_bytes, 2 * static_cast<size_t>(l2), device))
      ts.flush = nullptr;  // no room: tune with a warm L2
  }
  cudaEvent_t begin = nullptr, end = nullptr;
  VELA_CUDA_CHECK(cudaEventCreate(&begin));
  VELA_CUDA_CHECK(cudaEventCreate(&end));
  int best = -1;
  double best_us = 0, first_us = -1;
  for (size_t i = 0; i < results.size(); ++i) {
    const double us = time_algo(ctx, plan, results[i].algo, ops, stream, begin, end);
    if (i == 0) first_us = us;
    if (us < 0) continue;
    if (best < 0 || us < best_us) {
      best = static_cast<int>(i);
      best_us = us;
    }
  }
  // Every candidate run is done before the scratch can be reused or freed.
  VELA_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  if (best < 0) return;  // nothing ran: keep the heuristic's choice untimed
  if (first_us > 0 && best_us > 0.97 * first_us) {
    best = 0;
    best_us = first_us;
  }
  plan.algo = results[static_cast<size_t>(best)].algo;
  record.n_candidates = static_cast<int32_t>(results.size());
  record.chosen = best;
  record.heuristic_us = first_us;
  record.best_us = best_us;
  ctx.records.push_back(record);
  if (!ctx.disk_path.empty() && ctx.disk_path == session().options.cache_path) {
    ctx.disk[key] = plan.algo;
    ctx.disk_dirty = true;
  }
}

// True while `stream` is being captured (or when the query fails: then do not tune either).
bool stream_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return true;
  }
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace

void set_gemm_allow_tf32(bool allow) { g_allow_tf32.store(allow); }
bool gemm_allow_tf32() { return g_allow_tf32.load(); }

int64_t gemm_plan_cache_size(int device) {
  DeviceGemm& ctx = device_gemm(device);
  std::lock_guard<std::mutex> lock(ctx.mu);
  return static_cast<int64_t>(ctx.plans.size());
}

void gemm_tuning_begin(const GemmTuneOptions& options) {
  VELA_CHECK(options.n_candidates >= 1 && options.n_reps >= 1 && options.max_rows >= 0,
             "GEMM tuning: n_candidates and n_reps must be >= 1, max_rows >= 0 (got ",
             options.n_candidates, ", ", options.n_reps, ", ", options.max_rows, ")");
  if (session().depth++ == 0) session().options = options;
}

void gemm_tuning_end() {
  VELA_ASSERT(session().depth > 0, "gemm_tuning_end without gemm_tuning_begin");
  if (--session().depth > 0) return;
  for (int device : session().devices) {
    DeviceGemm& ctx = device_gemm(device);
    std::lock_guard<std::mutex> lock(ctx.mu);
    try {
      save_disk_cache(ctx, device);
    } catch (const std::exception& e) {  // a read-only cache costs the next start its search only
      VELA_LOG_WARN("[gemm] could not write the tuning cache: ", e.what());
    }
  }
  TuneSession& ts = session();
  ts.devices.clear();
  if (ts.c_scratch != nullptr) vela::cuda::device_free(ts.c_scratch);
  if (ts.flush != nullptr) vela::cuda::device_free(ts.flush);
  ts.c_scratch = ts.flush = nullptr;
  ts.c_scratch_bytes = ts.flush_bytes = 0;
  ts.device = -1;
}

bool gemm_tuning_active() { return session().depth > 0; }

std::vector<GemmTuneRecord> gemm_tune_records(int device) {
  DeviceGemm& ctx = device_gemm(device);
  std::lock_guard<std::mutex> lock(ctx.mu);
  return ctx.records;
}

void gemm(const Tensor& a, const Tensor& b, Tensor& c, bool trans_a, bool trans_b, float alpha,
          float beta) {
  const int device = c.device().index;
  DeviceGuard guard(device);
  // Row-major problem.
  int64_t n_batch = c.dim() == 3 ? c.size(0) : 1;
  int64_t rows_m = c.size(-2), cols_n = c.size(-1);
  const int64_t inner_k = trans_a ? a.size(-2) : a.size(-1);
  if (n_batch == 0 || rows_m == 0 || cols_n == 0) return;
  if (inner_k == 0) {
    if (beta == 1.0f) return;
    gemm_scale_c(c, beta, n_batch, rows_m, cols_n);
    return;
  }
  // Decode-shaped problems (a few rows against a weight matrix) are bandwidth-bound: 1..2 rows
  // on the GEMV, 3..64 on the wgmma GEMM (sm_90, VELA_WGMMA_ROWS), else 3..8 on the skinny
  // tensor-core GEMM.
  if (gemv_small_m(a, b, c, trans_a, trans_b, alpha, beta)) return;
#ifdef VELA_HAS_SM90A
  if (gemm_wgmma(a, b, c, trans_a, trans_b, alpha, beta)) return;
#endif
  if (gemm_skinny(a, b, c, trans_a, trans_b, alpha, beta)) return;
  int64_t stride_a = a.dim() == 3 ? a.stride(0) : 0;
  int64_t stride_b = b.dim() == 3 ? b.stride(0) : 0;
  int64_t stride_c = c.dim() == 3 ? c.stride(0) : 0;
  int64_t a_row_stride = a.stride(-2), c_row_stride = c.stride(-2);
  // A shared b with untransposed, evenly strided a and c is one big GEMM: fold batch into M.
  const bool rows_are_batches = rows_m == 1 && stride_a >= inner_k && stride_c >= cols_n;
  if (n_batch > 1 && stride_b == 0 && !trans_a && a.dim() == 3 &&
      (rows_are_batches ||
       (rows_m > 1 && stride_a == rows_m * a_row_stride && stride_c == rows_m * c_row_stride))) {
    if (rows_m == 1) {  // rows are the batches
      a_row_stride = stride_a;
      c_row_stride = stride_c;
    }
    rows_m *= n_batch;
    n_batch = 1;
    stride_a = stride_c = 0;
  }
  const DType in_dtype = a.dtype();
  const bool tf32 = in_dtype == DType::kF32 && gemm_allow_tf32();
  // Stored row-major shapes: a is [M, K] ([K, M] when trans_a), b is [K, N] ([N, K] when trans_b).
  const int64_t a_rows = trans_a ? inner_k : rows_m, a_cols = trans_a ? rows_m : inner_k;
  const int64_t b_rows = trans_b ? cols_n : inner_k, b_cols = trans_b ? inner_k : cols_n;

  GemmKey key{};
  key[kM] = cols_n;  // column-major problem: c^T [N, M] = op(b)^T [N, K] @ op(a)^T [K, M]
  key[kN] = rows_m;
  key[kK] = inner_k;
  key[kBatch] = n_batch;
  key[kTransA] = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  key[kTransB] = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  key[kLda] = leading_dim(b_rows, b_cols, b.stride(-2));
  key[kLdb] = leading_dim(a_rows, a_cols, a_row_stride);
  key[kLdc] = leading_dim(rows_m, cols_n, c_row_stride);
  key[kStrideA] = stride_b;
  key[kStrideB] = stride_a;
  key[kStrideC] = stride_c;
  key[kInType] = cuda_type(in_dtype);
  key[kOutType] = cuda_type(c.dtype());
  key[kCompute] = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  key[kAlignA] = pointer_alignment(b.data_ptr());
  key[kAlignB] = pointer_alignment(a.data_ptr());
  key[kAlignC] = pointer_alignment(c.data_ptr());

  DeviceGemm& ctx = device_gemm(device);
  GemmPlan* plan = nullptr;
  void* workspace = nullptr;
  const cudaStream_t stream = current_stream();
  {
    std::lock_guard<std::mutex> lock(ctx.mu);
    workspace = stream_workspace(ctx, device, stream);
    auto it = ctx.plans.find(key);
    if (it == ctx.plans.end()) {
      // Small-M, single-matrix shapes in a tuning session, outside stream capture.
      const bool tune = session().depth > 0 && n_batch == 1 && rows_m > 8 &&
                        rows_m <= session().options.max_rows && !stream_capturing(current_stream());
      std::vector<cublasLtMatmulHeuristicResult_t> results;
      std::unique_ptr<GemmPlan> made;
      // a's rows are the column count of cuBLAS's B: only untransposed (its leading dimension
      // does not grow with the rows) may borrow a plan of more rows.
      if (!tune && n_batch == 1 && !trans_a && gemm_algo_rows(rows_m) != rows_m) {
        GemmKey bucket_key = key;
        bucket_key[kN] = gemm_algo_rows(rows_m);
        try {
          made = borrow_plan(ctx, key, bucket_key);
        } catch (const std::exception& e) {  // planning the bucket failed: plan this shape alone
          VELA_LOG_DEBUG("[gemm] no plan to borrow at ", bucket_key[kN], " rows: ", e.what());
        }
      }
      if (!made) made = make_plan(ctx, key, tune ? session().options.n_candidates : 1, results);
      if (tune) {
        if (std::find(session().devices.begin(), session().devices.end(), device) ==
            session().devices.end())
          session().devices.push_back(device);
        GemmTuneRecord record;
        record.m = rows_m;
        record.n = cols_n;
        record.k = inner_k;
        record.in_dtype = dtype_name(in_dtype);
        record.out_dtype = dtype_name(c.dtype());
        const size_t c_bytes =
            static_cast<size_t>((rows_m - 1) * key[kLdc] + cols_n) * dtype_size(c.dtype());
        try {
          tune_plan(ctx, device, key, *made, results, Operands{b.data_ptr(), a.data_ptr(), alpha},
                    c_bytes, record);
        } catch (const std::exception& e) {  // the search is an optimization: keep the heuristic's
          made->algo = results[0].algo;
          VELA_LOG_WARN("[gemm] algorithm search failed for m=", rows_m, " n=", cols_n,
                        " k=", inner_k, ", keeping the heuristic's choice: ", e.what());
        }
      }
      it = ctx.plans.emplace(key, std::move(made)).first;
    }
    plan = it->second.get();  // plans are never erased: the pointer stays valid
  }
  VELA_CUBLAS_CHECK(cublasLtMatmul(ctx.handle, plan->op_desc, &alpha, b.data_ptr(), plan->a_layout,
                                   a.data_ptr(), plan->b_layout, &beta, c.data_ptr(),
                                   plan->c_layout, c.data_ptr(), plan->c_layout, &plan->algo,
                                   workspace, kWorkspaceBytes, stream));
}

SkinnyScratch gemm_skinny_scratch(int device) {
  DeviceGemm& ctx = device_gemm(device);
  const cudaStream_t stream = current_stream();
  std::lock_guard<std::mutex> lock(ctx.mu);
  char* w = static_cast<char*>(stream_workspace(ctx, device, stream));
  SkinnyScratch s;
  s.partials = reinterpret_cast<float*>(w);
  s.partial_bytes = kWorkspaceBytes;
  s.counters = reinterpret_cast<int*>(w + kWorkspaceBytes);
  s.n_counters = kSkinnyCounters;
  return s;
}

void gemm_release_stream(cudaStream_t stream, int device) {
  DeviceGemm& ctx = device_gemm(device);
  std::lock_guard<std::mutex> lock(ctx.mu);
  auto it = ctx.workspaces.find(stream);
  if (it == ctx.workspaces.end()) return;
  vela::cuda::device_free(it->second);
  ctx.workspaces.erase(it);
}

}  // namespace vela::ops::cuda
