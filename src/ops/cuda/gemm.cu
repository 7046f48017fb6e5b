// CUDA GEMM through cuBLASLt: c = alpha * op(a) @ op(b) + beta * c on row-major tensors, fp32
// accumulation (CUBLAS_COMPUTE_32F; TF32 only when allowed, see gemm_cublaslt.h).
//
// cuBLAS is column-major, so the row-major c[M, N] is computed as the column-major
// c^T[N, M] = op(b)^T @ op(a)^T: b's storage is cuBLAS's A, a's storage is cuBLAS's B, and the
// transposes carry over unchanged. One cuBLASLt handle and one 32 MiB workspace (from the caching
// allocator) per device; descriptors and the heuristic's algorithm are cached per shape key, so a
// repeated shape makes no heuristic query.
#include <cublasLt.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/cuda/cuda_api.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/gemm_cublaslt.h"

#define VELA_CUBLAS_CHECK(expr)                                                                \
  do {                                                                                         \
    cublasStatus_t vela_status_ = (expr);                                                      \
    if (vela_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                                    \
      ::vela::detail::throw_at<::vela::CudaError>(__FILE__, __LINE__, #expr ": ",              \
                                                  cublasLtGetStatusName(vela_status_), " (",   \
                                                  cublasLtGetStatusString(vela_status_), ")"); \
  } while (0)

namespace vela::ops::cuda {

// c[b, i, j] *= beta (beta == 0 writes zeros, so NaN in c does not survive): the k == 0 GEMM.
template <typename T>
static __global__ void scale_matrix_kernel(T* c, float beta, int64_t n_batch, int64_t n_rows,
                                           int64_t n_cols, int64_t batch_stride,
                                           int64_t row_stride) {
  const int64_t n = n_batch * n_rows * n_cols;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const int64_t col = i % n_cols, row = (i / n_cols) % n_rows, batch = i / (n_cols * n_rows);
    T& v = c[batch * batch_stride + row * row_stride + col];
    v = from_float<T>(beta == 0.0f ? 0.0f : beta * to_float(v));
  }
}

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;
constexpr int kMaxDevices = 64;

std::atomic<bool> g_allow_tf32{[] {
  const char* env = std::getenv("VELA_ALLOW_TF32");
  return env != nullptr && env[0] == '1';
}()};

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
};

// Per device: handle, workspace, plans. Never destroyed (plans outlive static destruction order).
struct DeviceGemm {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::mutex mu;  // guards plans
  std::unordered_map<GemmKey, std::unique_ptr<GemmPlan>, GemmKeyHash> plans;
};

DeviceGemm& device_gemm(int device) {
  static std::mutex mu;
  static std::array<DeviceGemm*, kMaxDevices> contexts{};
  VELA_CHECK(device >= 0 && device < kMaxDevices, "CUDA device ", device, " out of range");
  std::lock_guard<std::mutex> lock(mu);
  if (!contexts[device]) {
    auto ctx = std::make_unique<DeviceGemm>();
    VELA_CUBLAS_CHECK(cublasLtCreate(&ctx->handle));
    ctx->workspace = vela::cuda::device_alloc(kWorkspaceBytes, device);
    contexts[device] = ctx.release();
  }
  return *contexts[device];
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

std::unique_ptr<GemmPlan> make_plan(DeviceGemm& ctx, const GemmKey& key) {
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

  cublasLtMatmulHeuristicResult_t result{};
  int n_results = 0;
  cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(ctx.handle, plan->op_desc, plan->a_layout, plan->b_layout,
                                     plan->c_layout, plan->c_layout, pref, 1, &result, &n_results);
  cublasLtMatmulPreferenceDestroy(pref);
  VELA_CUBLAS_CHECK(status);
  VELA_CHECK_T(Unsupported, n_results > 0 && result.state == CUBLAS_STATUS_SUCCESS,
               "cuBLASLt has no algorithm for gemm m=", m, " n=", n, " k=", k,
               " batch=", key[kBatch], " lda=", key[kLda], " ldb=", key[kLdb], " ldc=", key[kLdc]);
  plan->algo = result.algo;
  return plan;
}

template <typename T>
void scale_c(Tensor& c, float beta, int64_t n_batch, int64_t m, int64_t n) {
  constexpr int kThreads = 256;
  const int64_t batch_stride = c.dim() == 3 ? c.stride(0) : 0;
  scale_matrix_kernel<T>
      <<<grid_stride_blocks(n_batch * m * n, kThreads), kThreads, 0, current_stream()>>>(
          static_cast<T*>(c.data_ptr()), beta, n_batch, m, n, batch_stride, c.stride(-2));
  VELA_CUDA_CHECK_LAUNCH();
}

}  // namespace

void set_gemm_allow_tf32(bool allow) { g_allow_tf32.store(allow); }
bool gemm_allow_tf32() { return g_allow_tf32.load(); }

int64_t gemm_plan_cache_size(int device) {
  DeviceGemm& ctx = device_gemm(device);
  std::lock_guard<std::mutex> lock(ctx.mu);
  return static_cast<int64_t>(ctx.plans.size());
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
    dispatch_float(c.dtype(),
                   [&](auto tag) { scale_c<decltype(tag)>(c, beta, n_batch, rows_m, cols_n); });
    return;
  }
  // Decode-shaped problems (a few rows against a weight matrix) are bandwidth-bound GEMVs.
  if (gemv_small_m(a, b, c, trans_a, trans_b, alpha, beta)) return;
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
  {
    std::lock_guard<std::mutex> lock(ctx.mu);
    auto it = ctx.plans.find(key);
    if (it == ctx.plans.end()) it = ctx.plans.emplace(key, make_plan(ctx, key)).first;
    plan = it->second.get();  // plans are never erased: the pointer stays valid
  }
  VELA_CUBLAS_CHECK(cublasLtMatmul(ctx.handle, plan->op_desc, &alpha, b.data_ptr(), plan->a_layout,
                                   a.data_ptr(), plan->b_layout, &beta, c.data_ptr(),
                                   plan->c_layout, c.data_ptr(), plan->c_layout, &plan->algo,
                                   ctx.workspace, kWorkspaceBytes, current_stream()));
}

}  // namespace vela::ops::cuda
