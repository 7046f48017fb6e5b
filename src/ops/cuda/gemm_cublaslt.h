// Knobs and introspection of the cuBLASLt GEMM behind ops::cuda::gemm (ops/cuda/gemm.cu).
// Thread-safe. CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ops/gemm_tuning.h"

namespace vela::ops::cuda {

// f32 x f32 GEMMs may use TF32 tensor cores (10-bit mantissa inputs) when allowed. Off by default,
// so f32 GEMMs are exact fp32; the environment variable VELA_ALLOW_TF32=1 turns it on at start.
void set_gemm_allow_tf32(bool allow);
bool gemm_allow_tf32();

// Frees the GEMM workspace of `stream` on `device` (each stream has its own: GEMMs of two streams
// may run at once). The stream's owner calls it before destroying the stream, once the stream is
// idle and no graph captured on it remains (graphs hold the workspace's address). A later GEMM on
// the stream allocates a new one.
void gemm_release_stream(cudaStream_t stream, int device);

// Number of cached GEMM plans on `device`. A repeated shape adds none; a new shape adds one, or
// two when it borrows its algorithm from a row bucket planned for the first time (below).
int64_t gemm_plan_cache_size(int device = 0);

// The row count whose plan's algorithm a single-matrix GEMM of `rows` rows (a untransposed, not
// in an algorithm search) uses: `rows` up to 64, then the next power of two up to 1024, then the
// next multiple of 1024. A serving step's row count (decode rows plus prompt chunks) changes from
// step to step; planning each count alone cost cuBLASLt's heuristic (~0.3 ms per shape) and often
// the lazy load of another kernel (~15 ms) inside that step. The borrowed algorithm is checked
// (cublasLtMatmulAlgoCheck) for the real shape; one that does not fit is planned alone.
// VELA_GEMM_ROW_BUCKETS=0 (read once) plans every row count alone.
int64_t gemm_algo_rows(int64_t rows);

// Algorithm search (ops/gemm_tuning.h): while a tuning session is open on the calling thread, a
// GEMM whose plan is new and whose row count M is in [9, max_rows] (one matrix, not batched, not
// inside a stream capture) times the heuristic's top candidates on its own operands and keeps the
// fastest. begin/end nest; the outermost end writes the disk cache (if any) and frees the scratch.
void gemm_tuning_begin(const GemmTuneOptions& options);
void gemm_tuning_end();
bool gemm_tuning_active();

// Every plan tuned (or taken from the disk cache) on `device` so far, in order.
std::vector<GemmTuneRecord> gemm_tune_records(int device = 0);

}  // namespace vela::ops::cuda
