// Bootstrap: how a vela process learns its place in a data-parallel job, like torchrun:
//   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT  (torchrun's names;
//     `vela train --nproc-per-node N` sets them for the ranks it spawns, several hosts set them
//     by hand or through a scheduler), or
//   OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE  (under mpirun; MASTER_ADDR/PORT are
//     then only needed for the nccl backend's store).
// VELA_DIST_TIMEOUT (seconds, default 300) bounds every wait for another rank; VELA_DIST_BACKEND
// (mpi | store | nccl) overrides the backend choice. Neither set: a single process (world 1).
// Malformed or inconsistent values are InvalidArgument naming the variable.
#pragma once

#include "dist/process_group.h"

namespace vela::dist {

DistOptions dist_options_from_env();

}  // namespace vela::dist
