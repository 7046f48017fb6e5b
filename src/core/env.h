// Process-wide switches and numbers from VELA_* environment variables: kernel and fusion toggles
// for A/B runs, debug knobs. Callers read once and keep the value (a static local): a switch holds
// for the whole process; each reader documents its variable.
#pragma once

#include <cstdint>

namespace vela {

// True unless `name` is set to a value starting with '0': the default-on kernels and fusions
// (VELA_PDL, VELA_FUSED_DECODE, VELA_WGMMA_GEMM, ...).
bool env_enabled(const char* name);

// True when `name` is set to a value starting with '1': default-off options (VELA_ALLOW_TF32,
// VELA_TIME_DEVICE).
bool env_opted_in(const char* name);

// `name` as an integer clamped to [lo, hi], `fallback` when unset or empty; InvalidArgument when
// it is not an integer (e.g. VELA_GEMV_MAX_ROWS=two).
int64_t env_int(const char* name, int64_t fallback, int64_t lo, int64_t hi);

}  // namespace vela
