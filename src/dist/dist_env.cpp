// Reads the launcher's environment variables; see dist_env.h.
#include "dist/dist_env.h"

#include <cstdlib>
#include <string>

namespace vela::dist {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

int env_int(const char* name, int fallback, int lo, int hi) {
  const char* v = env(name);
  if (v == nullptr) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  VELA_CHECK(end != v && *end == '\0' && x >= lo && x <= hi, "environment variable ", name, "='", v,
             "' must be an integer in [", lo, ", ", hi, "]");
  return static_cast<int>(x);
}

}  // namespace

DistOptions dist_options_from_env() {
  DistOptions o;
  const bool torchrun = env("WORLD_SIZE") != nullptr;
  o.under_mpirun = env("OMPI_COMM_WORLD_SIZE") != nullptr;
  if (torchrun) {
    o.world_size = env_int("WORLD_SIZE", 1, 1, 1 << 20);
    o.rank = env_int("RANK", -1, 0, o.world_size - 1);
    VELA_CHECK(o.rank >= 0, "WORLD_SIZE is set but RANK is not (set RANK=0..", o.world_size - 1,
               " for each process, or launch with `vela train --nproc-per-node N`)");
    o.local_rank = env_int("LOCAL_RANK", o.rank, 0, o.world_size - 1);
    o.local_world_size = env_int("LOCAL_WORLD_SIZE", o.world_size, 1, o.world_size);
  } else if (o.under_mpirun) {
    o.world_size = env_int("OMPI_COMM_WORLD_SIZE", 1, 1, 1 << 20);
    o.rank = env_int("OMPI_COMM_WORLD_RANK", 0, 0, o.world_size - 1);
    o.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0, 0, o.world_size - 1);
    o.local_world_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1, 1, o.world_size);
  }
  if (const char* a = env("MASTER_ADDR")) o.master_addr = a;
  o.master_port = env_int("MASTER_PORT", 0, 0, 65535);
  const int timeout_s = env_int("VELA_DIST_TIMEOUT", 300, 1, 1 << 24);
  o.timeout = std::chrono::milliseconds(int64_t{timeout_s} * 1000);
  if (const char* b = env("VELA_DIST_BACKEND")) {
    o.backend = b;
    VELA_CHECK(o.backend == "mpi" || o.backend == "store" || o.backend == "nccl",
               "VELA_DIST_BACKEND='", o.backend, "' must be mpi, store or nccl");
  }
  return o;
}

}  // namespace vela::dist
